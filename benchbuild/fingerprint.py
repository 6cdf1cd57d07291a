"""Content fingerprints: sha256 of input files and of split contents, so a benchmark can be reproduced and checked."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable, Mapping

_CHUNK = 1 << 20


def sha256_file(path: str | Path) -> str:
    """The sha256 of a file's bytes, read in chunks so large corpora need no memory."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_tree(path: str | Path) -> str:
    """The sha256 of a folder: every file's relative path and content hash, in sorted order."""
    root = Path(path)
    digest = hashlib.sha256()
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(file.relative_to(root).as_posix().encode())
        digest.update(sha256_file(file).encode())
    return digest.hexdigest()


def input_fingerprint(path: str | Path) -> str:
    """sha256 of an input file, or of a whole folder (a local Hugging Face dataset, a SCAN checkout)."""
    path = Path(path)
    return sha256_tree(path) if path.is_dir() else sha256_file(path)


def rows_fingerprint(rows: Iterable[Mapping[str, Any]]) -> str:
    """sha256 over the rows in order, each as canonical JSON: equal iff the split's contents are equal."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode())
        digest.update(b"\n")
    return digest.hexdigest()
