"""The units tests/scheduling.py deals to the workers stay true to the files: every file that joins the test run's
shared Dask cluster is in the one unit that starts it, and every unit named in the slowest-first order exists."""

from __future__ import annotations

import re
from pathlib import Path

from scheduling import DASK_CLUSTER, DASK_CLUSTER_FILES, SHARED_FIXTURE_FOLDERS, SLOWEST_FIRST, unit

ROOT = Path(__file__).resolve().parent.parent


def test_every_file_that_uses_the_shared_dask_cluster_is_dealt_with_the_others():
    users = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py")
                   if re.search(r"\bdask_scheduler\b", path.read_text(encoding="utf-8")))
    assert users == sorted(DASK_CLUSTER_FILES)
    assert {unit(f"{path}::test") for path in users} == {DASK_CLUSTER}
    assert unit("tests/test_sweep_safety.py::test") == "tests/test_sweep_safety.py"  # an embedded cluster: its own


def test_every_unit_named_in_the_order_exists():
    for name in SLOWEST_FIRST:
        assert name == DASK_CLUSTER or (ROOT / name).exists(), name
    for folder in SHARED_FIXTURE_FOLDERS:
        assert (ROOT / folder).is_dir(), folder
        assert unit(f"{folder}/test_x.py::test") == folder
