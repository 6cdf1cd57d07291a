"""The training loop: one zoo model on one benchmark, a fixed step budget, model selection by the recipe's `select`.

`train` prepares a run (checks its arguments, opens or resumes its run folder, builds the tokenizer, model and
optimizer), then steps, validating and checkpointing every `eval_every` steps (or `eval_every_epochs`' worth), and
ends by scoring the selected checkpoint on its own train rows when the recipe asks (`score_train`). Re-running a
killed run with the same arguments resumes from its last checkpoint and reproduces the uninterrupted loss curve:
batches are a pure function of (seed, step) (`batching`), and every random state that changes during training is
checkpointed (`checkpoints`). What a run checks, claims and records about itself lives in `bookkeeping`; what it
shows while it steps, in `progress`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch
import torch.nn.functional as F

from benchbuild import __version__
from benchbuild.benchmark import load_splits, read_build_info, split_rows_as_dicts
from benchbuild.device import cpu_threads, start_accelerator
from benchbuild.errors import BenchbuildError
from benchbuild.training.batching import (EncodedSplit, TokenBatches, batch_indices, by_length,
                                          check_split_lengths, collate, encode_rows, micro_batches)
from benchbuild.training.bookkeeping import (check_budget_change, check_budgets, check_dictionaries, check_hold_out,
                                             check_selection, claimed, mark_diverged, recipe_identity, recorded_run,
                                             selection_record, check_run_paths, check_settling, out_of_time,
                                             run_environment, settled, signals_held, stop_at_resume_point)
from benchbuild.model_card import write_model_card
from benchbuild.zoo.recipe import (TrainingRecipe, default_recipe, epoch_in_token_batches, planned_steps,
                                        resolve_recipe, validation_interval)
from benchbuild.run_folder import (append_log, benchmark_fingerprint, clear, device_record, entry_record,
                                   open_run, portable_path, save_pretrained, train_command_line, truncate_log,
                                   write_run)
from benchbuild.training.checkpoints import TrainerState, latest_checkpoint, restore_checkpoint, save_checkpoint
from benchbuild.training.progress import StepProgress, training_status
from benchbuild.zoo.catalogue import CATALOGUE
from benchbuild.zoo.decoding import length_rule
from benchbuild.zoo.loading import TranslationTokenizer, load_model
from benchbuild.training.tokenization import build_dictionaries, build_tokenizer
from benchbuild.training.selection import selects
from benchbuild.training.validation import (greedy_matches, holds_out, keeps_file_order, split_validation,
                                           validation_scores)


@dataclass
class TrainResult:
    """What a finished (or resumed and finished) run produced."""

    run_dir: Path
    steps: int
    selected_step: int | None
    validation_exact_match: float | None
    resumed_from: int | None


@dataclass(frozen=True)
class RunOptions:
    """How to train, besides which model on which benchmark into which folder: `train`'s keyword arguments."""

    seed: int = 0
    max_steps: int | None = None
    max_minutes: float | None = None
    stop_when_settled: bool = False
    device: str = "auto"
    recipe: str | None = None
    overrides: dict | None = None
    architecture_overrides: dict | None = None
    validation_split: str | None = None
    progress: bool = True
    overwrite: bool = False
    stacked: bool = False  # trained in a stack (`training.stack`): part of the run's identity, so never resumed alone


@dataclass
class PreparedRun:
    """A run ready to step: model, optimizer and schedule on the accelerator, the encoded data, its `run.json`
    record, and where training stands."""

    out: Path
    options: RunOptions
    recipe: TrainingRecipe
    budget: int
    eval_every: int  # steps between validations: the recipe's `eval_every`, or `eval_every_epochs` in steps
    accelerator: Any
    tokenizer: Any
    network: Any
    optimizer: Any
    scheduler: Any
    train_encoded: EncodedSplit
    train_rows: list[dict]  # the rows trained on, kept only when the recipe scores them after training (`score_train`)
    validation_sources: list[str]
    validation_targets: list[str]
    record: dict[str, Any]
    state: TrainerState
    resumed_from: int | None
    started: float  # perf_counter() less the seconds a killed run already spent: its time budget goes on counting
    window: list[float] = field(default_factory=list)  # the step losses since the last log line
    logged_loss: tuple[float, int] | None = None  # the last log line's loss and how many steps it is the mean of
    validation_seconds: float = 0.0  # the last validation's duration: a time budget stops early enough to fit one more
    stopped_by: str = "step budget"
    token_batches: TokenBatches | None = None  # the rows trained on in token batches, when the recipe has batch_tokens


def train(model: str | Path, data: str | Path, out: str | Path, *, seed: int = 0, max_steps: int | None = None,
          max_minutes: float | None = None, device: str = "auto", recipe: str | None = None,
          overrides: dict | None = None, architecture_overrides: dict | None = None,
          validation_split: str | None = None, progress: bool = True, overwrite: bool = False,
          stop_when_settled: bool = False) -> TrainResult:
    """Train catalogue model `model` (a name or a `.toml` path) on the benchmark folder `data` into `out`.

    `max_steps` replaces the recipe's step budget (`steps`, or `epochs` of this benchmark's train rows:
    `planned_steps`); `max_minutes` also stops training once that much time has gone into training and validation
    (summed over a killed run and its resumption): the run then validates, selects by the recipe's `select` and ends
    early, so its step count depends on the machine. `stop_when_settled` ends the run at the first validation
    after which no later one can change the selection (`bookkeeping.settled`). `recipe` names one of the entry's
    recipes (default: `recipe.default_recipe`, the one the entry's reported number on this benchmark was made with, else the benchmark
    family's); `overrides` update recipe keys and `architecture_overrides` the model's architecture kwargs. The run
    folder's README.md is its model card (`model_card`).
    """
    options = RunOptions(seed=seed, max_steps=max_steps, max_minutes=max_minutes,
                         stop_when_settled=stop_when_settled, device=device, recipe=recipe,
                         overrides=overrides, architecture_overrides=architecture_overrides,
                         validation_split=validation_split, progress=progress, overwrite=overwrite)
    check_run_paths(model, data, out)
    # The whole run on the thread count torch had when called (OMP_NUM_THREADS, or the caller's set_num_threads):
    # numba's OpenMP layer would reset it to the machine's at the first dropout kernel (`cpu_threads`).
    with claimed(Path(out)), cpu_threads(torch.get_num_threads()):
        run = prepare(model, data, out, options)
        run.stopped_by = settled(run) or run.stopped_by  # resumed already settled: nothing left to train
        with (StepProgress(progress and run.accelerator.is_main_process, run.budget, run.state.step) as advance,
              signals_held(run.accelerator.num_processes == 1) as held):  # a stop acts at a step's end
            while run.state.step < run.budget and run.stopped_by != "settled":
                step(run)
                if held.signals:
                    with held.released():
                        stop_at_resume_point(run, held.signals[0])
                stop = "time budget" if out_of_time(run) else None
                if run.state.step % run.eval_every == 0 or run.state.step == run.budget or stop:
                    with held.released():  # a stop during a validation acts at once: back to the last checkpoint
                        validate_and_checkpoint(run)
                    stop = stop or settled(run)
                advance(training_status(run))
                if stop:
                    run.stopped_by = stop
                    break
        return finish(run)


def prepare(model: str | Path, data: str | Path, out: str | Path, options: RunOptions) -> PreparedRun:
    """Check the arguments, open the run folder (or resume it from its last checkpoint: weights, optimizer, schedule
    and RNG state) and build the tokenizer, model, optimizer and schedule on the accelerator."""
    from accelerate.utils import set_seed
    from transformers.utils import logging as transformers_logging

    from benchbuild import zoo

    transformers_logging.disable_progress_bar()
    zoo.register()
    entry = zoo.load_entry(model)
    data, out = Path(data), Path(out)
    info = read_build_info(data)
    splits = load_splits(data)
    family = options.recipe or default_recipe(entry.recipes, entry.reported, info.family, info.name, info.splits)
    training_recipe = resolve_recipe(entry.recipes, family, options.overrides, source=str(entry.path))
    # The recipe family's architecture keys (`[recipe.mt.architecture]`) go over the entry's, under the run's overrides.
    entry = dataclasses.replace(entry, architecture={**entry.architecture, **training_recipe.architecture})
    if "train" not in splits:
        raise BenchbuildError(f"{data} has no train split (splits: {', '.join(splits)})")
    check_split_lengths(data, splits, {"train", options.validation_split or "validation"})
    check_dictionaries(entry, training_recipe, options.architecture_overrides)
    split_rows = {name: split.rows for name, split in info.splits.items()}
    # Epochs of token batches are counted in steps once the rows are packed, below.
    by_token_epochs = epoch_in_token_batches(training_recipe)
    recipe_steps = None if by_token_epochs else planned_steps(training_recipe, split_rows, options.validation_split)
    check_budgets(options.max_steps if options.max_steps is not None else recipe_steps, options.max_minutes)
    check_settling(training_recipe, options.stop_when_settled)
    train_rows, validation_rows, validation_name = split_validation(
        splits, options.validation_split, options.seed, training_recipe.held_out,
        held_out_from=training_recipe.held_out_from, select=training_recipe.select, file_order=keeps_file_order(info))
    held_out_words = (check_hold_out(train_rows, validation_rows, validation_name, training_recipe)
                      if holds_out(splits, options.validation_split, training_recipe.select) else None)
    if not validation_rows and training_recipe.select == "best_validation":
        raise BenchbuildError(f"validation split {validation_name!r} of {data} has no rows: select = best_validation "
                              "needs rows to compare checkpoints on; give another --validation-split or --set "
                              "select=last")

    identity = {
        "model": entry.name, "architecture": entry.architecture,
        "architecture_overrides": options.architecture_overrides or {},
        "benchmark": {name: split.fingerprint for name, split in info.splits.items()}, "seed": options.seed,
        "recipe_family": family, "validation": validation_name, "recipe": recipe_identity(training_recipe),
        # A stacked run draws its dropout masks from its own stream (`zoo.attention.stacking`), not torch's generator.
        **({"trainer": "stacked"} if options.stacked else {}),
    }
    accelerator = start_accelerator(options.device, training_recipe.precision)
    # Under `accelerate launch`, only the main process writes the run folder; the others wait until it is ready. A
    # change of selection rule is named before the identity is compared (under `last` it changes the validation too).
    if accelerator.is_main_process:
        check_selection(out, recorded_run(out, options.overwrite), training_recipe)
    record = open_run(out, identity, options.overwrite) if accelerator.is_main_process else {}
    accelerator.wait_for_everyone()
    set_seed(options.seed)
    tokenizer = _tokenizer(out, splits["train"], training_recipe, save=accelerator.is_main_process)
    train_encoded = encode_rows(tokenizer, train_rows)
    checkpoint = latest_checkpoint(out)
    token_batches = None
    if training_recipe.batch_tokens is not None:
        try:
            token_batches = TokenBatches.pack(train_encoded, training_recipe.batch_tokens, training_recipe.batch_size,
                                              options.seed)
        except BenchbuildError:
            # Nothing trained yet: leave no run behind whose recipe the corrected rerun would differ from.
            if checkpoint is None and accelerator.is_main_process:
                clear(out)
            raise
    per_epoch = None if token_batches is None else len(token_batches)
    if by_token_epochs:
        recipe_steps = planned_steps(training_recipe, split_rows, options.validation_split, per_epoch)
    budget = recipe_steps if options.max_steps is None else options.max_steps
    check_budget_change(out, record, budget)
    eval_every = validation_interval(training_recipe, split_rows, options.validation_split, per_epoch)
    network = _network(entry, tokenizer, checkpoint, options.architecture_overrides)
    optimizer = torch.optim.AdamW(network.parameters(), lr=training_recipe.learning_rate,
                                  betas=(training_recipe.adam_beta1, training_recipe.adam_beta2),
                                  weight_decay=training_recipe.weight_decay, fused=True)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, training_recipe.learning_rate_factor)
    state = TrainerState() if checkpoint is None else restore_checkpoint(checkpoint, optimizer, scheduler)
    if accelerator.is_main_process:
        truncate_log(out, state.step)
    network, optimizer = accelerator.prepare(network, optimizer)

    # What a reviewer needs to re-run it (`benchbuild reproduce`), and no absolute path of this machine: the entry by
    # name (or its file relative to the run folder, with its sha256), the benchmark by fingerprint and relative path.
    arguments = {"seed": options.seed, "max_steps": options.max_steps, "max_minutes": options.max_minutes,
                 **({"stop_when_settled": True} if options.stop_when_settled else {}),
                 "device": options.device, "recipe": options.recipe, "overrides": options.overrides or {},
                 "architecture_overrides": options.architecture_overrides or {},
                 "validation_split": options.validation_split}
    benchmark_path = portable_path(data, out)
    record.update({
        "model": entry.name, **entry_record(entry, out, CATALOGUE), "benchbuild_version": __version__,
        "benchmark": {**({} if benchmark_path is None else {"path": benchmark_path}),
                      "fingerprint": benchmark_fingerprint({name: s.fingerprint for name, s in info.splits.items()}),
                      "family": info.family, "name": info.name,
                      "splits": {name: {"rows": s.rows, "fingerprint": s.fingerprint} for name, s in info.splits.items()}},
        "command_line": train_command_line(model, data, out, arguments), "arguments": arguments,
        "environment": run_environment(), **device_record(accelerator.device),
        "seed": options.seed, "recipe_family": family, "recipe": training_recipe.to_dict(),
        "recipe_steps": recipe_steps, "step_budget": budget,
        "select": training_recipe.select, "validate_by": training_recipe.validate_by, "ties": training_recipe.ties,
        "time_budget_minutes": options.max_minutes,
        "architecture_overrides": options.architecture_overrides or {}, "validation": validation_name,
        "validation_rows": len(validation_rows), "train_rows": len(train_rows), "validation_every": eval_every,
        **({} if held_out_words is None else {"held_out_words": held_out_words}),
        "device": str(accelerator.device), "processes": accelerator.num_processes,
        "mixed_precision": accelerator.mixed_precision,
        **({} if token_batches is None else {"token_batches_per_epoch": len(token_batches)}),
    })
    return PreparedRun(
        out=out, options=options, recipe=training_recipe, budget=budget, eval_every=eval_every, accelerator=accelerator,
        tokenizer=tokenizer, network=network, optimizer=optimizer, scheduler=scheduler, train_encoded=train_encoded,
        train_rows=train_rows if training_recipe.score_train else [],
        validation_sources=[row["source"] for row in validation_rows],
        validation_targets=[row["target"] for row in validation_rows], record=record, state=state,
        resumed_from=state.step if checkpoint is not None else None, started=time.perf_counter() - state.elapsed,
        token_batches=token_batches, window=list(state.window))


def step(run: PreparedRun) -> float:
    """One optimizer step on the batch of the current step (`batch_size` rows, or `update_freq` token batches when the
    recipe sets `batch_tokens`); every `run.eval_every // 10` steps (and at the last) the main process logs the mean
    loss since the last log line. Returns the step's loss summed over processes."""
    accelerator, network, training_recipe = run.accelerator, run.network, run.recipe
    token_batches = None
    if run.token_batches is None:
        indices = batch_indices(run.state.step, training_recipe.batch_size, len(run.train_encoded.sources),
                                run.options.seed)
    else:
        token_batches = run.token_batches.of_step(run.state.step, training_recipe.update_freq)
        indices = [index for batch in token_batches for index in batch]
    network.train()
    loss = backward_batch(accelerator, network, run.train_encoded, indices, run.tokenizer, training_recipe,
                          token_batches)
    if training_recipe.grad_clip > 0:
        accelerator.clip_grad_norm_(network.parameters(), training_recipe.grad_clip)
    learning_rate = run.scheduler.get_last_lr()[0]
    run.optimizer.step()
    run.scheduler.step()
    run.optimizer.zero_grad(set_to_none=True)
    last_loss = accelerator.reduce(loss.detach(), "sum").item()
    count_step(run, last_loss, learning_rate)
    return last_loss


def count_step(run: PreparedRun, loss: float, learning_rate: float) -> None:
    """After an update of `run` with the step's `loss` (summed over processes) at `learning_rate`: count the step,
    end the run on a non-finite loss (`mark_diverged`), and every `run.eval_every // 10` steps (and at the last) log the
    mean loss since the last log line (main process)."""
    run.state.step += 1
    if not math.isfinite(loss):
        mark_diverged(run, loss)
    run.window.append(loss)
    log_every = max(1, run.eval_every // 10)
    if run.accelerator.is_main_process and (run.state.step % log_every == 0 or run.state.step == run.budget):
        run.logged_loss = (sum(run.window) / len(run.window), len(run.window))
        append_log(run.out, {"step": run.state.step, "loss": run.logged_loss[0], "lr": learning_rate})
        run.window = []


def validate_and_checkpoint(run: PreparedRun) -> None:
    """On the main process: validate (a run without validation rows logs only its step and time), log the scores,
    save the model at the run folder's root when the recipe's `select` rule picks it (`selects`; without scores,
    under `last`, always), checkpoint and update `run.json`; every process waits until that is done."""
    accelerator, state, recipe = run.accelerator, run.state, run.recipe
    if accelerator.is_main_process:
        validation_started = time.perf_counter()
        network = accelerator.unwrap_model(run.network)
        scores = None
        if run.validation_sources:
            with accelerator.autocast():
                scores = validation_scores(network, run.tokenizer, run.validation_sources, run.validation_targets,
                                           recipe.eval_batch_size, label_smoothing=recipe.label_smoothing,
                                           bleu=recipe.validate_by == "bleu", beam=recipe.beam,
                                           length_rule=length_rule(recipe.to_dict()))
        state.elapsed = time.perf_counter() - run.started
        run.validation_seconds = time.perf_counter() - validation_started
        fields = {} if scores is None else scores.log_fields()
        append_log(run.out, {"step": state.step, **fields, "elapsed_s": round(state.elapsed, 1)})
        value = None if scores is None else scores.value(recipe.validate_by)
        if value is not None and selects("best_validation", value, state.best, recipe.validate_by, recipe.ties):
            state.best, state.best_step = value, state.step
        if value is None or selects(recipe.select, value, state.selected, recipe.validate_by, recipe.ties):
            state.selected, state.selected_step = value, state.step
            state.selected_exact_match = None if scores is None else scores.exact_match
            save_pretrained(run.out, network, run.tokenizer)
        state.window = list(run.window)
        save_checkpoint(run.out, network, run.optimizer, run.scheduler, state)
        run.record.update({**selection_record(state, recipe.validate_by), "status": "running"})
        write_run(run.out, run.record)
    accelerator.wait_for_everyone()


def finish(run: PreparedRun) -> TrainResult:
    """Mark the run complete in `run.json` (main process), with the selected checkpoint's exact match on its train
    rows when the recipe's `score_train` asks, and say what it produced."""
    state = run.state
    if run.accelerator.is_main_process:
        if run.recipe.score_train:
            run.record["train_exact_match"] = train_exact_match(run)
        run.record.update({**selection_record(state, run.recipe.validate_by), "status": "complete",
                           "stopped_by": run.stopped_by, "cpu_threads": torch.get_num_threads(),
                           "elapsed_s": round(state.elapsed, 1)})
        write_run(run.out, run.record)
        write_model_card(run.out, run.record, run.accelerator.unwrap_model(run.network),
                         run.validation_sources[0] if run.validation_sources else None)
    return TrainResult(run_dir=run.out, steps=state.step, selected_step=state.selected_step,
                       validation_exact_match=state.selected_exact_match, resumed_from=run.resumed_from)


def train_exact_match(run: PreparedRun) -> float:
    """Greedy exact match, in percent, of the checkpoint at the run folder's root (the selected one) on the rows it
    trained on, from one teacher-forced pass per batch (`greedy_matches`), as validation scores it."""
    network = load_model(run.out).to(run.accelerator.device)
    with run.accelerator.autocast():
        matches = greedy_matches(network, run.tokenizer, [row["source"] for row in run.train_rows],
                                 [row["target"] for row in run.train_rows], batch_size=run.recipe.eval_batch_size)
    return 100.0 * sum(matches) / len(matches)


def _network(entry, tokenizer, checkpoint: Path | None, architecture_overrides: dict | None):
    """The model: a checkpoint's when resuming, else a fresh one of the catalogue entry sized to the tokenizer: its
    output vocabulary is the target dictionary, and with separate dictionaries its encoder embeds the source one
    (`source_vocab_size`; a model that cannot is refused when built, `ZooSeq2SeqModel.post_init`)."""
    from benchbuild import zoo

    if checkpoint is not None:
        return load_model(checkpoint)
    overrides = dict(architecture_overrides or {})
    architecture = {**entry.architecture, **overrides}
    if "source_vocab_size" in architecture:
        raise BenchbuildError(f"{entry.name}: source_vocab_size is the run's source dictionary's size, set by "
                              "training (recipe key dictionaries = 'separate'), not an architecture key to give")
    if isinstance(tokenizer, TranslationTokenizer):
        if architecture.get("kind") == "hf":
            raise BenchbuildError(f"{entry.name}: separate source and target dictionaries (recipe key dictionaries = "
                                  "'separate') need a zoo model with an encoder embedding of its own; an hf model "
                                  "keeps one embedding: train it with --set dictionaries=joint")
        overrides["source_vocab_size"] = len(tokenizer.source)
    return zoo.build_model(entry, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                           bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                           overrides=overrides or None)


def backward_batch(accelerator, network, encoded: EncodedSplit, indices: Sequence[int], tokenizer,
                   training_recipe: TrainingRecipe,
                   token_batches: Sequence[Sequence[int]] | None = None) -> torch.Tensor:
    """Accumulate this process's share of the gradient of the whole batch's mean token loss in `network`, one
    length-sorted micro-batch at a time (`micro_batches`), or, for a model that `accepts_length_groups`, all of
    them in one pass as `length_groups` parts; returns this process's share of that loss (the shares of all
    processes sum to it).

    Processes take every `num_processes`-th row of the batch sorted by length, so their shares are about equally
    long and none waits long for the others at the gradient all-reduce. Each part's summed token loss is divided
    by the whole batch's token count and multiplied by the process count, which the all-reduce's mean undoes: the
    update equals one process's on the whole batch.

    `token_batches` (a step's `TokenBatches.of_step`, whose rows `indices` are) are the parts as they come, one
    forward and backward pass each whatever the model, normalised as above by the update's target tokens (fairseq's
    trainer divides the summed gradient by the summed sample size). Process p of P takes batches p, p + P, p + 2P, …
    (as fairseq's `ShardedIterator` deals batches to GPUs), so the update does not depend on the process count; one
    left without a batch (fewer batches than processes) runs the first with its loss times 0, as fairseq's trainer
    runs a dummy batch, to join the gradient all-reduce.
    """
    processes = accelerator.num_processes
    tokens = sum(len(encoded.targets[index]) for index in indices)
    idle = False
    if token_batches is None:
        mine = by_length(encoded, indices)[accelerator.process_index::processes]
        grouped = getattr(accelerator.unwrap_model(network), "accepts_length_groups", False)
        parts = micro_batches(encoded, mine,
                              training_recipe.length_groups if grouped else training_recipe.micro_batches)
    else:
        grouped = False
        parts = list(token_batches[accelerator.process_index::processes])
        if not parts:
            parts, idle = [token_batches[0]], True
    batches = [collate(encoded, part, tokenizer.pad_token_id, tokenizer.bos_token_id, accelerator.device)
               for part in parts]
    if grouped:
        # One forward pass over all the parts as length groups (see Groups and Packed in
        # benchbuild.zoo.attention.layouts), whose logits are those of the real target positions only.
        inputs = [{name: batch[name] for name in ("input_ids", "attention_mask", "decoder_input_ids",
                                                  "decoder_attention_mask")} for batch in batches]
        labels = torch.cat([batch["labels"][batch["decoder_attention_mask"].bool()] for batch in batches])
        with accelerator.autocast():
            logits = network(length_groups=inputs).logits
        loss = _summed_loss(logits, labels, training_recipe) / tokens
        accelerator.backward(loss * processes)
        return loss.detach()
    loss = torch.zeros((), device=accelerator.device)
    for number, batch in enumerate(batches):
        synchronise = contextlib.nullcontext() if number == len(batches) - 1 else accelerator.no_sync(network)
        with synchronise:
            with accelerator.autocast():
                logits = network(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                                 decoder_input_ids=batch["decoder_input_ids"]).logits
            part_loss = _summed_loss(logits, batch["labels"], training_recipe) / tokens
            if idle:
                part_loss = part_loss * 0.0
            accelerator.backward(part_loss * processes)
        loss += part_loss.detach()
    return loss


def _summed_loss(logits: torch.Tensor, labels: torch.Tensor, training_recipe: TrainingRecipe) -> torch.Tensor:
    return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=-100,
                           label_smoothing=training_recipe.label_smoothing, reduction="sum")


def token_batches_per_epoch(data: str | Path, training_recipe: TrainingRecipe, seed: int = 0,
                            validation_split: str | None = None) -> int:
    """The token batches of an epoch of a run of `training_recipe` (one with `batch_tokens`) on benchmark `data`: its
    tokenizer built and the rows it would train on packed as `prepare` packs them (what `planned_steps` needs for a
    budget in epochs before a run exists, as `sweep --dry-run` estimates it)."""
    splits = load_splits(Path(data))
    train_rows, _, _ = split_validation(splits, validation_split, seed, training_recipe.held_out,
                                        held_out_from=training_recipe.held_out_from, select=training_recipe.select,
                                        file_order=keeps_file_order(read_build_info(data)))
    tokenizer = _tokenizer(Path(data), splits["train"], training_recipe, save=False)
    return len(TokenBatches.pack(encode_rows(tokenizer, train_rows), training_recipe.batch_tokens,
                                 training_recipe.batch_size, seed))


def _tokenizer(out: Path, train_split, training_recipe: TrainingRecipe, save: bool = True):
    """The run's tokenizer: rebuilt from the whole train split (sources and targets), so held-out rows, seeds,
    processes and resumed runs all see the same dictionaries: one joint vocabulary, or, under `dictionaries =
    "separate"`, a source and a target dictionary (`tokenization.build_dictionaries`)."""
    train_split = split_rows_as_dicts(train_split)
    if training_recipe.dictionaries == "separate":
        tokenizer = build_dictionaries(
            [row["source"] for row in train_split], [row["target"] for row in train_split],
            source_kind=training_recipe.source_tokenizer_kind, target_kind=training_recipe.target_tokenizer_kind,
            bpe_vocab_size=training_recipe.bpe_vocab_size, segment_source=training_recipe.segment_source,
            segment_target=training_recipe.segment_target)
        if save:
            save_pretrained(out, tokenizer)
        return tokenizer
    texts = [text for row in train_split for text in (row["source"], row["target"])]
    tokenizer = build_tokenizer(texts, training_recipe.tokenizer_kind, training_recipe.bpe_vocab_size)
    if save:
        save_pretrained(out, tokenizer)
    return tokenizer
