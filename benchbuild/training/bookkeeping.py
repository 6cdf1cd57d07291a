"""A training run's bookkeeping beside the loop (`loop`): the checks made before anything is loaded or written, the
claim on the run folder, the identity that decides whether a rerun resumes a run or is refused, what `run.json`
records of the selection and of a run that diverged, and the resume point a Ctrl-C or SIGTERM leaves."""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchbuild.errors import BenchbuildError
from benchbuild.outputs import check_output
from benchbuild.run_folder import RUN_FILE, claim, mark_failed, read_run
from benchbuild.training.checkpoints import TrainerState, save_checkpoint
from benchbuild.training.validation import hidden_words_message, word_coverage
from benchbuild.zoo.recipe import TrainingRecipe

if TYPE_CHECKING:
    from benchbuild.training.loop import PreparedRun


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


# The model kinds whose encoder can embed a source dictionary of its own (`source_vocab_size`).
SEPARATE_DICTIONARY_KINDS = ("transformer",)


def check_dictionaries(entry, training_recipe: TrainingRecipe, architecture_overrides: dict | None = None) -> None:
    """Separate dictionaries need a model with an encoder embedding of its own, and an encoder and a decoder of
    different widths need separate dictionaries (one table cannot serve both): refused before the run folder or a
    tokenizer is written, so the corrected rerun (`--set dictionaries=...`) needs no --overwrite."""
    kind = entry.architecture.get("kind")
    if training_recipe.dictionaries == "separate" and kind not in SEPARATE_DICTIONARY_KINDS:
        raise BenchbuildError(f"{entry.name}: separate source and target dictionaries (recipe key dictionaries = "
                              f"'separate') need a model whose encoder embeds the source dictionary on its own, and "
                              f"a {kind} model has one embedding: train it with --set dictionaries=joint")
    if training_recipe.dictionaries != "separate" and kind == "transformer":
        from benchbuild.zoo.transformer import TransformerConfig

        architecture = {key: value for key, value in {**entry.architecture, **(architecture_overrides or {})}.items()
                        if key != "kind"}
        config = TransformerConfig(**architecture)
        encoder, decoder = config.sizes(decoder=False)[0], config.sizes(decoder=True)[0]
        if encoder != decoder:
            raise BenchbuildError(f"{entry.name}: encoder_d_model = {encoder} and d_model = {decoder} differ, but one "
                                  "dictionary means one embedding table for both: train it with --set "
                                  "dictionaries=separate")


def check_budgets(steps: int | None, minutes: float | None) -> None:
    """The step budget (None: counted after packing, always at least 1) and the time budget are positive."""
    if steps is not None and steps < 1:
        raise BenchbuildError(f"the step budget must be at least 1; got {steps}")
    if minutes is not None and not minutes > 0:
        raise BenchbuildError(f"the time budget must be a positive number of minutes; got {minutes}")


def run_environment() -> dict:
    """run.json's `environment`: the software (`run_folder.environment`) and the attention path grouped CPU training
    takes here (the compiled kernel, or why it is off: the two draw other dropout masks, so they are other trainings,
    and `reproduce` names a difference)."""
    from benchbuild.run_folder import environment
    from benchbuild.zoo.attention.packed import path_in_words

    return {**environment(), "attention_kernel": path_in_words()}


def check_budget_change(out: Path, record: dict, budget: int) -> None:
    """A run folder's steps are never undone: a budget below the steps it has trained is refused (it would record a
    smaller budget beside the larger run's weights). A larger one trains on; its earlier scores go stale
    (`run_folder.stale_scores`) until it is evaluated again."""
    done = record.get("steps_done") or 0
    if done and budget < done:
        raise BenchbuildError(f"{out} has trained {done:,} steps already; a budget of {budget:,} cannot undo them: "
                              f"give --max-steps {done:,} or more to continue it, another --out for a shorter run, "
                              "or --overwrite to start it again")


def check_settling(recipe: TrainingRecipe, stop_when_settled: bool) -> None:
    """`--stop-when-settled` only for a recipe whose selection a validation can make final (`settled`)."""
    if stop_when_settled and not (recipe.select == "best_validation" and recipe.ties == "earliest"
                                  and recipe.validate_by in _CEILINGS):
        raise BenchbuildError(
            f"--stop-when-settled: this recipe (select = {recipe.select!r}, validate_by = {recipe.validate_by!r}, "
            f"ties = {recipe.ties!r}) lets a later checkpoint replace any selected one, so no validation settles it; "
            "it needs select = \"best_validation\", ties = \"earliest\" and validate_by exact_match or bleu")


def check_hold_out(train_rows: list[dict], validation_rows: list[dict], validation_name: str,
                    training_recipe: TrainingRecipe) -> list[dict]:
    """For a run that validates on rows held out of train: refuse a hold-out that takes every training row of a
    source word (unless the recipe's `allow_hidden_words`), and return what run.json records as `held_out_words`:
    the source words the fewest rows still trained on contain, with their counts."""
    least, hidden = word_coverage(train_rows, validation_rows)
    if hidden and not training_recipe.allow_hidden_words:
        raise BenchbuildError(hidden_words_message(hidden, validation_name))
    return [coverage.to_dict() for coverage in least]


# Recipe keys outside a run's identity, so changing them resumes the run: the budget (`steps`, `epochs`: a longer
# budget continues a run); what only picks the root's checkpoint (`select`, `validate_by`, `ties`: run folders from
# before they existed resume, and `check_selection` guards a change of rule); what happens after training
# (`score_train`). The recipe's `architecture` is part of the identity's "architecture", `held_out` and
# `held_out_from` of its "validation".
_OUTSIDE_IDENTITY = ("steps", "epochs", "select", "validate_by", "ties", "held_out", "held_out_from", "score_train",
                     "allow_hidden_words", "architecture")
# Keys added to the identity after run folders existed: at their default they stay out, so those folders resume.
_ADDED_LATER = ("eval_every_epochs", "beam", "max_len_a", "max_len_b", "batch_tokens", "update_freq",
                "dictionaries", "source_tokens", "target_tokens", "segment_source", "segment_target", "precision")


def recipe_identity(recipe: TrainingRecipe) -> dict[str, Any]:
    """The recipe's part of a run's identity: the keys that change how it trains."""
    defaults = {field.name: field.default for field in dataclasses.fields(TrainingRecipe)}
    return {key: value for key, value in recipe.to_dict().items()
            if key not in _OUTSIDE_IDENTITY and not (key in _ADDED_LATER and value == defaults[key])}


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


def stop_at_resume_point(run: PreparedRun, number: int) -> None:
    """Save the step `run` has reached as a checkpoint (weights, optimizer, schedule and RNG state; no validation
    chose it, so the selection stays the last validation's), then let signal `number` act as it would have: a rerun
    goes on from this step instead of the last validation, which a batch-1 recipe makes hours apart, and ends in
    the bytes an uninterrupted run ends in. A step that a validation must follow (every `eval_every`-th, the last)
    gets no resume point: the rerun goes back to the last checkpoint and validates at that step, as the
    uninterrupted run does, instead of resuming past it unvalidated (a last step would end the run unselected)."""
    due = run.state.step % run.eval_every == 0 or run.state.step >= run.budget
    if run.accelerator.is_main_process and not due:
        run.state.elapsed, run.state.window = time.perf_counter() - run.started, list(run.window)
        save_checkpoint(run.out, run.accelerator.unwrap_model(run.network), run.optimizer, run.scheduler, run.state)
    signal.raise_signal(number)


def out_of_time(run: PreparedRun) -> bool:
    """Whether the time budget leaves no room for another step and validation; every process gets the same answer,
    so all stop at one step."""
    max_minutes = run.options.max_minutes
    if max_minutes is None:
        return False
    late = time.perf_counter() - run.started + run.validation_seconds >= max_minutes * 60
    return _everywhere(run, late)


# Validation scores that no later checkpoint can beat: a percentage at 100.
_CEILINGS = {"exact_match": 100.0, "bleu": 100.0}


def settled(run: PreparedRun) -> str | None:
    """"settled" when the run was asked to stop once its selection is final (`train --stop-when-settled`) and it is:
    under `select = "best_validation"` with `ties = "earliest"`, a checkpoint has scored the validation metric's
    ceiling (exact match 100%), so no later validation can replace it, and the rest of the step budget could not
    change the model the run folder's root holds (its test score, its `score_train`); else None. Every process gets
    the main process's answer."""
    recipe, state = run.recipe, run.state
    ceiling = _CEILINGS.get(recipe.validate_by)
    final = (run.options.stop_when_settled and recipe.select == "best_validation" and recipe.ties == "earliest"
             and ceiling is not None and state.selected is not None and state.selected >= ceiling)
    return "settled" if _everywhere(run, final) else None


def _everywhere(run: PreparedRun, flag: bool) -> bool:
    """`flag` if any process has it (one process: as it is)."""
    if run.accelerator.num_processes == 1:
        return flag
    import torch

    return bool(run.accelerator.reduce(torch.tensor(float(flag), device=run.accelerator.device), "sum").item())
