#!/usr/bin/env python3
"""Build the offline training corpus: Jane Austen's six novels from Debian's r-cran-janeaustenr.

    python3 training/corpus.py [--out training/out/corpus]

Downloads the Debian package with `apt-get download r-cran-janeaustenr` into a temporary folder,
extracts it with `dpkg-deb -x`, reads the six character vectors (one element per printed line)
from the package's R lazy-load database `data/Rdata.rdb`/`.rdx` with training/rserial.py (a
minimal reader of R's serialization format, no R needed), and writes

    OUT/train.txt, OUT/valid.txt, OUT/test.txt

Text: each novel's lines are reflowed into paragraphs (lines of a paragraph joined by one space,
paragraphs separated by a blank line). Split, deterministic: per novel, in the order
emma, mansfieldpark, northangerabbey, persuasion, prideprejudice, sensesensibility, the paragraphs
are cut into three contiguous blocks by character count: the first 90% to train, the next 5% to
valid, the last 5% to test (a paragraph goes to the block where it starts). Each novel's block
ends with the line `<|endoftext|>`. The sha256 and size of each file is printed (and written to
OUT/SHA256SUMS); with the same package version (1.0.0-1) they are the same on every run.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rserial  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NOVELS = ["emma", "mansfieldpark", "northangerabbey", "persuasion", "prideprejudice", "sensesensibility"]
EOT = "<|endoftext|>"
SPLITS = (0.90, 0.05, 0.05)


def fetch_novels() -> tuple[dict[str, list[str]], str]:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["apt-get", "download", "r-cran-janeaustenr"], cwd=tmp, check=True, capture_output=True)
        debs = sorted(Path(tmp).glob("r-cran-janeaustenr_*.deb"))
        assert len(debs) == 1, debs
        deb = debs[0].name
        subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(Path(tmp) / "x")], check=True)
        base = Path(tmp) / "x/usr/lib/R/site-library/janeaustenr"
        for rdb, rdx in [("data/Rdata.rdb", "data/Rdata.rdx"), ("R/sysdata.rdb", "R/sysdata.rdx")]:
            if (base / rdb).exists():
                objs = rserial.lazyload(str(base / rdb), str(base / rdx))
                if all(n in objs for n in NOVELS):
                    break
        else:
            raise SystemExit("no lazy-load database with the six novels in the package")
    out = {}
    for n in NOVELS:
        o = objs[n]
        assert o.kind == "str", (n, o)
        out[n] = ["" if s is None else s for s in o.value]
    return out, deb


def paragraphs(lines: list[str]) -> list[str]:
    paras, cur = [], []
    for ln in lines:
        ln = ln.strip()
        if ln:
            cur.append(ln)
        elif cur:
            paras.append(" ".join(cur))
            cur = []
    if cur:
        paras.append(" ".join(cur))
    return paras


def split(paras: list[str]) -> list[list[str]]:
    total = sum(len(p) + 2 for p in paras)
    cuts = [SPLITS[0] * total, (SPLITS[0] + SPLITS[1]) * total]
    parts: list[list[str]] = [[], [], []]
    pos = 0
    for p in paras:
        k = 0 if pos < cuts[0] else 1 if pos < cuts[1] else 2
        parts[k].append(p)
        pos += len(p) + 2
    return parts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "training/out/corpus"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    novels, deb = fetch_novels()
    texts = {"train": [], "valid": [], "test": []}
    for n in NOVELS:
        parts = split(paragraphs(novels[n]))
        for name, part in zip(texts, parts):
            texts[name].append("\n\n".join(part) + "\n" + EOT + "\n")
    sums = []
    print(f"source: {deb}")
    for name, chunks in texts.items():
        data = "".join(chunks).encode("utf-8")
        (out / f"{name}.txt").write_bytes(data)
        h = hashlib.sha256(data).hexdigest()
        sums.append(f"{h}  {name}.txt\n")
        print(f"{name}.txt {len(data):9d} bytes  sha256 {h}")
    (out / "SHA256SUMS").write_text("".join(sums))


if __name__ == "__main__":
    main()
