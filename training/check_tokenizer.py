#!/usr/bin/env python3
"""Write training/out/tokenizer_check.json: sentences and the ids HF `tokenizers` gives them, for
training/check_tokenizer.ts (cflow's loader must give the same ids and round-trip the text)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tokenizers import Tokenizer

ROOT = Path(__file__).resolve().parents[1]
out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "training/out"
tok = Tokenizer.from_file(str(out / "tokenizer.json"))
cases = [
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, "
    "must be in want of a wife.",
    "Emma Woodhouse, handsome, clever, and rich -- \"I'm sure\" she'd said; 1811's 42 days!\n\n  tabs\tand  spaces",
    "Unicode: café, naïve, “quotes”, emoji 🙂, 日本語<|endoftext|>next document",
]
valid = (ROOT / "training/out/corpus/valid.txt").read_text(encoding="utf-8")
paras = [p for p in valid.split("\n\n") if len(p) > 200]
cases += paras[:40:4]
cases.append(valid[:20000])
doc = {"cases": [{"text": c, "ids": tok.encode(c).ids} for c in cases]}
(out / "tokenizer_check.json").write_text(json.dumps(doc, ensure_ascii=False))
print(f"{len(cases)} cases written to {out / 'tokenizer_check.json'}")
