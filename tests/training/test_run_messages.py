"""A trained run's messages: a corrupt checkpoint is named, a loaded run generates without a length warning, and
the progress bar shows the loss that `train_log.jsonl` records for the same step."""

from __future__ import annotations

import json
import shutil
import sys
import warnings

import pytest
import torch

from benchbuild.cli import main
from benchbuild.errors import BenchbuildError
from benchbuild.training.loop import RunOptions, plan_run, prepare, step, train
from benchbuild.training.progress import training_status
from benchbuild.run_folder import STATE_FILE
from benchbuild.zoo.loading import load_model


@pytest.fixture(scope="module")
def trained_run(tiny_scan, tiny_model, tmp_path_factory):
    """Ten steps with a checkpoint at step 10 (the tiny recipe validates every 10 steps)."""
    run_dir = tmp_path_factory.mktemp("runs") / "run"
    train(tiny_model, tiny_scan, run_dir, seed=0, device="cpu", progress=False, max_steps=10)
    return run_dir


@pytest.fixture()
def run_copy(trained_run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(trained_run, copy)
    return copy


def truncate(path) -> None:
    path.write_bytes(path.read_bytes()[:100])


def test_eval_of_a_run_with_a_truncated_model_file_is_one_error_line_naming_the_file(run_copy, tiny_scan,
                                                                                       monkeypatch, capsys):
    truncate(run_copy / "model.safetensors")
    monkeypatch.setattr(sys, "argv", ["benchbuild", "eval", "--run", str(run_copy), "--data", str(tiny_scan),
                                      "--device", "cpu", "--out", str(run_copy / "eval")])
    with pytest.raises(SystemExit) as stop:
        main()
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("benchbuild: error:")]
    assert stop.value.code == 1
    assert len(errors) == 1 and str(run_copy / "model.safetensors") in errors[0]
    assert not (run_copy / "eval").exists()


@pytest.mark.parametrize("file_name", ["model.safetensors", STATE_FILE])
def test_resuming_from_a_truncated_checkpoint_file_names_the_file(run_copy, tiny_scan, tiny_model, file_name):
    [checkpoint] = (run_copy / "checkpoints").glob("step-*")
    truncate(checkpoint / file_name)
    with pytest.raises(BenchbuildError, match=str(checkpoint / file_name)) as refused:
        train(tiny_model, tiny_scan, run_copy, seed=0, device="cpu", progress=False, max_steps=20)
    assert f"delete {checkpoint}" in str(refused.value)


def generate_quietly(run_dir, logged) -> list[str]:
    """What loading `run_dir` and `generate(max_new_tokens=5)` warn or log (transformers logs via its logger)."""
    with logged("transformers") as messages, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = load_model(run_dir)
        model.generate(torch.tensor([[5, 6, 2]]), max_new_tokens=5)
    return [str(warning.message) for warning in caught] + [m for m in messages if "max_" in m]


def test_a_loaded_run_generates_with_max_new_tokens_without_a_warning(trained_run, logged):
    saved = json.loads((trained_run / "generation_config.json").read_text())
    assert saved.get("max_length") is None and saved.get("max_new_tokens") is None
    assert generate_quietly(trained_run, logged) == []


def test_a_run_saved_with_max_length_also_generates_without_a_warning(run_copy, logged):
    path = run_copy / "generation_config.json"
    saved = json.loads(path.read_text())
    saved.pop("max_new_tokens", None)
    path.write_text(json.dumps({**saved, "max_length": 256}))
    assert generate_quietly(run_copy, logged) == []


def test_the_progress_bar_shows_the_loss_train_log_records_for_the_same_step(tiny_scan, tiny_model, tmp_path):
    # eval_every 40: a log line every 4 steps, each the mean loss of the 4 steps since the line before.
    run = prepare(plan_run(tiny_model, tiny_scan, tmp_path / "run",
                           RunOptions(device="cpu", progress=False, max_steps=8, overrides={"eval_every": 40})))
    shown = {}
    while run.state.step < run.budget:
        step(run)
        shown[run.state.step] = training_status(run)
    log = [json.loads(line) for line in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    assert [record["step"] for record in log] == [4, 8]
    assert shown[4] == shown[5] == shown[7] == f"loss {log[0]['loss']:.4f} (mean of last 4 steps)"
    assert shown[8] == f"loss {log[1]['loss']:.4f} (mean of last 4 steps)"
    assert shown[3] == ""


def test_the_progress_bar_never_rounds_a_best_exact_match_up_to_100(tiny_scan, tiny_model, tmp_path):
    """002's seed 3 validated at 99.966%, which one decimal showed as "100.0%": a settled run in appearance only."""
    run = prepare(plan_run(tiny_model, tiny_scan, tmp_path / "run", RunOptions(device="cpu", progress=False,
                                                                               max_steps=8)))
    run.state.best = 99.96591683708247
    assert training_status(run).endswith("best val EM 99.96%")
    run.state.best = 99.99999
    assert training_status(run).endswith("best val EM 99.99%")
    run.state.best = 100.0
    assert training_status(run).endswith("best val EM 100.00%")


def test_a_benchmark_with_an_empty_test_split_trains_and_eval_says_there_is_nothing_to_score(tiny_model, tmp_path,
                                                                                            shared_data, capsys,
                                                                                            monkeypatch):
    """Issue #60: a split of no rows (saved without a data file) used to fail to load as "truncated or corrupt", and
    eval on it with an IndexError; now the benchmark trains and eval refuses in one line before loading the model."""
    from small_inputs import scan_file_rows, write_benchmark

    rows = scan_file_rows(shared_data / "scan" / "simple_split" / "tasks_train_simple.txt", "train", 40, 4)
    data = write_benchmark(tmp_path / "zero", {"train": rows, "test": []}, "scan", "zero")
    run_dir = tmp_path / "run"
    train(tiny_model, data, run_dir, seed=0, device="cpu", progress=False, max_steps=5)
    monkeypatch.setattr(sys, "argv", ["benchbuild", "eval", "--run", str(run_dir), "--data", str(data), "--device",
                                      "cpu"])
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        main()
    assert stop.value.code == 1
    said = capsys.readouterr().err
    assert "split 'test' of" in said and "has no rows: nothing to decode or score" in said
    assert "Traceback" not in said and len(said.strip().splitlines()) == 1
    assert not (run_dir / "metrics.json").exists()


def test_a_hold_out_from_one_train_row_names_the_ways_out(tiny_scan, tiny_model, tmp_path):
    from benchbuild.benchmark import load_splits
    from small_inputs import write_benchmark

    rows = load_splits(tiny_scan)["train"].to_list()[:1]
    data = write_benchmark(tmp_path / "one", {"train": rows, "test": rows}, "scan", "one")
    with pytest.raises(BenchbuildError, match=r"has 1 row: too few to hold out .*--validation-split NAME.*"
                                              r"--set select=last"):
        train(tiny_model, data, tmp_path / "run", seed=0, device="cpu", progress=False, max_steps=5)
