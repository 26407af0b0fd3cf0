"""A minimal reader of R's serialization format (XDR, versions 2 and 3) and lazy-load databases.

Enough for the janeaustenr data: pairlists, lists, character/integer/real/logical vectors,
symbols, attributes and back-references. Nothing else in R's format is needed here.
"""

from __future__ import annotations

import gzip
import struct
import zlib

NILVALUE, GLOBALENV, EMPTYENV, BASEENV, MISSINGARG, BASENAMESPACE = 254, 253, 242, 241, 251, 247
REFSXP = 255
SYMSXP, LISTSXP, CHARSXP, LGLSXP, INTSXP, REALSXP, STRSXP, VECSXP = 1, 2, 9, 10, 13, 14, 16, 19
NA_INT = -(2**31)


class RObj:
    def __init__(self, kind: str, value, attrs: dict | None = None):
        self.kind, self.value, self.attrs = kind, value, attrs or {}

    def __repr__(self) -> str:
        return f"RObj({self.kind}, {str(self.value)[:60]})"


class Reader:
    def __init__(self, data: bytes):
        self.b, self.i, self.refs = data, 0, []

    def int(self) -> int:
        v = struct.unpack_from(">i", self.b, self.i)[0]
        self.i += 4
        return v

    def read_header(self) -> None:
        fmt = self.b[self.i : self.i + 2]
        if fmt != b"X\n":
            raise ValueError(f"unsupported serialization format {fmt!r} (only XDR)")
        self.i += 2
        version = self.int()
        self.int()  # writer R version
        self.int()  # minimal reader version
        if version == 3:
            n = self.int()
            self.i += n  # native encoding name
        elif version != 2:
            raise ValueError(f"unsupported serialization version {version}")

    def item(self):
        flags = self.int()
        t = flags & 0xFF
        has_attr = bool(flags & (1 << 9))
        has_tag = bool(flags & (1 << 10))
        if t == NILVALUE or t in (GLOBALENV, EMPTYENV, BASEENV, MISSINGARG, BASENAMESPACE):
            return None
        if t == REFSXP:
            idx = flags >> 8
            if idx == 0:
                idx = self.int()
            return self.refs[idx - 1]
        if t == SYMSXP:
            name = self.item()  # a CHARSXP
            sym = RObj("sym", name)
            self.refs.append(sym)
            return sym
        if t == LISTSXP:
            out, attrs = [], {}
            while True:
                a = self.attributes() if has_attr else {}
                tag = self.item() if has_tag else None
                car = self.item()
                out.append((tag.value if isinstance(tag, RObj) else tag, car))
                attrs.update(a)
                nxt = self.int()
                t2 = nxt & 0xFF
                if t2 == NILVALUE:
                    break
                if t2 != LISTSXP:
                    raise ValueError(f"unsupported pairlist tail type {t2}")
                has_attr = bool(nxt & (1 << 9))
                has_tag = bool(nxt & (1 << 10))
            return RObj("pairlist", out, attrs)
        if t == CHARSXP:
            n = self.int()
            if n == -1:
                return None  # NA_character_
            s = self.b[self.i : self.i + n].decode("utf-8", errors="replace")
            self.i += n
            return s
        if t in (LGLSXP, INTSXP):
            n = self.int()
            v = list(struct.unpack_from(f">{n}i", self.b, self.i))
            self.i += 4 * n
            obj = RObj("int", v)
        elif t == REALSXP:
            n = self.int()
            v = list(struct.unpack_from(f">{n}d", self.b, self.i))
            self.i += 8 * n
            obj = RObj("real", v)
        elif t == STRSXP:
            n = self.int()
            obj = RObj("str", [self.item() for _ in range(n)])
        elif t == VECSXP:
            n = self.int()
            obj = RObj("list", [self.item() for _ in range(n)])
        else:
            raise ValueError(f"unsupported SEXP type {t}")
        if has_attr:
            obj.attrs = self.attributes()
        return obj

    def attributes(self) -> dict:
        pl = self.item()
        return {k: v for k, v in pl.value} if pl is not None else {}


def unserialize(data: bytes):
    r = Reader(data)
    r.read_header()
    return r.item()


def lazyload(rdb_path: str, rdx_path: str) -> dict[str, object]:
    """Every variable of an R lazy-load database (.rdx index + .rdb objects), by name."""
    with open(rdx_path, "rb") as f:
        raw = f.read()
    # the .rdx is a serialized list(variables, references, compressed): gzip (saveRDS) or the
    # lazy-load database's own 4-byte length + zlib
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    elif raw[:2] != b"X\n":
        raw = zlib.decompress(raw[4:])
    idx = unserialize(raw)
    names = idx.attrs["names"].value
    fields = dict(zip(names, idx.value))
    var_names = fields["variables"].attrs["names"].value
    with open(rdb_path, "rb") as f:
        rdb = f.read()
    out = {}
    for name, pos in zip(var_names, fields["variables"].value):
        off, length = (int(x) for x in pos.value)
        blob = rdb[off : off + length]
        n = struct.unpack(">I", blob[:4])[0]
        data = zlib.decompress(blob[4:])
        assert len(data) == n, (name, len(data), n)
        out[name] = unserialize(data)
    return out
