"""Reading a user's text file (predictions, lexicons, SCAN files, TOML): UTF-8, with or without a byte-order mark
(which is not text), and bytes that are not UTF-8 an error naming the file, the line and the byte."""

from __future__ import annotations

import codecs
from pathlib import Path

from benchbuild.errors import BenchbuildError


def read_text(path: str | Path) -> str:
    """The text of `path`, decoded as UTF-8 after a leading byte-order mark is dropped."""
    raw = Path(path).read_bytes()
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8):]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        column = error.start - (raw.rfind(b"\n", 0, error.start) + 1) + 1
        raise BenchbuildError(f"{path}, line {line}: not valid UTF-8 (byte 0x{raw[error.start]:02x} at column "
                              f"{column}): save the file as UTF-8") from None
