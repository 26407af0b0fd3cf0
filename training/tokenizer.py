#!/usr/bin/env python3
"""Train the byte-level BPE tokenizer on the training split.

    python3 training/tokenizer.py [--corpus training/out/corpus] [--out training/out/tokenizer.json]

HF `tokenizers` BPE, GPT-2 style: ByteLevel pre-tokenizer (add_prefix_space false, the GPT-2
regex), ByteLevel decoder and post-processor, BpeTrainer with vocab_size 4096 (the 256 byte
symbols, the merges, and the special token `<|endoftext|>` at id 0), min_frequency 2. Trained on
train.txt only, so valid/test see no leakage. Deterministic for a fixed `tokenizers` version.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

ROOT = Path(__file__).resolve().parents[1]
VOCAB = 4096
EOT = "<|endoftext|>"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(ROOT / "training/out/corpus"))
    ap.add_argument("--out", default=str(ROOT / "training/out/tokenizer.json"))
    args = ap.parse_args()
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        min_frequency=2,
        special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train([str(Path(args.corpus) / "train.txt")], trainer)
    assert tok.get_vocab_size() == VOCAB, tok.get_vocab_size()
    assert tok.token_to_id(EOT) == 0
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    tok.save(args.out)
    s = "It is a truth universally acknowledged, that a single man in possession of a good fortune."
    ids = tok.encode(s).ids
    assert tok.decode(ids) == s
    data = Path(args.out).read_bytes()
    print(f"tokenizer: {args.out} vocab {tok.get_vocab_size()} sha256 {hashlib.sha256(data).hexdigest()}")
    for name in ("train", "valid", "test"):
        text = (Path(args.corpus) / f"{name}.txt").read_text(encoding="utf-8")
        n = len(tok.encode(text).ids)
        print(f"  {name}: {n} tokens ({len(text.encode()) / n:.2f} bytes/token)")
    print(f"  sample: {ids}")


if __name__ == "__main__":
    main()
