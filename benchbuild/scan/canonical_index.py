"""The random draws of the SCAN repository that no rule re-creates, shipped with the package (`scan/canonical/`).

Two files, each over the grammar's enumeration (`generate_commands()`), so a build needs no SCAN checkout:
- `simple_test.bits`: one bit per command (`numpy.packbits` order), set when Lake & Baroni's random 80/20 draw put
  the command in `simple_split/tasks_test_simple.txt`;
- `tasks_order.u16le`: the grammar position of each line of `tasks.txt`, in the file's order (little-endian
  uint16), the order 003's length-cutoff validation draw runs over.

`write_index` makes both from a SCAN checkout (tools/scan_canonical_index.py); the files derive from SCAN's data,
so SCAN's BSD licence is reproduced beside them in `LICENSE`.
"""

from __future__ import annotations

import importlib.resources
from functools import lru_cache
from pathlib import Path

import numpy as np

from benchbuild.errors import BenchbuildError
from benchbuild.scan.grammar import generate_commands
from benchbuild.scan.official import read_scan_file

FOLDER = Path(str(importlib.resources.files("benchbuild.scan") / "canonical"))  # shipped with the package
SIMPLE_TEST = FOLDER / "simple_test.bits"
TASKS_ORDER = FOLDER / "tasks_order.u16le"
# The canonical file each index file is made from, relative to a SCAN checkout.
SOURCES = {SIMPLE_TEST.name: "simple_split/tasks_test_simple.txt", TASKS_ORDER.name: "tasks.txt"}
LICENSE_PREFACE = """\
The files in this folder (simple_test.bits, tasks_order.u16le) are derived from the SCAN dataset
(https://github.com/brendenlake/SCAN: tasks.txt and simple_split/), which is distributed under the
licence below. benchbuild regenerates them with tools/scan_canonical_index.py.

"""


def index_files(name: str) -> dict[str, Path]:
    """The shipped index files splitting `name` is drawn from, by their path in the package (none for a rule)."""
    if name == "simple":
        files = [SIMPLE_TEST]
    elif name.startswith("length_cutoff_"):
        files = [TASKS_ORDER]
    else:
        files = []
    return {f"benchbuild/scan/canonical/{path.name}": path for path in files}


def _positions(scan: Path, relative: str, position: dict[str, int]) -> np.ndarray:
    """The grammar position of each command of a canonical file, in the file's order."""
    return np.array([position[example.command] for example in read_scan_file(scan / relative)], dtype=np.int64)


def write_index(scan: Path, folder: Path) -> dict[Path, int]:
    """Write the index files and the licence notice from the SCAN checkout `scan` into `folder`; the size of each."""
    commands = generate_commands()
    position = {command: i for i, command in enumerate(commands)}
    order = _positions(scan, SOURCES[TASKS_ORDER.name], position)
    if sorted(order.tolist()) != list(range(len(commands))):
        raise BenchbuildError(f"{scan / 'tasks.txt'} does not hold each of the {len(commands):,} SCAN commands once")
    test = _positions(scan, SOURCES[SIMPLE_TEST.name], position)
    train = _positions(scan, "simple_split/tasks_train_simple.txt", position)
    if sorted(np.concatenate([train, test]).tolist()) != list(range(len(commands))):
        raise BenchbuildError(f"{scan / 'simple_split'}: train and test together are not each SCAN command once")
    in_test = np.zeros(len(commands), dtype=bool)
    in_test[test] = True
    folder.mkdir(parents=True, exist_ok=True)
    written = {folder / SIMPLE_TEST.name: np.packbits(in_test).tobytes(),
               folder / TASKS_ORDER.name: order.astype("<u2").tobytes(),
               folder / "LICENSE": (LICENSE_PREFACE + (scan / "LICENSE").read_text(encoding="utf-8")).encode()}
    for path, data in written.items():
        path.write_bytes(data)
    return {path: len(data) for path, data in written.items()}


@lru_cache(maxsize=1)
def simple_test_mask() -> np.ndarray:
    """Per command of the grammar's enumeration: whether the canonical `simple` split has it in test (read-only)."""
    mask = np.unpackbits(np.frombuffer(SIMPLE_TEST.read_bytes(), dtype=np.uint8), count=len(generate_commands()))
    mask = mask.astype(bool)
    mask.flags.writeable = False
    return mask


@lru_cache(maxsize=1)
def tasks_order() -> np.ndarray:
    """The grammar position of each line of the canonical `tasks.txt`, in the file's order (read-only)."""
    order = np.frombuffer(TASKS_ORDER.read_bytes(), dtype="<u2").astype(np.int64)
    order.flags.writeable = False
    return order
