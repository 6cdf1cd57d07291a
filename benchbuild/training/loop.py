"""The training loop: one zoo model on one benchmark, a fixed step budget, model selection by the recipe's `select`.

`train` prepares a run (checks its arguments, opens or resumes its run folder, builds the tokenizer, model and
optimizer), then steps, validating and checkpointing every `eval_every` steps (or `eval_every_epochs`' worth), and
ends by scoring the selected checkpoint on its own train rows when the recipe asks (`score_train`). Re-running a
killed run with the same arguments resumes from its last checkpoint and reproduces the uninterrupted loss curve:
batches are a pure function of (seed, step) (`batching`), and every random state that changes during training is
checkpointed (`checkpoints`). Everything decided before the first step is the run's plan (`plan.plan_run`: one value,
made and checked before the run folder is touched); `prepare` executes its start, the loop its steps. What a run
claims and records about itself while it runs lives in `bookkeeping`; what it shows while it steps, in `progress`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from pathlib import Path
from typing import Sequence

import torch
import torch.nn.functional as F

from benchbuild import __version__
from benchbuild.device import cpu_threads, start_accelerator
from benchbuild.errors import BenchbuildError, Terminated
from benchbuild.model_card import write_model_card
from benchbuild.run_folder import (append_log, benchmark_fingerprint, device_record, entry_record, open_run,
                                   portable_path, save_pretrained, train_command_line, truncate_log, write_run)
from benchbuild.training.batching import EncodedSplit, batch_indices, by_length, collate, micro_batches
from benchbuild.training.bookkeeping import (HeldSignals, check_budget_change, check_run_paths, check_selection,
                                             claimed, mark_diverged, out_of_time, recorded_run, run_environment,
                                             save_resume_point, selection_record, settled, signals_held,
                                             stop_at_resume_point, trained_segments, validation_follows)
from benchbuild.training.checkpoints import (TrainerState, latest_checkpoint, restore_checkpoint, rng_state,
                                             save_checkpoint)
from benchbuild.training.plan import RunOptions, RunPlan, check_set_by_training, plan_run
from benchbuild.training.prepared import PreparedRun, TrainResult
from benchbuild.training.progress import StepProgress, training_status
from benchbuild.training.selection import selects
from benchbuild.training.validation import greedy_matches, validation_scores
from benchbuild.zoo.catalogue import CATALOGUE
from benchbuild.zoo.decoding import length_rule
from benchbuild.zoo.loading import TranslationTokenizer, load_model
from benchbuild.zoo.recipe import TrainingRecipe

__all__ = ["RunOptions", "RunPlan", "PreparedRun", "TrainResult", "plan_run", "prepare", "train"]


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
        run = prepare(plan_run(model, data, out, options))
        run.stopped_by = settled(run) or run.stopped_by  # resumed already settled: nothing left to train
        with (StepProgress(progress and run.accelerator.is_main_process, run.budget, run.state.step) as advance,
              signals_held(run.accelerator.num_processes == 1) as held):  # a stop acts at a step's end
            if run.state.validation_due:  # stopped before or during the validation of the step it resumes at
                validate(run, held)
                run.stopped_by = ("time budget" if out_of_time(run) else None) or settled(run) or run.stopped_by
            while run.state.step < run.budget and run.stopped_by not in ("settled", "time budget"):
                step(run)
                if held.signals:
                    with held.released():
                        stop_at_resume_point(run, held.signals[0])
                stop = "time budget" if out_of_time(run) else None
                if validation_follows(run) or stop:
                    validate(run, held)
                    stop = stop or settled(run)
                advance(training_status(run))
                if stop:
                    run.stopped_by = stop
                    break
        return finish(run)


def validate(run: PreparedRun, held: HeldSignals) -> None:
    """`validate_and_checkpoint`, where a stop acts at once (a validation may take minutes) and leaves a resume point
    at this step, its validation due (`save_resume_point`): the rerun validates here and goes on, instead of going
    back to the last checkpoint, a validation interval behind. A stop after the validation saved its own checkpoint
    leaves that one."""
    before, rng = dataclasses.replace(run.state, window=list(run.window)), rng_state()
    try:
        with held.released():
            validate_and_checkpoint(run)
    except (KeyboardInterrupt, Terminated):
        if run.checkpointed_step != before.step:  # signals are held again here: a second one waits for the save
            save_resume_point(run, before, rng)
        raise


def prepare(plan: RunPlan) -> PreparedRun:
    """Execute the start of `plan`: open the run folder (or resume it from its last checkpoint: weights, optimizer,
    schedule and RNG state), save the dictionaries, build the model, optimizer and schedule on the accelerator, and
    record the run in `run.json`. What is checked here is only what the run folder holds (a change of selection rule,
    a smaller budget than the steps done); everything else was checked when the plan was made."""
    from accelerate.utils import set_seed
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    out, options, recipe = plan.out, plan.options, plan.recipe
    accelerator = start_accelerator(options.device, recipe.precision)
    # Under `accelerate launch`, only the main process writes the run folder; the others wait until it is ready. A
    # change of selection rule is named before the identity is compared (under `last` it changes the validation too).
    if accelerator.is_main_process:
        check_selection(out, recorded_run(out, options.overwrite), recipe)
    record = open_run(out, plan.identity, options.overwrite) if accelerator.is_main_process else {}
    accelerator.wait_for_everyone()
    set_seed(options.seed)
    if accelerator.is_main_process:
        save_pretrained(out, plan.tokenizer)
    checkpoint = latest_checkpoint(out)
    check_budget_change(out, record, plan.budget)
    network = _network(plan.entry, plan.tokenizer, checkpoint, options.architecture_overrides, plan.output_tokens)
    optimizer = torch.optim.AdamW(network.parameters(), lr=recipe.learning_rate,
                                  betas=(recipe.adam_beta1, recipe.adam_beta2), weight_decay=recipe.weight_decay,
                                  fused=True)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, recipe.learning_rate_factor)
    state = TrainerState() if checkpoint is None else restore_checkpoint(checkpoint, optimizer, scheduler)
    if accelerator.is_main_process:
        truncate_log(out, state.step, validated=not state.validation_due)
    network, optimizer = accelerator.prepare(network, optimizer)

    # What a reviewer needs to re-run it (`benchbuild reproduce`), and no absolute path of this machine: the entry by
    # name (or its file relative to the run folder, with its sha256), the benchmark by fingerprint and relative path.
    info, arguments = plan.info, options.arguments()
    benchmark_path = portable_path(plan.data, out)
    environment = run_environment()
    record.update({
        "model": plan.entry.name, **entry_record(plan.entry, out, CATALOGUE), "benchbuild_version": __version__,
        "benchmark": {**({} if benchmark_path is None else {"path": benchmark_path}),
                      "fingerprint": benchmark_fingerprint({name: s.fingerprint for name, s in info.splits.items()}),
                      "family": info.family, "name": info.name,
                      "splits": {name: {"rows": s.rows, "fingerprint": s.fingerprint} for name, s in info.splits.items()}},
        "command_line": train_command_line(plan.model, plan.data, out, arguments), "arguments": arguments,
        "environment": environment, "segments": trained_segments(record.get("segments"), state.step, environment),
        **device_record(accelerator.device), **plan.record(),
        "device": str(accelerator.device), "processes": accelerator.num_processes,
        "mixed_precision": accelerator.mixed_precision,
    })
    return PreparedRun(plan=plan, accelerator=accelerator, network=network, optimizer=optimizer, scheduler=scheduler,
                       record=record, state=state, resumed_from=state.step if checkpoint is not None else None,
                       started=time.perf_counter() - state.elapsed, window=list(state.window))


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
        state.window, state.validation_due = list(run.window), False
        save_checkpoint(run.out, network, run.optimizer, run.scheduler, state)
        run.checkpointed_step = state.step
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
        rows = run.plan.train_rows
        matches = greedy_matches(network, run.tokenizer, [row["source"] for row in rows],
                                 [row["target"] for row in rows], batch_size=run.recipe.eval_batch_size)
    return 100.0 * sum(matches) / len(matches)


def _network(entry, tokenizer, checkpoint: Path | None, architecture_overrides: dict | None,
             output_tokens: list[int] | None = None):
    """The model: a checkpoint's when resuming, else a fresh one of the catalogue entry sized to the tokenizer: its
    output vocabulary is the target dictionary, and with separate dictionaries its encoder embeds the source one
    (`source_vocab_size`; a model that cannot is refused when built, `ZooSeq2SeqModel.post_init`)."""
    from benchbuild import zoo

    if checkpoint is not None:
        return load_model(checkpoint)
    overrides = dict(architecture_overrides or {})
    architecture = {**entry.architecture, **overrides}
    check_set_by_training(entry, architecture_overrides)
    if output_tokens is not None:
        overrides["output_tokens"] = output_tokens
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
