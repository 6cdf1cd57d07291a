"""Time building every SCAN splitting in the default format, and the rule-only part, in one run.

Run: .venv/bin/python benchmarks/scan_build.py
"""

import platform
import shutil
import tempfile
import time
from pathlib import Path

from benchbuild.scan.build import build_scan
from benchbuild.scan.grammar import generate
from benchbuild.scan.parameters import ScanParameters
from benchbuild.scan.splits import SPLITTINGS


def main() -> None:
    start = time.perf_counter()
    examples = generate()
    for rule in SPLITTINGS.values():
        rule(examples, 0)
    rules_only = time.perf_counter() - start

    out = Path(tempfile.mkdtemp()) / "scan"
    start = time.perf_counter()
    written = [benchmark.save(out / name) for name, benchmark in build_scan(ScanParameters())]
    total = time.perf_counter() - start
    shutil.rmtree(out.parent)
    print(f"machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()}")
    print(f"splittings built: {len(written)}")
    print(f"generate + all split rules (no I/O): {rules_only:.1f} s")
    print(f"build all splittings, arrow format, with cards: {total:.1f} s (goal: under 60 s)")
    print(f"share of the time outside the rules (datasets, fingerprints, cards): {1 - rules_only / total:.0%}")


if __name__ == "__main__":
    main()
