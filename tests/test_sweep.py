"""`benchbuild sweep`: the smoke sweep (pipelines/sweep_smoke.toml) run locally with 2 jobs, killed and resumed,
and on a real Dask cluster gives the same run folders and report; bad sweep files are refused before anything runs."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchbuild.cli import app
from commands import benchbuild, started
from benchbuild.errors import BenchbuildError
from benchbuild.sweep.spec import CONFIG_FILE, load_sweep
from benchbuild.sweep.state import run_state
from waiting import until

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "pipelines" / "sweep_smoke.toml"


def _workspace(folder: Path) -> Path:
    """A working folder like a checkout's root: the project's pipelines beside where runs and benchmarks go."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pipelines").symlink_to(ROOT / "pipelines")
    return folder


def _sweep(cwd: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return benchbuild("sweep", "pipelines/sweep_smoke.toml", *args, cwd=cwd, **kwargs)


def _run_folders(cwd: Path) -> dict[str, Path]:
    return {str(path.relative_to(cwd / "runs")): path for path in sorted((cwd / "runs").glob("sweep_smoke/*/*/seed*"))}


def _losses(folder: Path) -> list[tuple[int, float]]:
    return [(record["step"], record["loss"]) for record in map(json.loads, (folder / "train_log.jsonl").open())
            if "loss" in record]


def _metrics(folder: Path) -> dict:
    metrics = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
    return {key: value for key, value in metrics.items() if key not in ("run", "benchmark_path")}


@pytest.fixture(scope="session")  # built once per worker; `--dist loadfile` keeps this file's tests on one
def local_sweep(tmp_path_factory):
    """The smoke sweep run to the end with `--engine local --jobs 2`, in a folder of its own."""
    cwd = _workspace(tmp_path_factory.mktemp("local"))
    result = _sweep(cwd, "--jobs", "2")
    assert result.returncode == 0, result.stderr
    return cwd


@pytest.mark.slow
def test_the_smoke_sweep_trains_scores_and_reports_every_run(local_sweep):
    folders = _run_folders(local_sweep)
    assert len(folders) == 12
    for folder in folders.values():
        assert json.loads((folder / "run.json").read_text())["status"] == "complete"
        assert _metrics(folder)["split"] == "test"
        assert json.loads((folder / "sweep_run.json").read_text())["max_steps"] == 20
    report = (local_sweep / "runs" / "sweep_smoke" / "report.csv").read_text(encoding="utf-8")
    for model in ("transformer", "relative_transformer", "universal_transformer"):
        for benchmark in ("addprim_turn_left", "length_cutoff_40"):
            assert f"{model},scan/{benchmark},test,exact_match,2,0 1," in report


KILLED = """name = "killed"
models = ["transformer"]
seeds = [0, 1]
device = "cpu"
[budget]
steps = 20
[set]
eval_every = 20
batch_size = 16
held_out = 0.02
architecture = { d_model = 16, d_ff = 32, num_heads = 2, encoder_layers = 1, decoder_layers = 1 }
[[benchmarks]]
name = "scan/addprim_turn_left"
data = "out/scan/addprim_turn_left"
[eval]
batch_size = 512
[report]
formats = ["csv"]
"""


@pytest.mark.slow
def test_a_killed_sweep_finishes_only_what_was_left(local_sweep):
    """SIGKILLed (with its workers) as its second run starts, then run again: the finished first run is not trained or
    scored again, the second is finished. With `--jobs 1` the runs go one after the other, so the first is done once
    the second's folder has its configuration; should the second finish too before the kill lands, the rerun has
    nothing to do, and every assertion still holds."""
    cwd = local_sweep
    (cwd / "killed.toml").write_text(KILLED, encoding="utf-8")
    os.chdir(cwd)
    try:
        first, second = load_sweep("killed.toml").runs
    finally:
        os.chdir(ROOT)
    command = ("sweep", "killed.toml", "--jobs", "1")
    process = started(*command, cwd=cwd, stderr=cwd / "killed.err")
    try:
        until(lambda: (cwd / second.folder / CONFIG_FILE).is_file(), process, "the second run's configuration")
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert process.returncode == -signal.SIGKILL, process.communicate()[1]
    assert run_state(_absolute(first, cwd)).state == "done"
    done = [spec for spec in (first, second) if run_state(_absolute(spec, cwd)).state == "done"]
    files = {(spec.folder, name): (cwd / spec.folder / name).stat().st_mtime_ns for spec in done
             for name in ("model.safetensors", "metrics.json", "run.json", "predictions.jsonl")}
    rerun = benchbuild(*command, cwd=cwd)
    assert rerun.returncode == 0, rerun.stderr
    said = " ".join(rerun.stderr.split())  # rich wraps long lines
    for spec in (first, second):
        assert (f"finished {spec.folder}" in said) == (spec not in done), rerun.stderr
    assert {key: (cwd / key[0] / key[1]).stat().st_mtime_ns for key in files} == files
    assert all(run_state(_absolute(spec, cwd)).state == "done" for spec in (first, second))


def _absolute(spec, cwd: Path):
    from dataclasses import replace

    return replace(spec, folder=str(cwd / spec.folder))  # `data` stays as the sweep recorded it


@pytest.mark.slow
@pytest.mark.distributed
def test_sweep_on_dask_gives_the_same_runs_and_report(local_sweep, dask_scheduler, tmp_path):
    """The smoke sweep's Transformer runs (2 benchmarks x 2 seeds: a third of the grid, the same file otherwise) on a
    Dask cluster: the same run folders byte for byte, and the same report rows, as the local sweep's. (The columns
    that compare a model with the best of the table are left out: the local table holds two more models.)"""
    local = local_sweep
    cwd = _workspace(tmp_path / "dask")
    smoke = SMOKE.read_text(encoding="utf-8")
    models = 'models = ["transformer", "relative_transformer", "universal_transformer"]\n'
    assert models in smoke
    (cwd / "transformer.toml").write_text(smoke.replace(models, 'models = ["transformer"]\n'), encoding="utf-8")
    result = benchbuild("sweep", "transformer.toml", "--engine", "dask", "--scheduler", dask_scheduler, cwd=cwd)
    assert result.returncode == 0, result.stderr
    ours = _run_folders(cwd)
    theirs = {name: folder for name, folder in _run_folders(local).items() if name.split("/")[1] == "transformer"}
    assert ours.keys() == theirs.keys() and len(ours) == 4
    for name in ours:
        assert _losses(ours[name]) == _losses(theirs[name]), name
        assert _metrics(ours[name]) == _metrics(theirs[name]), name
        assert (ours[name] / "model.safetensors").read_bytes() == (theirs[name] / "model.safetensors").read_bytes()
    assert _report_rows(cwd, "transformer") == _report_rows(local, "transformer")


def _report_rows(cwd: Path, model: str) -> list[dict[str, str]]:
    """The rows of the sweep's report.csv for `model`, without the columns that compare it with the table's best."""
    import csv

    with (cwd / "runs/sweep_smoke/report.csv").open(encoding="utf-8", newline="") as table:
        rows = [row for row in csv.DictReader(table) if row["model"] == model]
    assert rows, f"no {model} row in the report"
    return [{key: value for key, value in row.items() if key not in ("p_vs_best", "test_vs_best")} for row in rows]


@pytest.mark.slow
def test_status_reads_the_run_folders(local_sweep):
    cwd = local_sweep
    result = _sweep(cwd, "--status")
    assert result.returncode == 0, result.stderr
    assert "12 done" in result.stdout


def test_dry_run_prints_the_grid_and_a_measured_estimate(tmp_path):
    built = CliRunner().invoke(app, ["build-scan", "--out", str(tmp_path / "scan"), "--split", "addprim_turn_left"])
    assert built.exit_code == 0, built.output
    sweep = tmp_path / "one.toml"
    sweep.write_text(f"models = ['transformer']\nseeds = [0, 1]\ndevice = 'cpu'\n[budget]\nsteps = 50\n"
                     "[set]\narchitecture = { d_model = 16, d_ff = 32, num_heads = 2, encoder_layers = 1, "
                     "decoder_layers = 1 }\n"
                     f"[[benchmarks]]\ndata = '{tmp_path / 'scan/addprim_turn_left'}'\n", encoding="utf-8")
    result = benchbuild("sweep", sweep, "--dry-run", "--jobs", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "2 pending" in result.stdout and "scan/addprim_turn_left" in result.stdout
    assert "ms per step measured (mean of 4 steps after a warm-up step), 100 steps left" in result.stdout
    # 50 steps at the recipe's eval_every (1,000 steps): one validation a run (at its last step), then its evaluation
    assert re.search(r"2 validations of [\d.]+ s and 2 evaluations of [\d.]+ s \(timed on 64 decoded rows\) left",
                     result.stdout), result.stdout
    assert "training steps, validations and evaluations as timed on this machine" in result.stdout
    assert not (tmp_path / "runs").exists(), "a dry run trains nothing"


BAD_SWEEPS = {
    "unknown key": ("colour = 'red'\n", "unknown key 'colour'"),
    "unknown model": ("", "no_such_model"),
    "model without the recipe": ("[[overrides]]\nmodel = 'lstm_attention'\nrecipe = 'nounadj'\n",
                                 "lstm_attention on scan/simple"),
    "override of a model not swept": ("[[overrides]]\nmodel = 'sag'\nset = { batch_size = 8 }\n",
                                      "names model 'sag', which is not in models"),
    "bad recipe key": ("[set]\nbatch_size = 0\n", "batch_size must be positive"),
    "bad device": ("device = 'gpu'\n", "unknown device 'gpu'"),
    "no steps": ("[budget]\nsteps = 0\n", "steps must be at least 1"),
}


@pytest.mark.parametrize("case", sorted(BAD_SWEEPS))
def test_bad_sweep_files_are_refused_before_anything_runs(case, tmp_path):
    extra, message = BAD_SWEEPS[case]
    models = '["transformer", "no_such_model"]' if case == "unknown model" else '["transformer", "lstm_attention"]'
    top, tables = (extra, "") if not extra.startswith("[") else ("", extra)
    sweep = tmp_path / "bad.toml"
    sweep.write_text(f"{top}models = {models}\nseeds = [0]\n\n[[benchmarks]]\nname = 'scan/simple'\n"
                     f"data = '{tmp_path / 'missing'}'\n\n{tables}", encoding="utf-8")
    with pytest.raises(BenchbuildError, match=message):
        load_sweep(sweep)
    result = CliRunner().invoke(app, ["sweep", str(sweep)], standalone_mode=False)
    assert isinstance(result.exception, BenchbuildError) and message in str(result.exception)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bad.toml"]


def test_a_folder_of_another_configuration_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(_workspace(tmp_path))
    folder = tmp_path / "runs/sweep_smoke/transformer/addprim_turn_left/seed0"
    folder.mkdir(parents=True)
    (folder / "sweep_run.json").write_text(json.dumps({"model": "transformer", "seed": 7}), encoding="utf-8")
    result = CliRunner().invoke(app, ["sweep", "pipelines/sweep_smoke.toml", "--jobs", "2"], standalone_mode=False)
    assert "holds a run of another configuration" in str(result.exception)
    assert not (tmp_path / "out").exists(), "nothing is built before the check"


def test_jobs_apply_to_the_local_engine_only(tmp_path, monkeypatch):
    monkeypatch.chdir(_workspace(tmp_path))
    result = CliRunner().invoke(app, ["sweep", "pipelines/sweep_smoke.toml", "--engine", "dask", "--jobs", "2"],
                                standalone_mode=False)
    assert "--jobs sizes --engine local" in str(result.exception)


def test_status_shows_each_runs_best_validation_by_its_own_rule(tmp_path, monkeypatch):
    from benchbuild.sweep.spec import CONFIG_FILE, load_sweep
    from benchbuild.sweep.state import run_state, status_table

    monkeypatch.chdir(tmp_path)
    sweep = tmp_path / "two.toml"
    sweep.write_text(f"models = ['transformer']\nseeds = [0, 1]\n[budget]\nsteps = 30\n"
                     f"[[benchmarks]]\ndata = '{tmp_path / 'scan'}'\nname = 'scan/simple'\n", encoding="utf-8")
    specs = load_sweep(sweep).runs
    logs = {"loss": [{"step": 10, "validation_exact_match": 5.0, "validation_loss": 2.0, "elapsed_s": 1.0},
                     {"step": 20, "validation_exact_match": 9.0, "validation_loss": 1.25, "elapsed_s": 2.0},
                     {"step": 30, "validation_exact_match": 7.0, "validation_loss": 1.5, "elapsed_s": 3.0}],
            "exact_match": [{"step": 10, "validation_exact_match": 5.0, "validation_loss": 2.0},
                            {"step": 20, "validation_exact_match": 9.0, "validation_loss": 1.25}]}
    for spec, rule in zip(specs, logs):
        folder = Path(spec.folder)
        folder.mkdir(parents=True)
        (folder / CONFIG_FILE).write_text(json.dumps(spec.config()), encoding="utf-8")
        (folder / "run.json").write_text(json.dumps({"step_budget": 30, "validate_by": rule}), encoding="utf-8")
        (folder / "train_log.jsonl").write_text("".join(json.dumps(line) + "\n" for line in logs[rule]))
    by_loss, by_exact_match = map(run_state, specs)
    assert (by_loss.validated_by, by_loss.best_validation, by_loss.step) == ("loss", 1.25, 30)
    assert (by_exact_match.validated_by, by_exact_match.best_validation) == ("exact_match", 9.0)
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(status_table([by_loss, by_exact_match], "two"))
    rows = [line for line in console.export_text().splitlines() if "transformer" in line]
    assert "loss 1.25" in rows[0] and " 9.00 " in rows[1] and "loss" not in rows[1]


@pytest.mark.parametrize("width", [80, 250])
def test_status_never_breaks_a_model_or_benchmark_name_whatever_the_width(width):
    from types import SimpleNamespace

    from rich.console import Console

    from benchbuild.sweep.state import RunState, status_table

    names = ("tests/sweep_grid/tiny_copy_twin.toml", "decoder_layers-1_encoder_layers-1",
             "scan/addprim_jump_num32_rep5")
    states = [RunState(spec=SimpleNamespace(model=names[0], configuration=names[1], benchmark=names[2], seed=seed),
                       state="pending", step=3, budget=30) for seed in (0, 1)]
    console = Console(width=width, record=True)
    console.print(status_table(states, "grid", width))
    text = console.export_text()
    assert all(text.count(name) == 2 for name in names), text  # each name whole, once per run
    assert "2 pending" in text and "3/30" in text
    assert all(len(line) <= width for line in text.splitlines())
