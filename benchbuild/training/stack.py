"""Stacked training: K runs of one model on one benchmark trained in one process as one vmapped model.

On a GPU, small models (000's SCAN Transformers: 1.3M parameters) leave the card idle between kernel launches; K runs
whose tensors have the same shapes can instead share every launch. Each run is prepared as `train` prepares it (its
own folder, tokenizer, initial weights from its own seed, optimizer, schedule, validation rows; resumed from its
last checkpoint), then its parameters are moved into stacked tensors (member m's weights are views of row m), and
each step runs one `torch.func.vmap`ped forward and backward pass over the members' own batches (each member's batch
of its seed at that step, cut into equal micro-batches and padded to the stack's common shapes), draws each member's
dropout masks from its own stream (`zoo.attention.stacking`), and updates each member with its own optimizer, clipping and
schedule. Validation, checkpoints, the log, `run.json` and the model card are written for each member by the same
functions as for a single run, so `eval`, `report` and `reproduce` read a member's folder as any other; its
`run.json` adds `stack` (the run folders it was trained with).

A member is its single run up to the dropout masks: with dropout off, its losses and weights equal those of `train`
to float rounding (micro-batches cut and padded otherwise); with dropout on, its masks come from its stream, so a
member draws the same masks in any stack. A member whose loss turns non-finite is marked failed alone; the others go
on; so does a member whose folder was damaged between two runs of the stack (its message says to delete the folder,
and the same sweep then trains it again from its start). Members at different steps (a stack killed between two
members' checkpoints) are stepped lowest first until they meet. On CPU a stack is no faster than its runs one after another (benchmarks/RESULTS.md); it exists for GPUs.
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from benchbuild.device import cpu_threads
from benchbuild.errors import BenchbuildError, starting_again_by
from benchbuild.run_folder import RUN_FILE, portable_path, read_run
from benchbuild.training.batching import batch_indices, by_length
from benchbuild.training.bookkeeping import claimed, check_run_paths
from benchbuild.training.loop import count_step, finish, prepare, validate_and_checkpoint
from benchbuild.training.plan import RunOptions, RunPlan, plan_run
from benchbuild.training.prepared import PreparedRun, TrainResult
from benchbuild.training.progress import StepProgress
from benchbuild.zoo.attention import stacking

# The model kinds whose layers all take their vmappable paths inside a stacked pass (`zoo.attention.stacking`).
STACKABLE_KINDS = ("transformer",)


@dataclass
class StackResult:
    """What a stack produced: each finished member's result, and each failed member's reason."""

    finished: list[TrainResult]
    failed: dict[Path, str]


def train_stack(model: str | Path, data: str | Path, members: Sequence[tuple[str | Path, RunOptions]],
                progress: bool = True) -> StackResult:
    """Train catalogue model `model` on benchmark `data` as one stack of `members` (run folder, `RunOptions`): each
    member's options as `train` takes them (its seed, budget, recipe overrides), all on one device. Members must
    agree on everything that sets tensor shapes or batches (architecture, recipe family, batch size, micro-batches)
    and may differ in seed, step budget and the recipe keys of the update (learning rate, schedule, clipping, Adam's
    betas, weight decay, label smoothing)."""
    members = [(Path(out), replace(options, stacked=True, progress=False)) for out, options in members]
    _check_members(members)
    failed: dict[Path, str] = {}
    for out, _ in members:
        if (out / RUN_FILE).exists():
            try:  # before the check of --out, which would take a folder with a damaged run.json for a user's
                with _member_way_out(out):
                    read_run(out)
            except BenchbuildError as error:  # a member's folder damaged: it fails alone, the others go on
                failed[out] = str(error)
                continue
        check_run_paths(model, data, out)
    # Every member planned (nothing written yet), then checked as one stack, before any folder is claimed.
    plans = [plan_run(model, data, out, options) for out, options in members if out not in failed]
    _check_plans(plans)
    with contextlib.ExitStack() as held:
        runs = []
        held.enter_context(cpu_threads(torch.get_num_threads()))
        for plan in plans:
            held.enter_context(claimed(plan.out))
            try:
                with _member_way_out(plan.out):
                    runs.append(prepare(plan))
            except BenchbuildError as error:
                failed[plan.out] = str(error)
        if not runs:
            return StackResult(finished=[], failed=failed)
        _check_stackable(runs)
        for run in runs:
            run.record["stack"] = {"members": len(runs), "with": [_relative(other.out, run.out) for other in runs
                                                                   if other is not run]}
        stack = Stack(runs)
        total = sum(run.budget for run in runs)
        with StepProgress(progress, total, sum(run.state.step for run in runs)) as advance:
            while True:
                waiting = [run for run in runs if run.out not in failed and run.state.step < run.budget]
                if not waiting:
                    break
                lowest = min(run.state.step for run in waiting)
                group = [run for run in waiting if run.state.step == lowest]
                failed.update(stack.step(group))
                for run in group:
                    if run.out in failed:
                        continue
                    if run.state.step % run.eval_every == 0 or run.state.step == run.budget:
                        validate_and_checkpoint(run)
                    advance("")
        finished = [finish(run) for run in runs if run.out not in failed]
    return StackResult(finished=finished, failed=failed)


def _member_way_out(out: Path):
    """Messages about a damaged member folder (its run.json, a checkpoint, its weights) give the way out that works
    for a stack's member: delete its folder, and the same sweep trains it again from its start."""
    return starting_again_by(f"delete {out} and rerun the same sweep command: that run then trains again from its "
                             "start, beside the others")


def _relative(path: Path, start: Path) -> str:
    relative = portable_path(path, start)
    return str(path) if relative is None else relative


def _check_members(members: list[tuple[Path, RunOptions]]) -> None:
    """Before anything is loaded: distinct folders, one device, no time budget (a stack stops by steps)."""
    if not members:
        raise BenchbuildError("a stack needs at least one run")
    folders = [out.resolve() for out, _ in members]
    if len(set(folders)) != len(folders):
        raise BenchbuildError("two runs of a stack have the same run folder: give each its own --out")
    devices = {options.device for _, options in members}
    if len(devices) > 1:
        raise BenchbuildError(f"the runs of a stack train on one device; got {', '.join(sorted(devices))}")
    if any(options.max_minutes is not None for _, options in members):
        raise BenchbuildError("a stack stops by steps, not minutes: give its runs --max-steps instead of "
                              "--max-minutes")


def _check_plans(plans: list[RunPlan]) -> None:
    """Before any run folder is written: one stackable model kind, one architecture, and recipes that agree on what
    sets the batches (row batches of one size, cut into as many micro-batches, in one precision)."""
    import json

    shared, first_out = None, plans[0].out if plans else None
    for plan in plans:
        entry, recipe = plan.entry, plan.recipe
        kind = entry.architecture.get("kind")
        if kind not in STACKABLE_KINDS:
            raise BenchbuildError(f"{entry.name}: a {kind} model cannot be trained in a stack (stackable kinds: "
                                  f"{', '.join(STACKABLE_KINDS)}); train its runs one by one")
        if recipe.batch_tokens is not None:
            raise BenchbuildError(f"{plan.out}: a recipe with token batches (batch_tokens) cannot be stacked: each "
                                  "member's batches would hold other numbers of rows")
        # What `prepare` builds: the entry's architecture under the recipe's, under the run's overrides.
        architecture = {**entry.architecture, **(plan.options.architecture_overrides or {})}
        mine = {"architecture": json.dumps(architecture, sort_keys=True),
                **{key: getattr(recipe, key) for key in ("batch_size", "micro_batches", "precision")}}
        if shared is not None and mine != shared:
            key = next(key for key in mine if mine[key] != shared[key])
            raise BenchbuildError(f"{plan.out} and {first_out} differ in {key}: the runs of a stack share their "
                                  "shapes and batches")
        shared = mine


def _check_stackable(runs: list[PreparedRun]) -> None:
    """What only the prepared runs show (`_check_recipes` checked the rest before any folder was written): one
    process, the same parameter shapes, one vocabulary."""
    first = runs[0]
    shapes = _shapes(first)
    for run in runs:
        if run.accelerator.num_processes > 1:
            raise BenchbuildError("a stack trains in one process; run it without accelerate launch")
        if _shapes(run) != shapes:
            raise BenchbuildError(f"{run.out} and {first.out} differ in parameter shapes: the runs of a stack share "
                                  "them")
        if run.tokenizer.get_vocab() != first.tokenizer.get_vocab():
            raise BenchbuildError(f"{run.out} and {first.out} have other vocabularies: the runs of a stack train on "
                                  "one benchmark")


def _shapes(run: PreparedRun) -> dict[str, tuple[int, ...]]:
    network = run.accelerator.unwrap_model(run.network)
    return {name: tuple(parameter.shape) for name, parameter in network.named_parameters()}


class Stack:
    """The members' parameters as stacked tensors (member m's parameters are views of row m), restacked when the
    group being stepped changes, and one step of a group."""

    def __init__(self, runs: list[PreparedRun]):
        first = runs[0].accelerator.unwrap_model(runs[0].network)
        self.names = [name for name, _ in first.named_parameters()]
        self.buffer_names = [name for name, _ in first.named_buffers()]
        self.base = copy.deepcopy(first).to("meta")
        self.base.train()
        self.device = runs[0].accelerator.device
        self.group: tuple[Path, ...] = ()
        self.params: dict[str, torch.Tensor] = {}
        self.buffers: dict[str, torch.Tensor] = {}

    def _restack(self, group: list[PreparedRun]) -> None:
        """Stacked tensors for `group`, each member's parameters re-pointed at its row (the optimizers keep their
        parameter objects, so their state stays theirs)."""
        key = tuple(run.out for run in group)
        if key == self.group:
            return
        networks = [run.accelerator.unwrap_model(run.network) for run in group]
        parameters = [dict(network.named_parameters()) for network in networks]
        self.params = {}
        for name in self.names:
            stacked = torch.stack([members[name].detach() for members in parameters]).requires_grad_(True)
            for row, members in enumerate(parameters):
                members[name].data = stacked.data[row]
            self.params[name] = stacked
        buffers = [dict(network.named_buffers()) for network in networks]
        self.buffers = {name: torch.stack([members[name] for members in buffers]) for name in self.buffer_names}
        self.group = key

    def step(self, group: list[PreparedRun]) -> dict[Path, str]:
        """One optimizer step of every run in `group` (all at the same step); returns the folders of the runs whose
        loss turned non-finite, each marked failed in its folder, with the reason."""
        self._restack(group)
        first = group[0]
        step, recipe = first.state.step, first.recipe
        tokenizer = first.tokenizer
        parts = [_equal_parts(by_length(run.train_encoded, batch_indices(step, run.recipe.batch_size,
                                                                          len(run.train_encoded.sources),
                                                                          run.options.seed)), recipe.micro_batches)
                 for run in group]
        tokens = torch.tensor([sum(len(run.train_encoded.targets[index]) for part in member for index in part)
                               for run, member in zip(group, parts)], dtype=torch.float32, device=self.device)
        keys = torch.tensor([stacking.member_key(run.options.seed) for run in group], dtype=torch.int64,
                            device=self.device)
        smoothing = torch.tensor([run.recipe.label_smoothing for run in group], device=self.device)
        losses = torch.zeros(len(group), device=self.device)
        for run in group:
            run.network.train()

        def one(params, buffers, key, input_ids, attention_mask, decoder_input_ids):
            with stacking.member_keys(key):
                return torch.func.functional_call(self.base, (params, buffers), (), {
                    "input_ids": input_ids, "attention_mask": attention_mask,
                    "decoder_input_ids": decoder_input_ids}).logits

        with stacking.member_streams(keys, step), warnings.catch_warnings():
            # Fused attention has no vmap rule on CPU: torch loops over members for that one op (and says so).
            warnings.filterwarnings("ignore", message=".*performance drop.*")
            for number in range(len(parts[0])):
                batch = _stacked_batch(group, [member[number] for member in parts], tokenizer, self.device)
                with first.accelerator.autocast():
                    logits = torch.vmap(one, randomness="error")(
                        self.params, self.buffers, keys, batch["input_ids"], batch["attention_mask"],
                        batch["decoder_input_ids"])
                summed = _summed_losses(logits, batch["labels"], smoothing)
                (summed / tokens).sum().backward()
                losses += summed.detach() / tokens
        values = losses.tolist()
        failed = {}
        for row, run in enumerate(group):
            network = run.accelerator.unwrap_model(run.network)
            for name, parameter in network.named_parameters():
                parameter.grad = self.params[name].grad[row]
            if run.recipe.grad_clip > 0:
                run.accelerator.clip_grad_norm_(run.network.parameters(), run.recipe.grad_clip)
            learning_rate = run.scheduler.get_last_lr()[0]
            run.optimizer.step()
            run.scheduler.step()
            run.optimizer.zero_grad(set_to_none=True)
            try:
                count_step(run, values[row], learning_rate)
            except BenchbuildError as error:  # a non-finite loss: marked failed in its folder by count_step
                failed[run.out] = str(error)
        for stacked in self.params.values():
            stacked.grad = None
        if failed:
            self.group = ()  # restacked without them at the next step
        return failed


def _equal_parts(ordered: list[int], count: int) -> list[list[int]]:
    """`ordered` (sorted by length) cut into `count` parts of equal size (the first ones one longer): every member
    of a stack has the same rows per part, which vmap needs; the step's loss is the same sum as `micro_batches`'
    cut gives."""
    return [list(part) for part in np.array_split(np.asarray(ordered, dtype=np.int64), min(count, len(ordered)))]


def _stacked_batch(group: list[PreparedRun], parts: list[list[int]], tokenizer, device) -> dict[str, torch.Tensor]:
    """Each member's part as `collate` lays a batch out, padded to the stack's longest source and target: (K, rows,
    length) tensors."""
    sources = [[run.train_encoded.sources[index] for index in part] for run, part in zip(group, parts)]
    targets = [[run.train_encoded.targets[index] for index in part] for run, part in zip(group, parts)]
    rows = len(parts[0])
    source_length = max(len(source) for member in sources for source in member)
    target_length = max(len(target) for member in targets for target in member)
    shape = (len(group), rows)
    input_ids = np.full((*shape, source_length), tokenizer.pad_token_id, dtype=np.int64)
    attention_mask = np.zeros((*shape, source_length), dtype=np.int64)
    decoder_input_ids = np.full((*shape, target_length), tokenizer.pad_token_id, dtype=np.int64)
    labels = np.full((*shape, target_length), -100, dtype=np.int64)
    for member, (member_sources, member_targets) in enumerate(zip(sources, targets)):
        for row, (source, target) in enumerate(zip(member_sources, member_targets)):
            input_ids[member, row, :len(source)] = source
            attention_mask[member, row, :len(source)] = 1
            decoder_input_ids[member, row, :len(target)] = [tokenizer.bos_token_id, *target[:-1]]
            labels[member, row, :len(target)] = target
    arrays = {"input_ids": input_ids, "attention_mask": attention_mask, "decoder_input_ids": decoder_input_ids,
              "labels": labels}
    return {name: torch.from_numpy(array).to(device) for name, array in arrays.items()}


def _summed_losses(logits: torch.Tensor, labels: torch.Tensor, smoothing: torch.Tensor) -> torch.Tensor:
    """Each member's summed token cross-entropy (K,), with its own label smoothing (`F.cross_entropy`'s)."""
    if bool((smoothing == smoothing[0]).all()):
        members, vocabulary = logits.size(0), logits.size(-1)
        token_losses = F.cross_entropy(logits.float().reshape(-1, vocabulary), labels.reshape(-1), ignore_index=-100,
                                       label_smoothing=float(smoothing[0]), reduction="none")
        return token_losses.view(members, -1).sum(dim=1)
    return torch.stack([F.cross_entropy(logits[row].float().reshape(-1, logits.size(-1)), labels[row].reshape(-1),
                                        ignore_index=-100, label_smoothing=float(smoothing[row]), reduction="sum")
                        for row in range(logits.size(0))])
