"""The training loop: one zoo model on one benchmark, a fixed step budget, model selection by validation accuracy.

A run folder holds the selected checkpoint at its root (`save_pretrained` safetensors + config + tokenizer), the
latest checkpoints under `checkpoints/step-NNNNNNNN/` (weights + `trainer_state.pt`: optimizer, scheduler and RNG
state, loadable with `torch.load(weights_only=True)`), `train_log.jsonl` and `run.json`. Re-running a killed run
with the same arguments resumes from its last checkpoint and reproduces the uninterrupted loss curve: batches
are a pure function of (seed, step), and every random state that changes during training is checkpointed.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from benchbuild import __version__
from benchbuild.atomic import atomic_directory
from benchbuild.benchmark import load_splits, read_build_info
from benchbuild.device import start_accelerator
from benchbuild.errors import BenchbuildError
from benchbuild.training.recipe import TrainingRecipe, recipe_family_for, resolve_recipe
from benchbuild.training.tokenization import build_tokenizer

HELD_OUT_FRACTION = 0.1
KEEP_CHECKPOINTS = 2
RUN_FILE = "run.json"
LOG_FILE = "train_log.jsonl"
STATE_FILE = "trainer_state.pt"


@dataclass
class TrainResult:
    """What a finished (or resumed and finished) run produced."""

    run_dir: Path
    steps: int
    selected_step: int | None
    validation_exact_match: float | None
    resumed_from: int | None


@dataclass
class EncodedSplit:
    """Token ids of a split's sources and targets (each ending in `</s>`)."""

    sources: list[list[int]]
    targets: list[list[int]]


def train(model: str | Path, data: str | Path, out: str | Path, *, seed: int = 0, max_steps: int | None = None,
          max_minutes: float | None = None, device: str = "auto", recipe: str | None = None,
          overrides: dict | None = None, architecture_overrides: dict | None = None,
          validation_split: str | None = None, progress: bool = True, overwrite: bool = False) -> TrainResult:
    """Train catalogue model `model` (a name or a `.toml` path) on the benchmark folder `data` into `out`.

    `max_steps` replaces the recipe's step budget; `max_minutes` also stops training once that much time has gone
    into training and validation (summed over a killed run and its resumption): the run then validates, keeps the
    better checkpoint and ends early, so its step count depends on the machine. `recipe` picks `scan` or `mt`
    (default: from the benchmark's family); `overrides` update recipe keys and `architecture_overrides` the
    model's architecture kwargs.
    """
    from accelerate.utils import set_seed

    from transformers.utils import logging as transformers_logging

    from benchbuild import zoo

    transformers_logging.disable_progress_bar()
    zoo.register()
    entry = zoo.load_entry(model)
    data, out = Path(data), Path(out)
    info = read_build_info(data)
    splits = load_splits(data)
    family = recipe or recipe_family_for(info.family)
    training_recipe = resolve_recipe(entry.recipes, family, overrides, source=str(entry.path))
    budget = training_recipe.steps if max_steps is None else max_steps
    if budget < 1:
        raise BenchbuildError(f"the step budget must be at least 1; got {budget}")
    if max_minutes is not None and not max_minutes > 0:
        raise BenchbuildError(f"the time budget must be a positive number of minutes; got {max_minutes}")
    if "train" not in splits:
        raise BenchbuildError(f"{data} has no train split (splits: {', '.join(splits)})")
    train_rows, validation_rows, validation_name = split_validation(splits, validation_split, seed)

    identity = {
        "model": entry.name, "architecture": entry.architecture, "architecture_overrides": architecture_overrides or {},
        "benchmark": {name: split.fingerprint for name, split in info.splits.items()}, "seed": seed,
        "recipe_family": family, "recipe": {k: v for k, v in training_recipe.to_dict().items() if k != "steps"},
        "validation": validation_name,
    }
    accelerator = start_accelerator(device)
    # Under `accelerate launch`, only the main process writes the run folder; the others wait until it is ready.
    run = _prepare_run_dir(out, identity, overwrite) if accelerator.is_main_process else {}
    accelerator.wait_for_everyone()
    set_seed(seed)
    tokenizer = _tokenizer(out, splits["train"], training_recipe, save=accelerator.is_main_process)
    train_encoded = encode_rows(tokenizer, train_rows)
    checkpoint = latest_checkpoint(out)
    if checkpoint is not None:
        from transformers import AutoModelForSeq2SeqLM

        network = AutoModelForSeq2SeqLM.from_pretrained(checkpoint)
    else:
        network = zoo.build_model(entry, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                  bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                                  overrides=architecture_overrides)
    optimizer = torch.optim.AdamW(network.parameters(), lr=training_recipe.learning_rate,
                                  betas=(training_recipe.adam_beta1, training_recipe.adam_beta2),
                                  weight_decay=training_recipe.weight_decay, fused=True)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, training_recipe.learning_rate_factor)
    state = {"step": 0, "best": None, "best_step": None, "elapsed": 0.0}
    if checkpoint is not None:
        saved = torch.load(checkpoint / STATE_FILE, weights_only=True)
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        state = {"step": int(saved["step"]), "best": saved["best"], "best_step": saved["best_step"],
                 "elapsed": float(saved.get("elapsed", 0.0))}
        _set_rng_state(saved["rng"])
    if accelerator.is_main_process:
        _truncate_log(out / LOG_FILE, state["step"])
    resumed_from = state["step"] if checkpoint is not None else None
    network, optimizer = accelerator.prepare(network, optimizer)

    run.update({
        "model": entry.name, "model_entry": str(entry.path), "benchbuild_version": __version__,
        "benchmark": {"path": str(data.resolve()), "family": info.family, "name": info.name,
                      "splits": {name: {"rows": s.rows, "fingerprint": s.fingerprint} for name, s in info.splits.items()}},
        "seed": seed, "recipe_family": family, "recipe": training_recipe.to_dict(), "step_budget": budget,
        "time_budget_minutes": max_minutes,
        "architecture_overrides": architecture_overrides or {}, "validation": validation_name,
        "validation_rows": len(validation_rows),
        "device": str(accelerator.device), "processes": accelerator.num_processes,
        "mixed_precision": accelerator.mixed_precision,
    })
    validation_sources = [row["source"] for row in validation_rows]
    validation_targets = [row["target"] for row in validation_rows]
    log_every = max(1, training_recipe.eval_every // 10)
    window: list[float] = []
    started = time.perf_counter() - state["elapsed"]  # training seconds, summed over a killed run and its resumption
    validation_seconds = 0.0  # the last validation's duration: a time budget stops early enough to fit one more
    stopped_by = "step budget"

    with _StepProgress(progress and accelerator.is_main_process, budget, state["step"]) as advance:
        while state["step"] < budget:
            indices = batch_indices(state["step"], training_recipe.batch_size, len(train_encoded.sources), seed)
            network.train()
            loss = backward_batch(accelerator, network, train_encoded, indices, tokenizer, training_recipe)
            if training_recipe.grad_clip > 0:
                accelerator.clip_grad_norm_(network.parameters(), training_recipe.grad_clip)
            learning_rate = scheduler.get_last_lr()[0]
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            state["step"] += 1
            last_loss = accelerator.reduce(loss.detach(), "sum").item()
            window.append(last_loss)
            step = state["step"]
            if accelerator.is_main_process and (step % log_every == 0 or step == budget):
                _append_log(out / LOG_FILE, {"step": step, "loss": sum(window) / len(window), "lr": learning_rate})
                window = []
            out_of_time = max_minutes is not None and (
                time.perf_counter() - started + validation_seconds >= max_minutes * 60)
            if max_minutes is not None and accelerator.num_processes > 1:  # all processes stop at one step
                out_of_time = bool(accelerator.reduce(torch.tensor(float(out_of_time), device=accelerator.device),
                                                      "sum").item())
            if step % training_recipe.eval_every == 0 or step == budget or out_of_time:
                accuracy = None
                if accelerator.is_main_process:
                    validation_started = time.perf_counter()
                    with accelerator.autocast():
                        accuracy = _validate(accelerator.unwrap_model(network), tokenizer, validation_sources,
                                             validation_targets, training_recipe.eval_batch_size)
                    state["elapsed"] = time.perf_counter() - started
                    validation_seconds = time.perf_counter() - validation_started
                    _append_log(out / LOG_FILE, {"step": step, "validation_exact_match": accuracy,
                                                 "elapsed_s": round(state["elapsed"], 1)})
                    if state["best"] is None or accuracy > state["best"]:
                        state["best"], state["best_step"] = accuracy, step
                        accelerator.unwrap_model(network).save_pretrained(out)
                        tokenizer.save_pretrained(out)
                    _save_checkpoint(out, accelerator.unwrap_model(network), optimizer, scheduler, state)
                    run.update({"steps_done": step, "selected_step": state["best_step"],
                                "validation_exact_match": state["best"], "status": "running"})
                    _write_run(out, run)
                accelerator.wait_for_everyone()
            advance(loss=last_loss, accuracy=state["best"])
            if out_of_time:
                stopped_by = "time budget"
                break

    if accelerator.is_main_process:
        run.update({"steps_done": state["step"], "selected_step": state["best_step"],
                    "validation_exact_match": state["best"], "status": "complete", "stopped_by": stopped_by,
                    "elapsed_s": round(state["elapsed"], 1)})
        _write_run(out, run)
    return TrainResult(run_dir=out, steps=state["step"], selected_step=state["best_step"],
                       validation_exact_match=state["best"], resumed_from=resumed_from)


def backward_batch(accelerator, network, encoded: EncodedSplit, indices: Sequence[int], tokenizer,
                   training_recipe: TrainingRecipe) -> torch.Tensor:
    """Accumulate this process's share of the gradient of the whole batch's mean token loss in `network`, one
    length-sorted micro-batch at a time (`micro_batches`), or, for a model that `accepts_length_groups`, all of
    them in one pass as `length_groups` parts; returns this process's share of that loss (the shares of all
    processes sum to it).

    Processes take every `num_processes`-th row of the batch sorted by length, so their shares are about equally
    long and none waits long for the others at the gradient all-reduce. Each part's summed token loss is divided
    by the whole batch's token count and multiplied by the process count, which the all-reduce's mean undoes: the
    update equals one process's on the whole batch.
    """
    processes = accelerator.num_processes
    tokens = sum(len(encoded.targets[index]) for index in indices)
    mine = by_length(encoded, indices)[accelerator.process_index::processes]
    grouped = getattr(accelerator.unwrap_model(network), "accepts_length_groups", False)
    parts = micro_batches(encoded, mine, training_recipe.length_groups if grouped else training_recipe.micro_batches)
    batches = [collate(encoded, part, tokenizer.pad_token_id, tokenizer.bos_token_id, accelerator.device)
               for part in parts]
    if grouped:
        # One forward pass over all the parts as length groups (see benchbuild.zoo.transformer.Groups and Packed),
        # whose logits are those of the real target positions only.
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
            accelerator.backward(part_loss * processes)
        loss += part_loss.detach()
    return loss


def _summed_loss(logits: torch.Tensor, labels: torch.Tensor, training_recipe: TrainingRecipe) -> torch.Tensor:
    return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=-100,
                           label_smoothing=training_recipe.label_smoothing, reduction="sum")


def split_validation(splits: Mapping[str, Any], validation_split: str | None, seed: int
                     ) -> tuple[list[dict], list[dict], str]:
    """(train rows, validation rows, how validation was chosen): the named split, else `validation`, else a
    seeded 10% of train held out. A test split is never used for model selection."""
    train_rows = list(splits["train"])
    if validation_split is not None:
        if "test" in validation_split:
            raise BenchbuildError(f"validation split {validation_split!r} is a test split: model selection must "
                                  "not peek at test data")
        if validation_split not in splits:
            raise BenchbuildError(f"no split {validation_split!r} to validate on (splits: {', '.join(splits)})")
        return train_rows, list(splits[validation_split]), validation_split
    if "validation" in splits:
        return train_rows, list(splits["validation"]), "validation"
    if len(train_rows) < 2:
        raise BenchbuildError("the train split needs at least 2 rows to hold out a validation part")
    held = max(1, round(HELD_OUT_FRACTION * len(train_rows)))
    chosen = set(np.random.default_rng(seed).permutation(len(train_rows))[:held].tolist())
    kept = [row for index, row in enumerate(train_rows) if index not in chosen]
    validation = [row for index, row in enumerate(train_rows) if index in chosen]
    return kept, validation, f"train-heldout-{int(HELD_OUT_FRACTION * 100)}%-seed-{seed}"


def encode_rows(tokenizer, rows: Sequence[Mapping[str, Any]]) -> EncodedSplit:
    sources = tokenizer([row["source"] for row in rows])["input_ids"]
    targets = tokenizer([row["target"] for row in rows])["input_ids"]
    return EncodedSplit(sources=sources, targets=targets)


def batch_indices(step: int, batch_size: int, size: int, seed: int) -> list[int]:
    """Row indices of the batch at `step`: consecutive slices of a stream of seeded per-epoch permutations."""
    indices = []
    for position in range(step * batch_size, (step + 1) * batch_size):
        epoch, offset = divmod(position, size)
        indices.append(int(_epoch_permutation(seed, epoch, size)[offset]))
    return indices


_permutations: dict[tuple[int, int, int], np.ndarray] = {}


def _epoch_permutation(seed: int, epoch: int, size: int) -> np.ndarray:
    key = (seed, epoch, size)
    if key not in _permutations:
        if len(_permutations) > 4:
            _permutations.clear()
        _permutations[key] = np.random.default_rng([seed, epoch]).permutation(size)
    return _permutations[key]


def by_length(encoded: EncodedSplit, indices: Sequence[int]) -> list[int]:
    """`indices` sorted by (target length, source length), ties in their given order."""
    return sorted(indices, key=lambda index: (len(encoded.targets[index]), len(encoded.sources[index])))


def micro_batches(encoded: EncodedSplit, indices: Sequence[int], count: int) -> list[list[int]]:
    """`indices` sorted by (target, source) length and cut into `count` parts at the points that minimise the padded
    target tokens, Σ rows × longest target, each part padding only to its own longest row (fewer parts when the batch
    has fewer rows, or over 4,096 rows but fewer distinct lengths: see `_best_cuts`). Together the parts are exactly
    the batch."""
    order = by_length(encoded, indices)
    lengths = np.asarray([len(encoded.targets[index]) for index in order], dtype=np.int64)
    cuts = _best_cuts(lengths, min(count, len(order)))
    return [order[start:end] for start, end in zip(cuts, cuts[1:])]


def _best_cuts(lengths: np.ndarray, parts: int) -> list[int]:
    """Boundaries 0 = c₀ < c₁ < … < c_parts = n of ascending `lengths` minimising Σ (c_k - c_{k-1}) · lengths[c_k - 1]
    (dynamic programming over the end of each part; ties go to the earliest cut).

    Some optimal cutting only cuts where the length changes (moving a cut inside a run of equal lengths to the run's
    end moves rows from a part padded to at least that length into one padded to exactly it), so when the batch has
    at least `parts` distinct lengths the search runs over those boundaries only: its cost grows with the number of
    distinct lengths, not of rows. With fewer distinct lengths every position is a candidate (small batches); a
    large batch (over 4,096 rows) then gets one part per distinct length, which pads no more than `parts` would.
    """
    n = len(lengths)
    run_ends = np.flatnonzero(np.diff(lengths)) + 1
    if len(run_ends) + 1 >= parts:
        candidates = np.concatenate([[0], run_ends, [n]])
    elif n <= 4096:
        candidates = np.arange(n + 1)
    else:
        candidates, parts = np.concatenate([[0], run_ends, [n]]), len(run_ends) + 1
    count = len(candidates)
    starts, ends = candidates[:, None], candidates[None, :]
    # cost[i, j]: rows candidates[i] .. candidates[j] - 1 as one part; infinite unless i < j.
    unreachable = np.iinfo(np.int64).max // 4
    cost = np.where(starts < ends, (ends - starts) * lengths[np.maximum(ends - 1, 0)], unreachable)
    best = np.where(np.arange(count) == 0, 0, unreachable)  # best[j]: rows before candidates[j] in k parts
    choices = []
    for _ in range(parts):
        totals = best[:, None] + cost
        choices.append(totals.argmin(axis=0))
        best = totals.min(axis=0)
    cuts = [count - 1]
    for choice in reversed(choices):
        cuts.append(int(choice[cuts[-1]]))
    return [int(candidates[cut]) for cut in reversed(cuts)]


def collate(encoded: EncodedSplit, indices: Sequence[int], pad_id: int, bos_id: int, device) -> dict[str, torch.Tensor]:
    """Padded encoder ids + mask, decoder inputs (`<s>` + target shifted right) + mask, and labels (-100 on
    padding)."""
    sources = [encoded.sources[i] for i in indices]
    targets = [encoded.targets[i] for i in indices]
    source_filled = _filled(sources)
    target_filled = _filled(targets)
    input_ids = np.full(source_filled.shape, pad_id, dtype=np.int64)
    input_ids[source_filled] = np.concatenate(sources)
    labels = np.full(target_filled.shape, -100, dtype=np.int64)
    labels[target_filled] = np.concatenate(targets)
    decoder_input_ids = np.full(target_filled.shape, pad_id, dtype=np.int64)
    decoder_input_ids[target_filled] = np.concatenate([[bos_id, *target[:-1]] for target in targets])
    tensors = (("input_ids", input_ids), ("attention_mask", source_filled.astype(np.int64)),
               ("decoder_input_ids", decoder_input_ids), ("decoder_attention_mask", target_filled.astype(np.int64)),
               ("labels", labels))
    return {name: torch.from_numpy(array).to(device) for name, array in tensors}


def _filled(sequences: Sequence[Sequence[int]]) -> np.ndarray:
    """(rows, longest) booleans: True where row i has a token (row-major order matches their concatenation)."""
    lengths = np.fromiter(map(len, sequences), dtype=np.int64, count=len(sequences))
    return np.arange(lengths.max())[None, :] < lengths[:, None]


def latest_checkpoint(run_dir: Path) -> Path | None:
    checkpoints = sorted((run_dir / "checkpoints").glob("step-*")) if (run_dir / "checkpoints").is_dir() else []
    complete = [path for path in checkpoints if (path / STATE_FILE).is_file()]
    return complete[-1] if complete else None


def read_run(run_dir: str | Path) -> dict[str, Any]:
    """The `run.json` of a run folder."""
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        raise BenchbuildError(f"{run_dir} is not a benchbuild run: {path} is missing")
    return json.loads(path.read_text(encoding="utf-8"))


def _prepare_run_dir(out: Path, identity: dict[str, Any], overwrite: bool) -> dict[str, Any]:
    """The run record to continue: a fresh one, or the existing one when `out` is the same run (resume)."""
    identity = json.loads(json.dumps(identity))
    if out.exists() and overwrite:
        shutil.rmtree(out)
    if out.exists() and any(out.iterdir()):
        if not (out / RUN_FILE).is_file():
            raise BenchbuildError(f"{out} exists and is not a benchbuild run: pass --overwrite to replace it")
        run = read_run(out)
        previous = run.get("identity", {})
        if previous != identity:
            differing = sorted(key for key in set(previous) | set(identity) if previous.get(key) != identity.get(key))
            raise BenchbuildError(f"{out} holds a different run (it differs in: {', '.join(differing)}): "
                                  "pass --overwrite to replace it, or choose another --out")
        return run
    out.mkdir(parents=True, exist_ok=True)
    run = {"identity": identity, "status": "starting"}
    _write_run(out, run)
    return run


def _tokenizer(out: Path, train_split, training_recipe: TrainingRecipe, save: bool = True):
    """The run's tokenizer: rebuilt from the whole train split (sources and targets), so held-out rows, seeds,
    processes and resumed runs all see one vocabulary."""
    texts = [text for row in train_split for text in (row["source"], row["target"])]
    tokenizer = build_tokenizer(texts, training_recipe.tokenizer_kind, training_recipe.bpe_vocab_size)
    if save:
        tokenizer.save_pretrained(out)
    return tokenizer


def _validate(network, tokenizer, sources: list[str], targets: list[str], batch_size: int) -> float:
    """Greedy exact match in percent (teacher-forced, see `greedy_matches`)."""
    from benchbuild.evaluation.decoding import greedy_matches

    if not sources:
        return 0.0
    matches = greedy_matches(network, tokenizer, sources, targets, batch_size=batch_size)
    return 100.0 * sum(matches) / len(matches)


def _save_checkpoint(out: Path, network, optimizer, scheduler, state: dict[str, Any]) -> None:
    target = out / "checkpoints" / f"step-{state['step']:08d}"
    with atomic_directory(target, overwrite=True) as tmp:
        network.save_pretrained(tmp)
        torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "step": state["step"],
                    "best": state["best"], "best_step": state["best_step"], "elapsed": state["elapsed"],
                    "rng": _rng_state()}, tmp / STATE_FILE)
    for old in sorted((out / "checkpoints").glob("step-*"))[:-KEEP_CHECKPOINTS]:
        shutil.rmtree(old)


def _rng_state() -> dict[str, Any]:
    numpy_state = np.random.get_state(legacy=False)
    state = {"torch": torch.get_rng_state(), "python": random.getstate(),
             "numpy": {"key": torch.from_numpy(numpy_state["state"]["key"].astype(np.int64)),
                       "pos": numpy_state["state"]["pos"], "has_gauss": numpy_state["has_gauss"],
                       "gauss": numpy_state["gauss"]}}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(_as_tuples(state["python"]))
    numpy_state = state["numpy"]
    np.random.set_state({"bit_generator": "MT19937", "has_gauss": numpy_state["has_gauss"], "gauss": numpy_state["gauss"],
                         "state": {"key": numpy_state["key"].numpy().astype(np.uint32), "pos": numpy_state["pos"]}})
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _as_tuples(value):
    return tuple(_as_tuples(item) for item in value) if isinstance(value, (list, tuple)) else value


def _append_log(path: Path, record: dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


def _truncate_log(path: Path, step: int) -> None:
    """Drop log lines past the checkpoint a resumed run restarts from (the killed run wrote them)."""
    if not path.is_file():
        return
    kept = [line for line in path.read_text(encoding="utf-8").splitlines() if line and json.loads(line)["step"] <= step]
    path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")


def _write_run(out: Path, run: dict[str, Any]) -> None:
    tmp = out / (RUN_FILE + ".tmp")
    tmp.write_text(json.dumps(run, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(out / RUN_FILE)


class _StepProgress:
    """A rich progress bar over optimizer steps (a no-op when disabled)."""

    def __init__(self, enabled: bool, total: int, done: int):
        self.enabled, self.total, self.done = enabled, total, done

    def __enter__(self):
        if not self.enabled:
            return lambda **_: None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(TextColumn("training"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                                 TextColumn("{task.fields[status]}"), console=Console(stderr=True))
        self.progress.start()
        task = self.progress.add_task("train", total=self.total, completed=self.done, status="")

        def advance(loss: float | None, accuracy: float | None) -> None:
            status = "" if loss is None or not math.isfinite(loss) else f"loss {loss:.4f}"
            if accuracy is not None:
                status += f"  best val EM {accuracy:.1f}%"
            self.progress.update(task, advance=1, status=status)

        return advance

    def __exit__(self, *exc) -> None:
        if self.enabled:
            self.progress.stop()
