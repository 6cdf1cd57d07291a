"""Content fingerprints: sha256 of input files and of split contents, so a benchmark can be reproduced and checked."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

if TYPE_CHECKING:
    import pyarrow

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


def table_fingerprint(table: pyarrow.Table) -> str:
    """sha256 of a table's contents in row order, independent of how the table is chunked or stored.

    The column names (sorted) come first; then each row, its fields in that column order rendered as text
    (null as \\x00), joined by \\x1f and ended by \\n. Computed with Arrow kernels, so a million rows take a second.
    """
    import pyarrow.compute as pc

    names = sorted(table.column_names)
    digest = hashlib.sha256(json.dumps(names).encode() + b"\n")
    if table.num_rows == 0 or not names:
        return digest.hexdigest()
    table = table.select(names)
    for batch in table.to_batches(max_chunksize=65536):
        parts = [pc.fill_null(_as_text(column), "\x00") for column in batch.columns]
        lines = pc.binary_join_element_wise(*parts, "\x1f") if len(parts) > 1 else parts[0]
        digest.update(("\n".join(lines.to_pylist()) + "\n").encode())
    return digest.hexdigest()


def _as_text(column: pyarrow.Array) -> pyarrow.Array:
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return column
    if pa.types.is_nested(column.type):
        return pa.array([None if v is None else json.dumps(v, sort_keys=True) for v in column.to_pylist()], pa.string())
    return pc.cast(column, pa.string())
