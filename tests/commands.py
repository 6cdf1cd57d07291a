"""The installed `benchbuild` command run as a user runs it, and checks of what it said and what it left.

Imported as `commands` (pytest puts `tests/` on `sys.path` when it loads `tests/conftest.py`).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

# The console script of the environment the tests run in (what `pip install` put on the user's PATH).
BENCHBUILD = str(Path(sys.executable).parent / "benchbuild")


def benchbuild(*arguments: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`benchbuild ARGUMENTS…` run to its end with no terminal input; output captured as text."""
    return subprocess.run([BENCHBUILD, *map(str, arguments)], capture_output=True, text=True, cwd=cwd,
                          stdin=subprocess.DEVNULL)


def refused(done: subprocess.CompletedProcess, *phrases: str) -> None:
    """`done` was refused the way every refusal must be: exit 1 (an error benchbuild names) or 2 (a usage error),
    no traceback, and exactly one `benchbuild: error:` line, the last thing printed (progress bars may precede it),
    holding each of `phrases`."""
    assert done.returncode in (1, 2), done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("benchbuild: error:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.rstrip().endswith(errors[0]), done.stderr
    for phrase in phrases:
        assert phrase in errors[0], done.stderr


def file_hashes(*paths: Path) -> dict[str, str]:
    """Every file at or under each of `paths` with its sha256: equal results mean untouched bytes."""
    files = []
    for path in paths:
        files += [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
