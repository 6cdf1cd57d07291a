"""Small benchmark folders for scoring tests, written in the on-disk contract (splits + build.json)."""

from __future__ import annotations

from pathlib import Path

import pytest
from small_inputs import write_benchmark


@pytest.fixture
def make_benchmark(tmp_path):
    """`make_benchmark(splits, family, name)`: a benchmark folder under this test's temporary folder."""
    def make(splits: dict[str, list[dict]], family: str = "cognition", name: str = "cg-test") -> Path:
        return write_benchmark(tmp_path / f"{family}-{name}", splits, family, name)

    return make
