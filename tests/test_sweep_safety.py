"""`benchbuild sweep` owns what it starts and writes only inside its folder: Ctrl-C and SIGTERM stop every worker
(local or Dask) and a rerun finishes the runs; a second sweep of the same file is refused while the first runs; names
from the sweep file never lead out of `<out>/<name>`; an `[eval] split` the benchmark lacks is refused before
anything trains, and the corrected rerun goes through."""

from __future__ import annotations

import json
import os
import signal
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from benchbuild.cli import app
from benchbuild.errors import BenchbuildError
from benchbuild.locks import held
from benchbuild.sweep.spec import load_sweep
from benchbuild.sweep.state import run_state
from benchbuild.zoo.catalogue import CATALOGUE
from commands import Started, benchbuild, started
from small_inputs import scan_file_rows, write_benchmark
from waiting import gone, running, until

# A Transformer small enough that a step takes milliseconds on one CPU core, validated (and checkpointed) every 50
# steps on 1% of train: a run of 240 steps lasts a few seconds, long enough to be stopped in the middle (the tests
# signal as the first checkpoint appears, at step 50).
TINY = """[set]
eval_every = 50
batch_size = 16
held_out = 0.01
eval_batch_size = 512
architecture = { d_model = 16, d_ff = 32, num_heads = 2, encoder_layers = 1, decoder_layers = 1 }
"""


@pytest.fixture(scope="module")
def scan(tmp_path_factory, shared_data) -> Path:
    """A small SCAN benchmark folder (scan/addprim_turn_left, splits train and test): the first 400 train and 40 test
    rows of the canonical addprim_turn_left files with at most 8 actions. A run on it trains and is scored in seconds;
    the whole split is built by the test of a sweep whose build step makes it."""
    folder = shared_data / "scan" / "add_prim_split"
    splits = {"train": scan_file_rows(folder / "tasks_train_addprim_turn_left.txt", "train", 400, 8),
              "test": scan_file_rows(folder / "tasks_test_addprim_turn_left.txt", "test", 40, 8)}
    return write_benchmark(tmp_path_factory.mktemp("benchmarks") / "addprim_turn_left", splits, "scan",
                           "addprim_turn_left")


def _write_sweep(folder: Path, data: Path | str, *, steps: int = 240, seeds: tuple[int, ...] = (0, 1),
                 split: str = "test", top: str = "", name: str = "safety",
                 benchmark: str = "scan/addprim_turn_left", report: str = 'formats = ["csv"]\n') -> Path:
    """`folder`/sweep.toml: the tiny Transformer on the benchmark folder `data`; `top` adds top-level keys, `report`
    the `[report]` table's (a CSV table only by default: these tests read run folders, not the report's pages)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "sweep.toml"
    path.write_text(f'{top}name = "{name}"\nmodels = ["transformer"]\nseeds = {list(seeds)}\ndevice = "cpu"\n'
                    f"[budget]\nsteps = {steps}\n{TINY}[[benchmarks]]\nname = \"{benchmark}\"\ndata = \"{data}\"\n"
                    f"[eval]\nsplit = \"{split}\"\nbatch_size = 512\n[report]\n{report}", encoding="utf-8")
    return path


def _start(cwd: Path, *args: str) -> Started:
    """The sweep in a process group of its own, as a terminal's foreground job (its output in cwd/sweep.out, .err)."""
    return started("sweep", "sweep.toml", *args, cwd=cwd, stdout=cwd / "sweep.out", stderr=cwd / "sweep.err")


def _states(cwd: Path) -> list[str]:
    return [run_state(replace(spec, folder=str(cwd / spec.folder))).state
            for spec in load_sweep(cwd / "sweep.toml").runs]


def _training(process: Started, cwd: Path) -> list[psutil.Process]:
    """Once a run has written its first checkpoint: every process the sweep started (its workers)."""
    until(lambda: list(cwd.glob("runs/safety/*/*/seed*/checkpoints/step-*")), process, "a run's first checkpoint")
    children = psutil.Process(process.pid).children(recursive=True)
    assert children, "the runs train in worker processes"
    return children


def _stop(process: Started, children: list[psutil.Process], send) -> tuple[int, str]:
    """Send a signal with `send(pid)`; the exit code and stderr, once the sweep and every worker are gone. Whatever
    is left when the test ends (it failed, or the suite's per-test limit stopped it) is killed, so nothing goes on
    training."""
    try:
        send(process.pid)
        _, stderr = process.communicate()
        gone(children)
        return process.returncode, stderr
    finally:
        for child in children:
            if running(child):
                child.kill()
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _quiet(stderr: str) -> bool:
    """No traceback and no warning (a worker's KeyboardInterrupt, the resource tracker's leaked semaphores)."""
    return "Traceback" not in stderr and "Warning" not in stderr and "leaked" not in stderr


@pytest.mark.slow
def test_sigint_stops_every_local_worker_and_a_rerun_finishes_the_sweep(scan, tmp_path):
    _write_sweep(tmp_path, scan, seeds=(0, 1, 2))
    process = _start(tmp_path, "--jobs", "2")
    children = _training(process, tmp_path)
    code, stderr = _stop(process, children, lambda pid: os.kill(pid, signal.SIGINT))
    assert code == 130, stderr
    assert _quiet(stderr), stderr
    states = _states(tmp_path)
    assert "done" not in states and "partial" in states, f"stopped in the middle, not trained to the end: {states}"
    rerun = benchbuild("sweep", "sweep.toml", "--jobs", "2", cwd=tmp_path)
    assert rerun.returncode == 0, rerun.stderr
    assert _states(tmp_path) == ["done"] * 3


@pytest.mark.slow
def test_sigterm_stops_a_one_job_sweep_with_exit_143(scan, tmp_path):
    _write_sweep(tmp_path, scan, seeds=(0,))
    process = _start(tmp_path, "--jobs", "1")
    children = _training(process, tmp_path)
    code, stderr = _stop(process, children, lambda pid: os.kill(pid, signal.SIGTERM))
    assert code == 143, stderr
    assert _quiet(stderr), stderr
    assert _states(tmp_path) == ["partial"]


@pytest.mark.slow
def test_a_sweep_killed_alone_takes_its_workers_with_it(scan, tmp_path):
    """SIGKILL to the sweep's process only (an out-of-memory kill): its workers, forked from a fork server that
    outlives the sweep as long as they do, see it gone within a second and end; no orphan goes on training."""
    _write_sweep(tmp_path, scan, steps=100_000)
    process = _start(tmp_path, "--jobs", "2")
    children = _training(process, tmp_path)
    code, _ = _stop(process, children, lambda pid: os.kill(pid, signal.SIGKILL))
    assert code == -signal.SIGKILL


@pytest.mark.slow
def test_ctrl_c_in_a_terminal_stops_the_workers_without_a_traceback(scan, tmp_path):
    """Ctrl-C reaches every process of the terminal's foreground group, the workers too: none prints a traceback,
    and none goes on with the runs still queued."""
    _write_sweep(tmp_path, scan, seeds=(0, 1, 2))
    process = _start(tmp_path, "--jobs", "2")
    children = _training(process, tmp_path)
    code, stderr = _stop(process, children, lambda pid: os.killpg(pid, signal.SIGINT))
    assert code == 130, stderr
    assert _quiet(stderr), stderr
    assert "done" not in _states(tmp_path)


@pytest.mark.slow
@pytest.mark.distributed
def test_sigint_closes_the_embedded_dask_cluster_and_a_rerun_finishes_the_sweep(scan, tmp_path):
    pytest.importorskip("distributed", reason="Dask distributed is not installed (the `distributed` extra)")
    # The runs of the local tests (240 steps): had the workers gone on training while the cluster closed (seconds,
    # some 500 steps), they would have finished.
    _write_sweep(tmp_path, scan)
    process = _start(tmp_path, "--engine", "dask", "--workers", "2")
    children = _training(process, tmp_path)
    code, stderr = _stop(process, children, lambda pid: os.kill(pid, signal.SIGINT))
    assert code == 130, stderr
    assert _quiet(stderr), stderr
    assert "done" not in _states(tmp_path)
    rerun = benchbuild("sweep", "sweep.toml", "--engine", "dask", "--workers", "1", cwd=tmp_path)  # one is enough
    assert rerun.returncode == 0, rerun.stderr
    assert _states(tmp_path) == ["done"] * 2


@pytest.mark.slow
def test_a_second_sweep_of_the_same_file_is_refused_while_the_first_runs(scan, tmp_path):
    _write_sweep(tmp_path, scan, steps=100_000, seeds=(0,))
    first = _start(tmp_path, "--jobs", "1")
    try:
        until(lambda: held(tmp_path / "runs" / "safety"), first, "the first sweep locked its folder")
        second = benchbuild("sweep", "sweep.toml", "--jobs", "1", cwd=tmp_path)
        status = benchbuild("sweep", "sweep.toml", "--status", cwd=tmp_path)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    assert second.returncode == 1
    assert second.stderr.count("\n") == 1 and f"is in use by benchbuild process {first.pid} " in second.stderr
    assert status.returncode == 0, "--status reads the folders of a sweep running elsewhere"


def _refusal(tmp_path: Path, monkeypatch, *args: str) -> str:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["sweep", "sweep.toml", *args], standalone_mode=False)
    assert isinstance(result.exception, BenchbuildError), result.output
    return str(result.exception)


ESCAPES = {
    "a sweep name that climbs": ({"name": "../escaped"}, "name '../escaped' must be a plain name"),
    "a sweep name with a separator": ({"name": "a/b"}, "name 'a/b' must be a plain name"),
    "a benchmark name that climbs": ({"benchmark": "scan/.."}, "benchmark name 'scan/..' must be family/name"),
    "a benchmark name that is absolute": ({"benchmark": "/etc"}, "benchmark name '/etc' must be family/name"),
    "an out that climbs": ({"top": 'out = "../elsewhere"\n'}, "out '../elsewhere' must be a relative path"),
    "an absolute out": ({"top": 'out = "{tmp}/elsewhere"\n'}, "out '{tmp}/elsewhere' must be a relative path"),
    "an empty out": ({"top": 'out = ""\n'}, "out is empty"),
    "a report out that climbs": ({"report": 'out = "../report"\n'}, "[report] out '../report' must be"),
}


@pytest.mark.parametrize("case", sorted(ESCAPES))
def test_names_that_would_lead_out_of_the_sweep_folder_are_refused(case, scan, tmp_path, monkeypatch):
    options, message = ESCAPES[case]
    options = {key: value.replace("{tmp}", str(tmp_path)) for key, value in options.items()}
    message = message.replace("{tmp}", str(tmp_path))
    _write_sweep(tmp_path / "work", scan, steps=20, seeds=(0,), **options)
    assert message in _refusal(tmp_path / "work", monkeypatch)
    assert sorted(path.name for path in tmp_path.rglob("*")) == ["sweep.toml", "work"]


def test_a_model_that_is_not_a_plain_name_or_a_model_file_is_refused(scan, tmp_path, monkeypatch):
    path = _write_sweep(tmp_path / "work", scan)
    path.write_text(path.read_text().replace('["transformer"]', '["../../outside"]'), encoding="utf-8")
    assert "model '../../outside' must be a plain name" in _refusal(tmp_path / "work", monkeypatch)
    assert sorted(path.name for path in tmp_path.rglob("*")) == ["sweep.toml", "work"]


def test_a_model_file_outside_names_its_runs_by_its_stem_inside_the_sweep_folder(scan, tmp_path, monkeypatch):
    (tmp_path / "m.toml").write_text((CATALOGUE / "transformer.toml").read_text())
    path = _write_sweep(tmp_path / "work", scan)
    path.write_text(path.read_text().replace('["transformer"]', '["../m.toml"]'), encoding="utf-8")
    monkeypatch.chdir(tmp_path / "work")
    runs = load_sweep("sweep.toml").runs
    assert [run.folder for run in runs] == ["runs/safety/m/addprim_turn_left/seed0",
                                            "runs/safety/m/addprim_turn_left/seed1"]
    assert {run.model for run in runs} == {"../m.toml"}


def test_two_models_with_one_folder_name_are_refused(scan, tmp_path, monkeypatch):
    (tmp_path / "transformer.toml").write_text((CATALOGUE / "transformer.toml").read_text())
    path = _write_sweep(tmp_path / "work", scan)
    path.write_text(path.read_text().replace('["transformer"]', '["transformer", "../transformer.toml"]'),
                    encoding="utf-8")
    assert "two models have the folder name 'transformer'" in _refusal(tmp_path / "work", monkeypatch)


def test_a_link_planted_in_the_sweep_folder_is_not_followed(scan, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    _write_sweep(tmp_path / "work", scan, steps=20, seeds=(0,))
    (tmp_path / "work/runs/safety").mkdir(parents=True)
    (tmp_path / "work/runs/safety/transformer").symlink_to(outside)
    result = benchbuild("sweep", "sweep.toml", cwd=tmp_path / "work")
    assert result.returncode == 1
    assert "leads outside the sweep's folder runs/safety" in result.stderr and result.stderr.count("\n") == 1
    assert list(outside.iterdir()) == []


def test_an_eval_split_the_benchmark_lacks_is_refused_before_anything_trains(scan, tmp_path):
    _write_sweep(tmp_path, scan, steps=20, seeds=(0,), split="tset")
    result = benchbuild("sweep", "sweep.toml", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith(f"benchbuild: error: sweep.toml: [eval] split 'tset' is not a split of {scan} "
                                    "(its splits: train, test)")
    assert not (tmp_path / "runs").exists(), "nothing was trained, nothing written"
    _write_sweep(tmp_path, scan, steps=20, seeds=(0,), split="test")
    corrected = benchbuild("sweep", "sweep.toml", cwd=tmp_path)
    assert corrected.returncode == 0, corrected.stderr
    assert _states(tmp_path) == ["done"]


def test_an_eval_split_is_checked_right_after_the_build_that_makes_the_benchmark(tmp_path):
    (tmp_path / "build.toml").write_text('[[steps]]\ncommand = "build-scan"\n[steps.options]\nout = "out/scan"\n'
                                         'split = ["addprim_turn_left"]\n', encoding="utf-8")
    _write_sweep(tmp_path, "out/scan/addprim_turn_left", steps=20, seeds=(0,), split="validation",
                 top='build = "build.toml"\n')
    result = benchbuild("sweep", "sweep.toml", cwd=tmp_path)
    assert result.returncode == 1
    assert "[eval] split 'validation' is not a split of out/scan/addprim_turn_left" in result.stderr
    assert json.loads((tmp_path / "out/scan/addprim_turn_left/build.json").read_text())["splits"].keys() == {
        "train", "test"}
    assert not list(tmp_path.glob("runs/safety/*/*/seed*")), "nothing was trained"
    _write_sweep(tmp_path, "out/scan/addprim_turn_left", steps=20, seeds=(0,), split="test",
                 top='build = "build.toml"\n')
    corrected = benchbuild("sweep", "sweep.toml", cwd=tmp_path)
    assert corrected.returncode == 0, corrected.stderr
    assert _states(tmp_path) == ["done"]
