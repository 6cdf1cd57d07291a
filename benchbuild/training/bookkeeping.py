"""A training run's bookkeeping beside the loop (`loop`): the check of its paths made before anything is loaded, the
claim on the run folder, the checks of what the folder holds against the plan (`plan`: selection rule, budget), what
`run.json` records of the selection and of a run that diverged, when a run is out of time or settled, and the resume
point a Ctrl-C or SIGTERM leaves."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchbuild.errors import BenchbuildError
from benchbuild.outputs import check_output
from benchbuild.run_folder import RUN_FILE, claim, mark_failed, read_run
from benchbuild.training.checkpoints import TrainerState, save_checkpoint
from benchbuild.training.plan import CEILINGS
from benchbuild.zoo.recipe import TrainingRecipe

if TYPE_CHECKING:
    from benchbuild.training.prepared import PreparedRun


def check_run_paths(model: str | Path, data: str | Path, out: str | Path) -> None:
    """The run folder `out` is not, holds nothing of, and does not lie in the benchmark `data` or a model file, and
    is a run folder (or new): checked before anything is loaded."""
    model_file = Path(model) if str(model).endswith(".toml") else None
    check_output(Path(out), "--out", "run", inputs=[("--data", Path(data)), ("--model", model_file)],
                 exists="continue")


@contextlib.contextmanager
def claimed(out: Path):
    """Hold the run folder for this process (under `accelerate launch`, the main process only); a run that fails
    before it wrote anything leaves no folder behind that would block the corrected rerun."""
    import os

    from benchbuild.outputs import CLAIM_FILES

    main_process = os.environ.get("RANK", "0") == "0"
    if not main_process:
        yield
        return
    new = not out.exists()
    lock = claim(out)
    with lock:
        try:
            yield
        except BaseException:
            if new and out.is_dir() and all(entry.name in CLAIM_FILES for entry in out.iterdir()):
                lock.release()
                for entry in out.iterdir():
                    entry.unlink()
                out.rmdir()
            raise


def run_environment() -> dict:
    """run.json's `environment`: the software (`run_folder.environment`) and the attention path grouped CPU training
    takes here (the compiled kernel, or why it is off: the two draw other dropout masks, so they are other trainings,
    and `reproduce` names a difference)."""
    from benchbuild.run_folder import environment
    from benchbuild.zoo.attention.packed import path_in_words

    return {**environment(), "attention_kernel": path_in_words()}


def trained_segments(recorded: list[dict] | None, step: int, environment: dict) -> list[dict]:
    """run.json's `segments`: which code trained which of the run's steps. Each start or resume adds one, from the step
    it starts at, with the commit (and whether the checkout had uncommitted changes) it runs; one that started at or
    after that step trained only steps the resume discards, so it goes. A run resumed from a folder written before
    segments were kept has none for the steps before its first resume."""
    kept = [segment for segment in recorded or [] if segment["from_step"] < step]
    return kept + [{"from_step": step, "benchbuild_commit": environment.get("benchbuild_commit"),
                    "benchbuild_dirty": environment.get("benchbuild_dirty")}]


def check_budget_change(out: Path, record: dict, budget: int) -> None:
    """A run folder's steps are never undone: a budget below the steps it has trained is refused (it would record a
    smaller budget beside the larger run's weights). A larger one trains on; its earlier scores go stale
    (`run_folder.stale_scores`) until it is evaluated again."""
    done = record.get("steps_done") or 0
    if done and budget < done:
        raise BenchbuildError(f"{out} has trained {done:,} steps already; a budget of {budget:,} cannot undo them: "
                              f"give --max-steps {done:,} or more to continue it, another --out for a shorter run, "
                              "or --overwrite to start it again")


def recorded_run(out: Path, overwrite: bool) -> dict[str, Any]:
    """The `run.json` of the run `out` holds, if any, that this run would resume (not one `overwrite` replaces)."""
    return read_run(out) if not overwrite and (out / RUN_FILE).is_file() else {}


def check_selection(out: Path, record: dict[str, Any], recipe: TrainingRecipe) -> None:
    """A resumed run keeps its selection rule, what it compares and how it breaks ties: switching midway would leave
    the root holding a checkpoint that neither rule picks. A `run.json` without `select` (or `ties`) predates the key
    and may take either rule; one that validated before `validate_by` existed compared exact match, and its best
    scores are exact matches, which another metric's scores cannot be compared with."""
    validated_before_the_key = "selected_step" in record and "validate_by" not in record
    for key, value in (("select", recipe.select), ("validate_by", recipe.validate_by), ("ties", recipe.ties)):
        recorded = record.get(key, "exact_match" if key == "validate_by" and validated_before_the_key else None)
        if recorded is not None and recorded != value:
            raise BenchbuildError(f"{out} was trained with {key} = {recorded!r}, not {value!r}: resume it with "
                                  f"--set {key}={recorded}, or pass --overwrite to start again")


def selection_record(state: TrainerState, metric: str) -> dict[str, Any]:
    """`run.json`'s account of the selection: the root's step, its score by `metric` and exact match, and the best
    validation score and its step."""
    return {"steps_done": state.step, "selected_step": state.selected_step,
            "validation_exact_match": state.selected_exact_match, f"validation_{metric}": state.selected,
            "best_validation_step": state.best_step, f"best_validation_{metric}": state.best}


def mark_diverged(run: PreparedRun, loss: float) -> None:
    """A non-finite loss ends the run: `run.json` says `failed` at this step (never reported as a result) and the
    user is told what to change."""
    reason = f"the training loss became {loss} at step {run.state.step}"
    if run.accelerator.is_main_process:
        mark_failed(run.out, run.record, run.state.step, reason)
    raise BenchbuildError(f"{run.out}: {reason}; the run is marked failed and its checkpoints are kept. Lower the "
                          "learning rate (--set learning_rate=...) and rerun with --overwrite")


class HeldSignals:
    """Ctrl-C (SIGINT) and SIGTERM held for a training loop (`held`): `signals` lists those that came, which the
    loop acts on after the step they landed in; `released()` lets them act at once for a while (a validation, which
    may take minutes and leaves its own checkpoint, or acting on a held one)."""

    def __init__(self, active: bool):
        self.signals: list[int] = []
        # Inactive off the main thread (a Dask worker's task: Python delivers signals to the main thread only) and for
        # a signal the process ignores.
        self.active = active and threading.current_thread() is threading.main_thread()
        self.handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)
                         if signal.getsignal(number) not in (signal.SIG_IGN, None)} if self.active else {}

    def hold(self) -> None:
        for number in self.handlers:
            signal.signal(number, lambda signum, frame: self.signals.append(signum))

    def restore(self) -> None:
        for number, handler in self.handlers.items():
            signal.signal(number, handler)

    @contextlib.contextmanager
    def released(self):
        self.restore()
        try:
            yield
        finally:
            self.hold()


@contextlib.contextmanager
def signals_held(active: bool):
    """Hold Ctrl-C and SIGTERM through the block (a training loop, so that a signal never leaves an optimizer step
    half applied, nor lands between steps where no resume point can be saved): yields the `HeldSignals`. One still
    held when the block ends acts then. Inactive (nothing held) when `active` is false."""
    held = HeldSignals(active)
    held.hold()
    try:
        yield held
    finally:
        held.restore()
    if held.signals:  # came after the last step (its progress line): act now, before the run is marked complete
        signal.raise_signal(held.signals[0])


def validation_follows(run: PreparedRun) -> bool:
    """Whether the step `run` has reached is one a validation follows: every `eval_every`-th, and the last."""
    return run.state.step % run.eval_every == 0 or run.state.step >= run.budget


def stop_at_resume_point(run: PreparedRun, number: int) -> None:
    """Save the step `run` has reached as a checkpoint (weights, optimizer, schedule and RNG state; no validation
    chose it, so the selection stays the last validation's), then let signal `number` act as it would have: a rerun
    goes on from this step instead of the last validation, which a batch-1 recipe makes hours apart, and ends in
    the bytes an uninterrupted run ends in. At a step a validation follows (every `eval_every`-th, the last), the
    resume point says that its validation is due: the rerun validates there first, as the uninterrupted run does,
    instead of resuming past it unvalidated (a last step would end the run unselected)."""
    save_resume_point(run)
    signal.raise_signal(number)


def save_resume_point(run: PreparedRun, before: TrainerState | None = None, rng: dict[str, Any] | None = None) -> None:
    """`stop_at_resume_point`'s checkpoint (main process). A stop during a validation passes `before` and `rng`, the
    trainer state and RNG states the step ended with, which the validation may have changed: that validation is due
    (a time budget's, too, at a step no `eval_every` names)."""
    if run.accelerator.is_main_process:
        state = run.state if before is None else before
        state.elapsed, state.window = time.perf_counter() - run.started, list(run.window)
        state.validation_due = before is not None or validation_follows(run)
        save_checkpoint(run.out, run.accelerator.unwrap_model(run.network), run.optimizer, run.scheduler, state, rng)


def out_of_time(run: PreparedRun) -> bool:
    """Whether the time budget leaves no room for another step and validation; every process gets the same answer,
    so all stop at one step."""
    max_minutes = run.options.max_minutes
    if max_minutes is None:
        return False
    late = time.perf_counter() - run.started + run.validation_seconds >= max_minutes * 60
    return _everywhere(run, late)


# Validation scores that no later checkpoint can beat: a percentage at 100.


def settled(run: PreparedRun) -> str | None:
    """"settled" when the run was asked to stop once its selection is final (`train --stop-when-settled`) and it is:
    under `select = "best_validation"` with `ties = "earliest"`, a checkpoint has scored the validation metric's
    ceiling (exact match 100%), so no later validation can replace it, and the rest of the step budget could not
    change the model the run folder's root holds (its test score, its `score_train`); else None. Every process gets
    the main process's answer."""
    recipe, state = run.recipe, run.state
    ceiling = CEILINGS.get(recipe.validate_by)
    final = (run.options.stop_when_settled and recipe.select == "best_validation" and recipe.ties == "earliest"
             and ceiling is not None and state.selected is not None and state.selected >= ceiling)
    return "settled" if _everywhere(run, final) else None


def _everywhere(run: PreparedRun, flag: bool) -> bool:
    """`flag` if any process has it (one process: as it is)."""
    if run.accelerator.num_processes == 1:
        return flag
    import torch

    return bool(run.accelerator.reduce(torch.tensor(float(flag), device=run.accelerator.device), "sum").item())
