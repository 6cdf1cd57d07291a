"""Rows at the edges of size (issue #60): a training row of a megabyte is refused by name before a run folder is
written (torch used to try a 6 GB allocation); a test source too long for the model is refused before decoding; a
test reference of thousands of tokens no longer makes every row decode that far: each row is capped at its own
reference + 8 tokens (and at most `MAX_TOKENS`), so the evaluation ends and exact match is unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from commands import benchbuild_in_process as benchbuild
from commands import refused
from small_inputs import tiny_transformer_toml, write_benchmark

from benchbuild.benchmark import load_splits, split_rows_as_dicts
from benchbuild.zoo.decoding import MAX_TOKENS

TINY = tiny_transformer_toml(steps=2, batch_size=8, learning_rate=2e-3, eval_every=2, select="last")


def _rows(tiny_scan: Path) -> dict[str, list[dict]]:
    splits = load_splits(tiny_scan)
    return {name: split_rows_as_dicts(split) for name, split in splits.items()}


@pytest.fixture(scope="module")
def untrained_run(tiny_scan, tmp_path_factory) -> Path:
    """Two updates of the tiny Transformer: its greedy outputs run on without `</s>`, to whatever cap they get."""
    from benchbuild.training.loop import train

    tmp = tmp_path_factory.mktemp("size")
    model = tmp / "tiny.toml"
    model.write_text(TINY, encoding="utf-8")
    train(model, tiny_scan, tmp / "run", seed=0, device="cpu", progress=False)
    return tmp / "run"


def test_a_megabyte_training_row_is_refused_by_name_before_the_run_folder_is_written(tiny_scan, tmp_path):
    rows = _rows(tiny_scan)
    rows["train"].insert(6, {"id": "huge", "source": " ".join(["jump"] * 200_000), "target": "I_JUMP"})
    data = write_benchmark(tmp_path / "huge", rows, "scan", "simple")
    model = tmp_path / "tiny.toml"
    model.write_text(TINY, encoding="utf-8")
    done = benchbuild("train", "--model", model, "--data", data, "--out", tmp_path / "run", "--device", "cpu")
    refused(done, f"split 'train' of {data}: row 7: its source has 200,000 words, more than the {MAX_TOKENS:,} tokens "
            "a zoo model takes", "cut or drop the row")
    assert not (tmp_path / "run").exists()


def test_a_test_source_too_long_for_the_model_is_refused_before_decoding(tiny_scan, untrained_run, tmp_path):
    rows = _rows(tiny_scan)
    rows["test"][3] = {**rows["test"][3], "source": " ".join(["walk"] * 2_000)}
    data = write_benchmark(tmp_path / "long", rows, "scan", "simple")
    done = benchbuild("eval", "--run", untrained_run, "--data", data, "--device", "cpu", "--out", tmp_path / "e")
    refused(done, f"split 'test' of {data}: row 4: its source has 2,000 words")
    assert not (tmp_path / "e").exists()


def test_a_reference_of_thousands_of_tokens_caps_only_its_own_row(tiny_scan, untrained_run, tmp_path):
    rows = _rows(tiny_scan)
    long_row = 5
    rows["test"][long_row] = {**rows["test"][long_row], "target": " ".join(["I_WALK"] * 3_000)}
    data = write_benchmark(tmp_path / "long", rows, "scan", "simple")
    done = benchbuild("eval", "--run", untrained_run, "--data", data, "--device", "cpu", "--out", tmp_path / "e")
    assert done.returncode == 0, done.stderr
    metrics = json.loads((tmp_path / "e/metrics.json").read_text())
    assert metrics["max_new_tokens"] == MAX_TOKENS and metrics["max_new_tokens_per_row"] == "its reference + 8"
    predictions = [json.loads(line) for line in (tmp_path / "e/predictions.jsonl").read_text().splitlines()]
    lengths = [len(line["prediction"].split()) for line in predictions]
    print(lengths)
    for index, (row, length) in enumerate(zip(rows["test"], lengths)):
        cap = min(len(row["target"].split()) + 1 + 8, MAX_TOKENS)  # the reference with `</s>`, plus 8
        assert length <= cap, (index, length, cap)
    assert max(lengths) > 20, "the model stopped early: the caps were not tested"
