"""Commands stopped by a real signal, each a process of its own (forked from the tests' fork server, tests/commands.py
`started`; one test starts `python -m benchbuild` itself): Ctrl-C (SIGINT to the process group, as a
terminal sends it) of `train`, `eval` and `build-scan` exits 130 and leaves nothing that looks complete; `train`
SIGKILLed at a random step resumes to the bytes of an uninterrupted run; `eval` SIGKILLed while it decodes leaves no
`metrics.json`, and the same command then finishes. Inputs are tiny and need no `../shared`: SCAN rows from the
grammar and a one-layer Transformer; each test takes seconds, most of them the interpreter's start-up."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from commands import Started, benchbuild, benchbuild_in_process, log_without_times, sha256, started
from small_inputs import scan_grammar_rows, tiny_transformer_entry, write_benchmark
from waiting import until

from benchbuild import cli
from benchbuild.device import cpu_threads
from benchbuild.errors import Terminated
from benchbuild.locks import held
from benchbuild.training.loop import train

BENCHBUILD = [sys.executable, "-m", "benchbuild"]
# One torch thread, as in this process (tests/conftest.py): a run trained here and one trained by a command then
# compute alike. Rich draws its progress bars into the captured stderr, so a test sees when decoding has begun.
ENVIRONMENT = {**os.environ, "OMP_NUM_THREADS": "1", "TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1"}

STEPS, EVAL_EVERY = 120, 20
TINY = tiny_transformer_entry("tiny_transformer", "scan", steps=STEPS, batch_size=16, learning_rate=3e-3,
                              eval_every=EVAL_EVERY, select="last")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> tuple[Path, Path]:
    """(model file, benchmark folder): 200 train and 100 test rows, SCAN commands of at most four actions."""
    folder = tmp_path_factory.mktemp("inputs")
    model = folder / "tiny_transformer.toml"
    model.write_text(TINY, encoding="utf-8")
    rows = scan_grammar_rows(300, 4, seed=0)
    return model, write_benchmark(folder / "scan", {"train": rows[:200], "test": rows[200:]}, "scan", "tiny")


@pytest.fixture(scope="module")
def uninterrupted(inputs, tmp_path_factory) -> Path:
    """The run trained to its end in this process, on one thread."""
    model, data = inputs
    run_dir = tmp_path_factory.mktemp("uninterrupted") / "run"
    with cpu_threads(1):  # as the commands run (OMP_NUM_THREADS=1): the bytes depend on the thread count
        train(model, data, run_dir, seed=0, device="cpu", progress=False)
    return run_dir


def train_command(inputs, run_dir: Path, *extra: str) -> list[str]:
    model, data = inputs
    return [*BENCHBUILD, "train", "--model", str(model), "--data", str(data), "--out", str(run_dir), "--device", "cpu",
            *extra]


def eval_command(run_dir: Path, data: Path, out: Path) -> list[str]:
    """One sentence a batch: decoding the 100 test rows lasts long enough to be interrupted."""
    return [*BENCHBUILD, "eval", "--run", str(run_dir), "--data", str(data), "--out", str(out), "--device", "cpu",
            "--batch-size", "1"]


def start(command: list[str], stderr: Path, cwd: Path | None = None) -> Started:
    """`command` in a process group of its own (a terminal's foreground job), its stderr into the file `stderr`."""
    assert command[:len(BENCHBUILD)] == BENCHBUILD
    stderr.write_text("", encoding="utf-8")
    return started(*command[len(BENCHBUILD):], cwd=cwd, environment=ENVIRONMENT, stderr=stderr)


def run(command: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`command` run to its end, its output captured."""
    assert command[:len(BENCHBUILD)] == BENCHBUILD
    return benchbuild(*command[len(BENCHBUILD):], cwd=cwd, environment=ENVIRONMENT)


def wait_for(process: Started | subprocess.Popen, ready, what: str) -> None:
    """Return once `ready()`; fail if the process ends first (tests/waiting.py: no deadline)."""
    until(ready, process, what)


def _recorded_status(run_dir: Path) -> str | None:
    """run.json's status, None while it is missing or being replaced."""
    try:
        return json.loads((run_dir / "run.json").read_text(encoding="utf-8")).get("status")
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def stop(process: Started | subprocess.Popen, sent: int) -> int:
    """Send `sent` to the process group; its exit code (SIGKILLed: -9) once it has ended. Killed outright if the
    test ends first (the suite's per-test limit), so nothing is left running."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sent)
    try:
        return process.wait()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def logged_steps(run_dir: Path) -> int:
    """The last step `train_log.jsonl` records (a line cut by a kill is not counted)."""
    step = 0
    with contextlib.suppress(FileNotFoundError):
        for line in (run_dir / "train_log.jsonl").read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                step = max(step, json.loads(line)["step"])
    return step


def checkpoints(run_dir: Path) -> list[int]:
    return sorted(int(path.name.split("-")[1]) for path in (run_dir / "checkpoints").glob("step-*"))


def leftovers(folder: Path) -> list[str]:
    """Work and partial files or folders of saves that did not finish (the lock file aside)."""
    return [str(path.relative_to(folder)) for path in folder.rglob("*")
            if (path.name.startswith(".") and path.name != ".benchbuild.lock") or ".partial" in path.name]




def assert_interrupted(code: int, stderr: Path) -> None:
    """Exit 130, no traceback."""
    text = stderr.read_text(encoding="utf-8", errors="replace")
    assert code == 130, text
    assert "Traceback" not in text, text


def test_train_sigkilled_at_a_random_step_resumes_to_the_bytes_of_an_uninterrupted_run(
        inputs, uninterrupted, kill_seed, tmp_path):
    run_dir = tmp_path / "run"
    kill_at = random.Random(f"{kill_seed} train").randrange(EVAL_EVERY + 1, STEPS)
    print(f"BENCHBUILD_KILL_SEED={kill_seed}: train killed once it logged step {kill_at} of {STEPS}")
    process = start(train_command(inputs, run_dir), tmp_path / "train.log")
    wait_for(process, lambda: logged_steps(run_dir) >= kill_at, f"step {kill_at}")
    code = stop(process, signal.SIGKILL)
    where = f"killed after step {logged_steps(run_dir)} (exit {code}; replay: BENCHBUILD_KILL_SEED={kill_seed})"
    assert code in (-signal.SIGKILL, 0), where  # 0: it finished first, which a loaded machine may allow
    if code:
        assert json.loads((run_dir / "run.json").read_text())["status"] != "complete", where

    rerun = run(train_command(inputs, run_dir))
    assert rerun.returncode == 0, f"{where}; the rerun says: {rerun.stderr}"
    assert json.loads((run_dir / "run.json").read_text())["status"] == "complete", where
    final = Path("checkpoints", f"step-{STEPS:08d}", "model.safetensors")
    for weights in (Path("model.safetensors"), final):
        assert sha256(run_dir / weights) == sha256(uninterrupted / weights), f"{where}: {weights} differs"
    assert log_without_times(run_dir) == log_without_times(uninterrupted), where
    assert not leftovers(run_dir), where


@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_train_stopped_between_validations_resumes_from_the_step_it_reached_to_the_uninterrupted_bytes(
        inputs, uninterrupted, kill_seed, tmp_path, sent):
    """Ctrl-C or SIGTERM at a random step: `train` finishes the step, saves a resume point at it (a checkpoint no
    validation chose) and exits 130 / 143; the same command goes on from that step, not from the last validation,
    and ends in the uninterrupted run's weights and log."""
    run_dir = tmp_path / "run"
    # Five steps past a validation: the step the signal lands in is one no validation follows (at one that a
    # validation follows, or in the validation, the resume point says the validation is due: the test below).
    stop_at = EVAL_EVERY * random.Random(f"{kill_seed} {sent.name}").randrange(1, STEPS // EVAL_EVERY) + 5
    print(f"BENCHBUILD_KILL_SEED={kill_seed}: train stopped with {sent.name} once it logged step {stop_at}")
    process = start(train_command(inputs, run_dir), tmp_path / "train.log")
    wait_for(process, lambda: logged_steps(run_dir) >= stop_at, f"step {stop_at}")
    code = stop(process, sent)
    where = f"{sent.name} after step {logged_steps(run_dir)} (exit {code}; replay: BENCHBUILD_KILL_SEED={kill_seed})"
    if code == 0:  # it finished first, which a loaded machine may allow: nothing to resume
        return
    assert code == (130 if sent == signal.SIGINT else 143), where
    reached = checkpoints(run_dir)[-1]
    assert reached >= stop_at, where  # never back to the last validation, wherever the signal landed
    assert not leftovers(run_dir), where
    with cpu_threads(1):
        result = train(*inputs, run_dir, seed=0, device="cpu", progress=False)
    assert result.resumed_from == reached, where
    final = Path("checkpoints", f"step-{STEPS:08d}", "model.safetensors")
    for weights in (Path("model.safetensors"), final):
        assert sha256(run_dir / weights) == sha256(uninterrupted / weights), f"{where}: {weights} differs"
    assert log_without_times(run_dir) == log_without_times(uninterrupted), where


@pytest.mark.parametrize("due", [2 * EVAL_EVERY, STEPS], ids=["validation-step", "last-step"])
@pytest.mark.parametrize("when", ["in-the-step", "after-its-log-line", "after-the-selected-model", "sigterm"])
def test_train_stopped_at_a_step_that_a_validation_follows_resumes_there_and_validates_first(
        inputs, uninterrupted, tmp_path, monkeypatch, due, when):
    """A Ctrl-C that lands in a step a validation must follow (every eval_every-th, the last), or in that validation
    (after its log line, or once it saved the model it selected), leaves a resume point at that step whose
    validation is due: the rerun validates there first, as the uninterrupted run does, and goes on, instead of going
    back a whole validation interval (hours, at batch 1) or going on past the step unvalidated (its log would
    differ; at the last step the run would end unselected). The signal is a real SIGINT sent to this process from
    inside the real step or validation, the moments a subprocess test cannot hit on purpose; "sigterm" is a SIGTERM
    there under the command line's handler (a scheduler's stop: `Terminated`, exit 143)."""
    from benchbuild.training import loop

    real_step, real_save, real_log = loop.step, loop.save_pretrained, loop.append_log
    sent = signal.SIGTERM if when == "sigterm" else signal.SIGINT

    def step_then_ctrl_c(run):
        real_step(run)
        if run.state.step == due:
            os.kill(os.getpid(), signal.SIGINT)  # held until the step returns, as a terminal's Ctrl-C would be

    selections = []

    def save_then_ctrl_c(out, *saved):
        real_save(out, *saved)
        if len(saved) == 2:  # the model a validation selected (select = "last": each one), not the dictionaries
            selections.append(out)
            if len(selections) * EVAL_EVERY == due:  # `due`'s validation: one every EVAL_EVERY steps
                os.kill(os.getpid(), sent)  # acts at once: signals are not held through a validation

    def log_then_ctrl_c(out, record):
        real_log(out, record)
        if record["step"] == due and "elapsed_s" in record:
            os.kill(os.getpid(), signal.SIGINT)

    run_dir = tmp_path / "run"
    if when == "in-the-step":
        monkeypatch.setattr(loop, "step", step_then_ctrl_c)
    elif when in ("after-the-selected-model", "sigterm"):
        monkeypatch.setattr(loop, "save_pretrained", save_then_ctrl_c)
    else:
        monkeypatch.setattr(loop, "append_log", log_then_ctrl_c)
    previous = signal.getsignal(signal.SIGTERM)
    if when == "sigterm":
        signal.signal(signal.SIGTERM, cli._terminate)  # what `benchbuild train` runs under
    try:
        with cpu_threads(1), pytest.raises(Terminated if when == "sigterm" else KeyboardInterrupt):
            train(*inputs, run_dir, seed=0, device="cpu", progress=False)
    finally:
        signal.signal(signal.SIGTERM, previous)
    monkeypatch.undo()
    assert checkpoints(run_dir)[-1] == due
    assert not leftovers(run_dir) and not held(run_dir)
    with cpu_threads(1):
        result = train(*inputs, run_dir, seed=0, device="cpu", progress=False)
    assert result.resumed_from == due
    final = Path("checkpoints", f"step-{STEPS:08d}", "model.safetensors")
    for weights in (Path("model.safetensors"), final):
        assert sha256(run_dir / weights) == sha256(uninterrupted / weights), f"{weights} differs"
    assert log_without_times(run_dir) == log_without_times(uninterrupted)


@pytest.mark.parametrize("at", [45, STEPS], ids=["between-steps", "after-the-last-step"])
def test_a_ctrl_c_between_steps_is_held_to_the_next_step_end_or_acts_after_the_last(
        inputs, uninterrupted, tmp_path, monkeypatch, at):
    """A Ctrl-C that lands outside a step (here while the progress line of step `at` is made) is held like one in a
    step: after step 45's line, the resume point is step 46's end; after the last step's, it acts as the loop ends,
    before the run is marked complete. Either way the rerun ends in the uninterrupted bytes."""
    from benchbuild.training import loop

    real_status = loop.training_status

    def status_then_ctrl_c(run):
        if run.state.step == at:
            os.kill(os.getpid(), signal.SIGINT)
        return real_status(run)

    run_dir = tmp_path / "run"
    monkeypatch.setattr(loop, "training_status", status_then_ctrl_c)
    with cpu_threads(1), pytest.raises(KeyboardInterrupt):
        train(*inputs, run_dir, seed=0, device="cpu", progress=False)
    monkeypatch.undo()
    reached = checkpoints(run_dir)[-1]
    assert reached == (at + 1 if at < STEPS else STEPS)
    assert json.loads((run_dir / "run.json").read_text())["status"] != "complete"
    with cpu_threads(1):
        result = train(*inputs, run_dir, seed=0, device="cpu", progress=False)
    assert result.resumed_from == reached
    final = Path("checkpoints", f"step-{STEPS:08d}", "model.safetensors")
    for weights in (Path("model.safetensors"), final):
        assert sha256(run_dir / weights) == sha256(uninterrupted / weights), f"{weights} differs"
    assert log_without_times(run_dir) == log_without_times(uninterrupted)


def test_ctrl_c_stops_train_with_130_and_leaves_a_run_that_resumes(inputs, tmp_path):
    run_dir = tmp_path / "run"
    process = start(train_command(inputs, run_dir, "--max-steps", "100000"), tmp_path / "train.log")
    wait_for(process, lambda: checkpoints(run_dir), "the first checkpoint")
    assert_interrupted(stop(process, signal.SIGINT), tmp_path / "train.log")
    said = (tmp_path / "train.log").read_text(encoding="utf-8", errors="replace")
    assert "benchbuild: interrupted (the same command again goes on from where it stopped)\n" in said

    # Not complete, so never reported ("starting" until the first validation has updated run.json).
    assert json.loads((run_dir / "run.json").read_text())["status"] in ("starting", "running")
    assert not leftovers(run_dir) and not held(run_dir)
    model, data = inputs
    last = checkpoints(run_dir)[-1]
    result = train(model, data, run_dir, seed=0, max_steps=last + 1, device="cpu", progress=False)
    assert (result.resumed_from, result.steps) == (last, last + 1)


@pytest.fixture(scope="module")
def evaluable(inputs, tmp_path_factory) -> Path:
    """A run trained 20 steps in this process, to evaluate."""
    model, data = inputs
    run_dir = tmp_path_factory.mktemp("evaluable") / "run"
    train(model, data, run_dir, seed=0, max_steps=EVAL_EVERY, device="cpu", progress=False)
    return run_dir


def decoding(stderr: Path):
    return lambda: "decoding" in stderr.read_text(encoding="utf-8", errors="replace")


def test_ctrl_c_stops_eval_with_130_and_writes_no_metrics(inputs, evaluable, tmp_path):
    _, data = inputs
    out = tmp_path / "evaluation"
    process = start(eval_command(evaluable, data, out), tmp_path / "eval.log")
    wait_for(process, decoding(tmp_path / "eval.log"), "decoding")
    assert_interrupted(stop(process, signal.SIGINT), tmp_path / "eval.log")
    said = (tmp_path / "eval.log").read_text(encoding="utf-8", errors="replace")
    # eval decodes again from the start: it does not claim to resume
    assert "benchbuild: interrupted (the same command again starts it over)\n" in said
    assert not (out / "metrics.json").exists() and not (out / "predictions.jsonl").exists()
    assert not out.exists() or not leftovers(out)


def test_eval_sigkilled_before_its_metrics_land_leaves_none_and_the_same_command_finishes(inputs, evaluable, tmp_path):
    _, data = inputs
    out = tmp_path / "evaluation"
    process = start(eval_command(evaluable, data, out), tmp_path / "eval.log")
    wait_for(process, decoding(tmp_path / "eval.log"), "decoding")
    assert stop(process, signal.SIGKILL) == -signal.SIGKILL
    assert not (out / "metrics.json").exists()

    rerun = run(eval_command(evaluable, data, out))
    assert rerun.returncode == 0, rerun.stderr
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["rows"] == 100 and metrics["split"] == "test"
    assert len((out / "predictions.jsonl").read_text(encoding="utf-8").splitlines()) == 100
    assert not leftovers(out)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def test_ctrl_c_stops_build_scan_with_130_and_every_folder_it_shows_is_complete(tmp_path):
    # The twenty few-shot splittings take about a second together on a quiet machine: a test process slowed by load
    # could see the first one only after the last (CI saw exit 0 once), so eight full-size splittings follow them.
    splits = [f"fewshot_num{n}_rep{r}" for n in (1, 2, 4, 8) for r in (1, 2, 3, 4, 5)] + [
        "simple", "length", "addprim_jump", "addprim_turn_left", "template_around_right", "template_jump_around_right",
        "template_opposite_right", "template_right"]
    command = [*BENCHBUILD, "build-scan", "--out", "scan", *[f"--split={split}" for split in splits]]
    (tmp_path / "interrupted").mkdir()
    with (tmp_path / "build.log").open("w") as log:
        process = subprocess.Popen(command, cwd=tmp_path / "interrupted", stdout=subprocess.DEVNULL, stderr=log,
                                   env=ENVIRONMENT, start_new_session=True)
    out = tmp_path / "interrupted" / "scan"
    wait_for(process, lambda: out.is_dir() and any(out.iterdir()), "its first splitting")
    assert_interrupted(stop(process, signal.SIGINT), tmp_path / "build.log")

    assert not leftovers(out)
    shown = sorted(path.name for path in out.iterdir())
    assert len(shown) < len(splits), "the build finished before Ctrl-C reached it"
    # Each folder it shows is what the same command writes uninterrupted (build.json records the command line).
    (tmp_path / "reference").mkdir()
    reference = subprocess.run(command, cwd=tmp_path / "reference", capture_output=True, text=True,
                               env=ENVIRONMENT, check=False)  # as the interrupted one: `python -m benchbuild`
    assert reference.returncode == 0, reference.stderr
    for name in shown:
        assert snapshot(out / name) == snapshot(tmp_path / "reference" / "scan" / name), name


def test_ctrl_c_stops_a_pipeline_at_once_and_the_same_command_goes_on_from_the_step_it_stopped(inputs, tmp_path):
    """`benchbuild run`: Ctrl-C during its first training step exits 130 with one line naming the step, starts no
    later step (typer hands a step's Ctrl-C back as exit code 130, which the step loop once ignored), and the same
    command then resumes that run from its checkpoint and runs the rest."""
    model, data = inputs
    pipeline = tmp_path / "two_runs.toml"
    pipeline.write_text(f"""
[[steps]]
command = "train"
description = "first"
[steps.options]
model = "{model}"
data = "{data}"
out = "{tmp_path / 'first'}"
device = "cpu"
max_steps = 100000
max_minutes = 0.2

[[steps]]
command = "train"
description = "second"
[steps.options]
model = "{model}"
data = "{data}"
out = "{tmp_path / 'second'}"
device = "cpu"
max_steps = {EVAL_EVERY}
""", encoding="utf-8")
    command = [*BENCHBUILD, "run", str(pipeline)]
    process = start(command, tmp_path / "run.log")
    wait_for(process, lambda: checkpoints(tmp_path / "first"), "the first checkpoint")
    code = stop(process, signal.SIGINT)
    text = (tmp_path / "run.log").read_text(encoding="utf-8", errors="replace")
    assert_interrupted(code, tmp_path / "run.log")
    assert "benchbuild: interrupted during step" in text and "first" in text, text
    assert f"benchbuild run {pipeline}` again" in " ".join(text.split()), text
    assert not (tmp_path / "second").exists(), "a step started after Ctrl-C"
    assert json.loads((tmp_path / "first" / "run.json").read_text())["status"] in ("starting", "running")
    stopped_at = checkpoints(tmp_path / "first")[-1]

    rerun = run(command)
    assert rerun.returncode == 0, rerun.stderr
    first = json.loads((tmp_path / "first" / "run.json").read_text())
    assert first["status"] == "complete" and first["steps_done"] >= stopped_at
    said = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", rerun.stdout + rerun.stderr)  # the terminal's colours off
    assert f"resumed from step {stopped_at}" in said, said
    assert json.loads((tmp_path / "second" / "run.json").read_text())["steps_done"] == EVAL_EVERY


def test_ctrl_c_of_a_single_command_says_so_and_eval_scores_the_unfinished_run_only_when_told(inputs, tmp_path):
    """Typer returns 130 for Ctrl-C instead of raising: the CLI still prints its one line. The run it leaves is
    unfinished: `eval` refuses it in one line naming its step and status, and with --allow-unfinished scores it with
    metrics.json saying so; `report` notes it."""
    run_dir = tmp_path / "run"
    process = start(train_command(inputs, run_dir, "--max-steps", "100000"), tmp_path / "train.log")
    # run.json takes the step budget just after the first checkpoint is written: wait for both.
    wait_for(process, lambda: (run_dir / "config.json").is_file() and checkpoints(run_dir)
             and _recorded_status(run_dir) == "running", "the first checkpoint")
    assert_interrupted(stop(process, signal.SIGINT), tmp_path / "train.log")
    assert "benchbuild: interrupted" in (tmp_path / "train.log").read_text(encoding="utf-8", errors="replace")

    _, data = inputs
    run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    status, done = run["status"], run.get("steps_done") or 0
    assert status in ("starting", "running")
    refused = benchbuild_in_process("eval", "--run", run_dir, "--data", data, "--out", tmp_path / "refused",
                                    "--device", "cpu")
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert f"is unfinished (step {done:,} of 100,000, unfinished, status {status!r})" in refused.stderr
    assert "--allow-unfinished" in refused.stderr and not (tmp_path / "refused" / "metrics.json").exists()

    scored = benchbuild_in_process("eval", "--run", run_dir, "--data", data, "--device", "cpu", "--allow-unfinished")
    assert scored.returncode == 0, scored.stderr
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["unfinished"] == f"step {done:,} of 100,000, unfinished" and metrics["rows"] == 100
    card = (run_dir / "README.md").read_text(encoding="utf-8")  # the model card says so too
    assert (f"**Unfinished**: `metrics.json` scores the last selected checkpoint of a run that has not finished "
            f"training (step {done:,} of 100,000, unfinished)") in card
    reported = benchbuild_in_process("report", run_dir, "--out", tmp_path / "report", "--format", "md")
    assert reported.returncode == 0, reported.stderr
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "has not finished training" in text
    assert "| tiny_transformer [finished=False] |" in text  # never a row that looks like a finished result


SWALLOWED = """
import os, signal, sys
from benchbuild import cli

@cli.app.command("swallow")
def swallow():
    class Finalised:
        def __del__(self):  # Python prints an exception raised here and goes on, as in fsspec's file close
            os.kill(os.getpid(), signal.SIGINT)
            sum(range(10_000))  # the handler runs here, inside the finaliser
    Finalised()
    raise ValueError("I/O operation on closed file")

sys.argv = ["benchbuild", "swallow"]
cli.main()
"""


def test_a_ctrl_c_that_python_swallows_in_a_finaliser_still_stops_the_command_with_130(tmp_path):
    """Seen in CI: Ctrl-C landed in a file's finaliser while build-scan saved a split; Python printed the
    KeyboardInterrupt and went on, and the command then failed on the closed file with exit 1. The stop is what
    happened: exit 130 and the interrupted line, whatever failed after it."""
    done = subprocess.run([sys.executable, "-c", SWALLOWED], capture_output=True, text=True,
                          env=ENVIRONMENT)
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "benchbuild: interrupted (the same command again starts it over)"
    assert "I/O operation on closed file" not in done.stderr.strip().splitlines()[-1]
