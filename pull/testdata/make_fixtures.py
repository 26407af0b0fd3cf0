"""Writes the zip fixtures of pull/zip_reader_test.ts with Python's zipfile.

Run from this folder: python3 make_fixtures.py (Python 3.8+; output is
deterministic: fixed timestamps). The members' bytes are reproduced in the
test: pattern(n)[i] = (i * 7 + i // 3) % 251.

  tiny.zip    hello.txt (stored), pkg/data/model.bin.part00 and .part01
              (deflated, 40000 and 25000 bytes), the parts of one file
  zip64.zip   the same members with zip64 records forced (ZIP64_LIMIT
              lowered so every size and offset goes through zip64 fields)
"""
import zipfile


def pattern(n, start=0):
    return bytes(((i * 7 + i // 3) % 251) for i in range(start, start + n))


MEMBERS = [
    ("hello.txt", b"hello, wheel\n", zipfile.ZIP_STORED),
    ("pkg/data/model.bin.part00", pattern(40000), zipfile.ZIP_DEFLATED),
    ("pkg/data/model.bin.part01", pattern(25000, 40000), zipfile.ZIP_DEFLATED),
]


def write(path):
    with zipfile.ZipFile(path, "w") as z:
        for name, data, method in MEMBERS:
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            info.compress_type = method
            z.writestr(info, data)


write("tiny.zip")
zipfile.ZIP64_LIMIT = 8  # everything larger goes through zip64 fields
zipfile.ZIP_FILECOUNT_LIMIT = 1
write("zip64.zip")
