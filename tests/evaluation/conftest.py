"""Small benchmark folders for scoring tests, written in the on-disk contract (splits + build.json)."""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest

from benchbuild.benchmark import Benchmark, BuildInfo, CardFacts


@pytest.fixture
def make_benchmark(tmp_path):
    def make(splits: dict[str, list[dict]], family: str = "cognition", name: str = "cg-test") -> Path:
        out = tmp_path / f"{family}-{name}"
        info = BuildInfo(family=family, name=name, parameters={})
        card = CardFacts(pretty_name=name, summary="test data", rules={}, languages=["en"], license="-", citation="")
        benchmark = Benchmark.from_splits(splits, info, card)
        datasets.DatasetDict(benchmark.splits).save_to_disk(str(out))
        (out / "build.json").write_text(benchmark.info.to_json(), encoding="utf-8")
        return out

    return make
