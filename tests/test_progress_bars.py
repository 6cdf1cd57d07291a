"""Writing and reading a benchmark silences the `datasets` progress bars of those steps only: the process-wide
setting is the caller's before and after."""

from __future__ import annotations

import datasets
import pytest

from benchbuild.benchmark import Benchmark, BuildInfo, CardFacts, load_splits, split_fingerprint

ROWS = [{"id": f"r{i}", "source": "jump twice", "target": "I_JUMP I_JUMP"} for i in range(20)]


@pytest.fixture
def progress_bars_on():
    was_disabled = datasets.are_progress_bars_disabled()
    datasets.enable_progress_bars()
    yield
    if was_disabled:
        datasets.disable_progress_bars()


@pytest.mark.parametrize("format", ["arrow", "jsonl"])
def test_save_and_load_draw_no_datasets_bars_and_leave_them_on(tmp_path, capsys, progress_bars_on, format):
    shuffled = datasets.Dataset.from_list(ROWS).shuffle(seed=0)  # an indices mapping: from_splits flattens it
    card = CardFacts(pretty_name="Toy", summary="A toy benchmark.", rules={}, languages=["en"], license="mit",
                     citation="@misc{toy}")
    benchmark = Benchmark.from_splits({"train": shuffled, "test": ROWS}, BuildInfo("generic", "toy", {}), card)
    split_fingerprint(shuffled)
    assert len(load_splits(benchmark.save(tmp_path / "bench", format=format))["train"]) == 20
    assert capsys.readouterr().err == ""
    assert not datasets.are_progress_bars_disabled()
    datasets.Dataset.from_list(ROWS).map(lambda row: row)  # the caller's own work still shows its bar
    assert "Map" in capsys.readouterr().err
