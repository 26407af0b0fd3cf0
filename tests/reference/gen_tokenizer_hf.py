#!/usr/bin/env python3
"""Generate the Hugging Face `tokenizers` fixtures under tests/fixtures/tokenizer/.

1. hf_ids.json: the ids HF gives every chunk of corpus.json for SmolLM2 and Gemma 3. Neither
   tokenizer.json can be downloaded here (no model hub), so both tokenizers are the ones
   transformers builds from the GGUFs in cache/models/ (`AutoTokenizer.from_pretrained(dir,
   gguf_file=...)`); `smollm2_digits` is SmolLM2's with the digit-isolating pre-tokenizer its
   published tokenizer.json has (Digits(individual_digits) then ByteLevel) instead of
   transformers' plain ByteLevel. `plain` is encoded with `encode_special_tokens = True` (special tokens are
   text, user-defined added tokens still match: llama.cpp's parse_special off) and `special` with
   it off. A value of "=" means "the same ids as llamacpp_ids.json" (written by
   gen_tokenizer_llamacpp.mjs, which must run first); anything else is base64 of LEB128 varints.
   `disagree` lists the chunks where HF and llama.cpp differ.
2. hf_<model>_skeleton.json: that tokenizer.json without model.vocab, model.merges and
   added_tokens, plus the sha256 of each (and transformers' add_bos_token). The Deno test rebuilds
   the three from the GGUF the way transformers does, checks the hashes, and so runs the real
   262k-token Gemma tokenizer.json (12 MB, 6384 added tokens) without committing it.
3. pretokenize.json: for the pre-tokenizer regexes llama.cpp names gpt2, llama3, qwen2, smollm
   and default, HF's own split of every chunk (`pre_tokenizers.*.pre_tokenize_str`), as the
   sha256 of the comma-joined UTF-16 lengths of the pieces.
4. tiny_<shape>.json: four small tokenizer.json files trained here with `tokenizers` on the corpus,
   one per shape cflow reads (SmolLM2-like byte-level BPE with digit splitting, Llama-3-like
   regex Split + byte-level + ignore_merges + template, Gemma-like byte-fallback BPE with a
   Replace normalizer, and a Llama-2-like NFC/Prepend/Replace normalizer with unk, lstrip/rstrip/
   single_word/normalized added tokens), and tiny_ids.json: their ids (full for edge strings,
   sha256 for long chunks) and HF's decode of those ids.

Every file is run through `./dev fmt` at the end (the repository's format check covers JSON).

Usage (Python is only needed to regenerate):

    pip install --target /tmp/pyhf torch==2.15.0 transformers==5.24.0   # brings tokenizers 0.23.3
    pip install --target /tmp/pytok --no-deps gguf==0.19.0
    bash scripts/fetch-models.sh smollm2 gemma3
    PYTHONPATH=/tmp/pytok:/tmp/pyhf python3 tests/reference/gen_tokenizer_hf.py
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
from importlib.metadata import version
from pathlib import Path

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import BPE
from tokenizers.trainers import BpeTrainer
from transformers import AutoTokenizer

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "tokenizer"
MODELS = {
    "smollm2": "smollm2-135m-instruct.Q4_1.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.gguf",
}

GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
         r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


DIGITS_BYTE_LEVEL = pre_tokenizers.Sequence([
    pre_tokenizers.Digits(individual_digits=True),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
])


def split(pattern: str) -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.Split(Regex(pattern), behavior="isolated")


# llama.cpp's pre-tokenizer regex lists (src/llama-vocab.cpp), as HF pre-tokenizers.
PRETOKENIZERS = {
    "gpt2": split(GPT2),
    "llama3": split(LLAMA3),
    "qwen2": split(QWEN2),
    "smollm": pre_tokenizers.Sequence([split(r"\p{N}"), split(GPT2)]),
    "default": pre_tokenizers.Sequence([
        split(r"[\p{P}\$\+<=>\^~\|]+"), split(GPT2), split(r"\p{N}+"), split(r"[0-9][0-9][0-9]"),
    ]),
}


def varint_b64(ids: list[int]) -> str:
    out = bytearray()
    for i in ids:
        while i >= 0x80:
            out.append((i & 0x7F) | 0x80)
            i >>= 7
        out.append(i)
    return base64.b64encode(bytes(out)).decode("ascii")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def short(text: str) -> str:
    """The first 16 hex digits of sha256: enough to catch a regression, small enough to commit."""
    return sha(text)[:16]


def ids_hash(ids: list[int]) -> str:
    return short(",".join(map(str, ids)))


def utf16_len(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def unvarint(b64: str) -> list[int]:
    out, cur, shift = [], 0, 0
    for b in base64.b64decode(b64):
        cur |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            out.append(cur)
            cur, shift = 0, 0
    return out


def encode(tok: Tokenizer, text: str, parse_special: bool) -> list[int]:
    tok.encode_special_tokens = not parse_special
    return tok.encode(text, add_special_tokens=False).ids


def real_models(corpus: list[dict]) -> None:
    llamacpp = json.loads((FIX / "llamacpp_ids.json").read_text(encoding="utf-8"))
    out = {
        "generator": "tests/reference/gen_tokenizer_hf.py",
        "tokenizers": version("tokenizers"),
        "transformers": version("transformers"),
        "models": {},
    }
    for name, file in MODELS.items():
        hf = AutoTokenizer.from_pretrained(str(ROOT / "cache" / "models"), gguf_file=file)
        tok: Tokenizer = hf.backend_tokenizer
        ref = llamacpp["models"][name]["chunks"]
        variants = {name: tok}
        if name == "smollm2":
            # transformers builds SmolLM2's tokenizer with a plain ByteLevel pre-tokenizer; the
            # published tokenizer.json (and llama.cpp's "smollm" pre-tokenizer) first isolate
            # every digit. Encode with that pre-tokenizer too.
            digits = Tokenizer.from_str(tok.to_str())
            digits.pre_tokenizer = DIGITS_BYTE_LEVEL
            variants["smollm2_digits"] = digits
        for variant, vtok in variants.items():
            chunks, disagree = {}, []
            for c in corpus:
                entry = {}
                lc_plain = unvarint(ref[c["name"]]["plain"])
                lc_special = unvarint(ref[c["name"]].get("special", ref[c["name"]]["plain"]))
                plain = encode(vtok, c["text"], False)
                special = encode(vtok, c["text"], True)
                entry["plain"] = "=" if plain == lc_plain else varint_b64(plain)
                entry["special"] = "=" if special == lc_special else varint_b64(special)
                if entry["plain"] != "=" or entry["special"] != "=":
                    disagree.append(c["name"])
                chunks[c["name"]] = entry
            out["models"][variant] = {"gguf": file, "disagree": disagree, "chunks": chunks}
            print(f"{variant}: HF and llama.cpp disagree on {len(disagree)} of {len(corpus)} chunks: {disagree}")
        tok.encode_special_tokens = False
        with_special = {t: tok.encode(t, add_special_tokens=True).ids for t in ["Hello", ""]}
        j = json.loads(tok.to_str())
        vocab = j["model"].pop("vocab")
        merges = j["model"].pop("merges")
        by_id = sorted(vocab.items(), key=lambda kv: kv[1])
        assert [i for _, i in by_id] == list(range(len(by_id)))
        added = j.pop("added_tokens")
        flags = {(a["single_word"], a["lstrip"], a["rstrip"], a["normalized"]) for a in added}
        assert flags == {(False, False, False, False)}, flags
        skeleton = {
            "tokenizer_json": j,
            "added_tokens_count": len(added),
            "added_tokens_sha256": sha("".join(f"{a['id']}\1{a['content']}\1{int(a['special'])}\0" for a in added)),
            "vocab_size": len(by_id),
            "vocab_sha256": sha("\0".join(t for t, _ in by_id)),
            "merges_count": len(merges),
            "merges_sha256": sha("".join(f"{a}\1{b}\0" for a, b in merges)),
            "add_bos_token": getattr(hf, "add_bos_token", None),
            "add_eos_token": getattr(hf, "add_eos_token", None),
            "with_special": with_special,
        }
        if name == "smollm2":
            skeleton["digits_pre_tokenizer"] = json.loads(DIGITS_BYTE_LEVEL.__getstate__())
        (FIX / f"hf_{name}_skeleton.json").write_text(
            json.dumps(skeleton, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    (FIX / "hf_ids.json").write_text(json.dumps(out, ensure_ascii=False) + "\n", encoding="utf-8")


def pretokenize(corpus: list[dict]) -> None:
    out = {"generator": "tests/reference/gen_tokenizer_hf.py", "tokenizers": version("tokenizers"),
           "hash": "first 16 hex digits of the sha256 of the comma-joined UTF-16 lengths of the pieces", "types": {}}
    for kind, pre in PRETOKENIZERS.items():
        out["types"][kind] = {
            c["name"]: short(",".join(str(utf16_len(p)) for p, _ in pre.pre_tokenize_str(c["text"])))
            for c in corpus
        }
    (FIX / "pretokenize.json").write_text(json.dumps(out) + "\n", encoding="utf-8")


def byte_level_trainer(size: int, specials: list[str]) -> BpeTrainer:
    return BpeTrainer(vocab_size=size, special_tokens=specials, show_progress=False,
                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())


def tiny_bytelevel(texts: list[str]) -> Tokenizer:
    tok = Tokenizer(BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.train_from_iterator(texts, byte_level_trainer(700, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]))
    tok.add_tokens([AddedToken("<tool>", normalized=False, special=False)])
    return tok


def tiny_llama3(texts: list[str]) -> Tokenizer:
    tok = Tokenizer(BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        split(LLAMA3), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
    tok.train_from_iterator(texts, byte_level_trainer(900, specials))
    tok.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A $B",
        special_tokens=[("<|begin_of_text|>", tok.token_to_id("<|begin_of_text|>"))])
    return tok


def with_byte_tokens(tok: Tokenizer, specials: list[str]) -> Tokenizer:
    """Rebuild a trained BPE with `specials`, then <0x00>..<0xFF>, then the trained vocab."""
    j = json.loads(tok.to_str())
    trained = sorted(j["model"]["vocab"].items(), key=lambda kv: kv[1])
    vocab: dict[str, int] = {}
    for t in specials + [f"<0x{b:02X}>" for b in range(256)] + [t for t, _ in trained]:
        vocab.setdefault(t, len(vocab))
    j["model"]["vocab"] = vocab
    j["added_tokens"] = [
        {"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True} for t in specials
    ]
    return Tokenizer.from_str(json.dumps(j))


def tiny_gemma(texts: list[str]) -> Tokenizer:
    specials = ["<pad>", "<eos>", "<bos>", "<unk>"]
    tok = Tokenizer(BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
    tok.train_from_iterator(texts, BpeTrainer(vocab_size=800, limit_alphabet=150, show_progress=False))
    tok = with_byte_tokens(tok, specials)
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A <bos> $B", special_tokens=[("<bos>", tok.token_to_id("<bos>"))])
    tok.add_tokens([AddedToken("\n\n", normalized=False, special=False)])
    return tok


def tiny_metaspace(texts: list[str]) -> Tokenizer:
    tok = Tokenizer(BPE(unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Sequence([
        normalizers.NFC(), normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581"),
    ])
    tok.train_from_iterator(
        texts, BpeTrainer(vocab_size=600, limit_alphabet=120, show_progress=False,
                          special_tokens=["<unk>", "<s>", "</s>"]))
    tok.decoder = decoders.Sequence([
        decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0),
    ])
    tok.add_special_tokens([AddedToken("[MASK]", lstrip=True, special=True),
                            AddedToken("<sep>", rstrip=True, special=True)])
    tok.add_tokens([AddedToken("cat", single_word=True, normalized=False, special=False),
                    AddedToken("dog", normalized=True, special=False)])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> $B </s>",
        special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))])
    return tok


def tiny(corpus: list[dict]) -> None:
    texts = [c["text"] for c in corpus if not c["name"].startswith("edge")]
    builders = {"bytelevel": tiny_bytelevel, "llama3": tiny_llama3, "gemma": tiny_gemma,
                "metaspace": tiny_metaspace}
    out = {"generator": "tests/reference/gen_tokenizer_hf.py", "tokenizers": version("tokenizers"),
           "tokenizers": {}}
    for name, build in builders.items():
        tok = build(texts)
        (FIX / f"tiny_{name}.json").write_text(tok.to_str() + "\n", encoding="utf-8")
        tok = Tokenizer.from_file(str(FIX / f"tiny_{name}.json"))
        cases = {}
        for c in corpus:
            plain = encode(tok, c["text"], False)
            special = encode(tok, c["text"], True)
            tok.encode_special_tokens = False
            added = tok.encode(c["text"], add_special_tokens=True).ids
            decoded = tok.decode(special, skip_special_tokens=False)
            skipped = tok.decode(special, skip_special_tokens=True)
            if c["name"].startswith("edge"):
                cases[c["name"]] = {"plain": varint_b64(plain), "special": varint_b64(special),
                                    "added": varint_b64(added), "decoded": decoded, "skipped": skipped}
            else:
                cases[c["name"]] = {"plain": ids_hash(plain), "special": ids_hash(special),
                                    "added": ids_hash(added), "decoded": short(decoded), "skipped": short(skipped)}
        out["tokenizers"][name] = cases
        print(f"tiny_{name}.json: vocab {tok.get_vocab_size()}")
    (FIX / "tiny_ids.json").write_text(json.dumps(out, ensure_ascii=False) + "\n", encoding="utf-8")


def main() -> None:
    print(f"tokenizers {tokenizers.__version__}")
    corpus = json.loads((FIX / "corpus.json").read_text(encoding="utf-8"))["chunks"]
    pretokenize(corpus)
    tiny(corpus)
    real_models(corpus)
    subprocess.run([str(ROOT / "dev"), "fmt", "tests/fixtures/tokenizer"], cwd=ROOT, check=True)


if __name__ == "__main__":
    main()
