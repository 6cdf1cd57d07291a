"""Regenerate the SCAN index files benchbuild ships (benchbuild/scan/canonical/) from a SCAN checkout.

    .venv/bin/python tools/scan_canonical_index.py ../shared/data/scan

reads `tasks.txt`, `simple_split/tasks_{train,test}_simple.txt` and `LICENSE` of the checkout (every line checked
against the grammar) and writes `simple_test.bits`, `tasks_order.u16le` and `LICENSE` (SCAN's BSD notice with a
preface) into benchbuild/scan/canonical/, or into --out. The files are byte-for-byte a function of the checkout, so
`git diff` after a run shows whether the shipped index still matches it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchbuild.scan.canonical_index import FOLDER, write_index


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scan", type=Path, help="a checkout of github.com/brendenlake/SCAN (or ../shared/data/scan)")
    parser.add_argument("--out", type=Path, default=FOLDER, help="where to write the files (default: %(default)s)")
    arguments = parser.parse_args()
    for path, size in write_index(arguments.scan, arguments.out).items():
        print(f"{path}: {size:,} bytes")


if __name__ == "__main__":
    main()
