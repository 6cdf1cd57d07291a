"""Rewrite the reproduction ledger's table in docs/catalogue.md from benchbuild/ledger.toml (tests/test_ledger.py
fails while the two differ).

Run: .venv/bin/python tools/ledger_table.py
"""

from __future__ import annotations

from pathlib import Path

from benchbuild.ledger import TABLE_END, TABLE_START, load_ledger, markdown_table
from benchbuild.zoo import list_entries

DOCS = Path(__file__).resolve().parent.parent / "docs" / "catalogue.md"


def main() -> None:
    text = DOCS.read_text(encoding="utf-8")
    start, end = text.index(TABLE_START), text.index(TABLE_END) + len(TABLE_END)
    DOCS.write_text(text[:start] + markdown_table(list_entries(), load_ledger()) + text[end:], encoding="utf-8")
    print(f"wrote the ledger table in {DOCS}")


if __name__ == "__main__":
    main()
