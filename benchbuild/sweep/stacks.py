"""Which runs of a sweep train together as one stack (`benchbuild.training.stack`): runs that differ only in their
seed (same model, benchmark, configuration, recipe and budget) of a model whose layers stack, at most `--stack K`
at a time. `--stack auto`, the default, stacks on CUDA only: on a CPU a stack is no faster than its runs one after
another (benchmarks/RESULTS.md), on a GPU it shares every kernel launch. A run already started keeps the way it was
started (a stacked run resumes in a stack, a single one alone), whatever `--stack` says now.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from benchbuild.errors import BenchbuildError
from benchbuild.sweep.spec import RunSpec

# `--stack auto` on CUDA: every compatible run up to this many in one process (000's tied 72-run grid in one stack).
AUTO_CUDA_STACK = 72


@dataclass(frozen=True)
class Group:
    """Runs trained together: a stack (`stacked`, even of one run: its dropout masks come from its own stream), or
    one run trained alone."""

    specs: tuple[RunSpec, ...]
    stacked: bool


def parse_stack(value: str) -> int | None:
    """`--stack`'s value: a number of runs (at least 1), or None for "auto"."""
    if value == "auto":
        return None
    try:
        size = int(value)
    except ValueError:
        size = 0
    if size < 1:
        raise BenchbuildError(f"--stack takes 'auto' or a number of runs of at least 1; got {value!r}")
    return size


def stack_size(option: int | None, device: str) -> int:
    """The stack size of a sweep on `device` ("cpu", "cuda", "cuda:1", "auto"): `option`, or under auto
    `AUTO_CUDA_STACK` where runs go to a GPU and 1 elsewhere."""
    if option is not None:
        return option
    return AUTO_CUDA_STACK if _on_cuda(device) else 1


def _on_cuda(device: str) -> bool:
    if device.startswith("cuda"):
        return True
    if device != "auto":
        return False
    from benchbuild.device import visible_cuda_devices

    return visible_cuda_devices() > 0


def groups(todo: list[RunSpec], size: int) -> list[Group]:
    """`todo` in groups: runs already started as they were started; the others, where `size` > 1 and the model
    stacks, in stacks of up to `size` runs that differ only in seed; the rest alone. Order: as in `todo`."""
    formed: list[tuple[list[RunSpec], bool]] = []
    filling: dict[str, list[RunSpec]] = {}
    known: dict[str, bool] = {}  # `stackable` by what it reads: a grid's 20,000 runs share a few answers
    for spec in todo:
        started = _started_stacked(spec)
        if started is None and size > 1:
            asked = json.dumps([spec.model, spec.benchmark, spec.recipe, spec.overrides, spec.max_minutes],
                               sort_keys=True, default=str)
            if asked not in known:
                known[asked] = stackable(spec)
            started = known[asked]
        if not started:
            formed.append(([spec], False))
            continue
        key = _stack_key(spec)
        if key not in filling or len(filling[key]) >= size:
            filling[key] = []
            formed.append((filling[key], True))
        filling[key].append(spec)
    return [Group(tuple(specs), stacked) for specs, stacked in formed]


def stackable(spec: RunSpec) -> bool:
    """Whether `spec`'s runs can be stacked: a model kind whose layers stack, a recipe of row batches, a step
    budget (not minutes), run to its end (a stack's members step together: none stops when settled)."""
    from benchbuild import zoo
    from benchbuild.sweep.spec import budget_recipe
    from benchbuild.training.stack import STACKABLE_KINDS

    if spec.max_minutes is not None or spec.stop_when_settled:
        return False
    entry = zoo.load_entry(spec.model)
    if entry.architecture.get("kind") not in STACKABLE_KINDS:
        return False
    return budget_recipe(spec.model, spec.benchmark, spec.recipe, spec.overrides).batch_tokens is None


def _stack_key(spec: RunSpec) -> str:
    config = spec.config()
    config.pop("seed")
    return json.dumps(config, sort_keys=True)


def _started_stacked(spec: RunSpec) -> bool | None:
    """How a started run was started (True: in a stack), None when it has not started."""
    from benchbuild.run_folder import RUN_FILE

    try:
        run = json.loads((Path(spec.folder) / RUN_FILE).read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return None
    identity = run.get("identity") if isinstance(run, dict) else None
    if not isinstance(identity, dict):
        return None
    return identity.get("trainer") == "stacked"


def describe(groups_: list[Group]) -> list[str]:
    """One line per stack of more than one run: its size and its runs' shared folder prefix."""
    lines = []
    for group in groups_:
        if group.stacked and len(group.specs) > 1:
            first = group.specs[0]
            seeds = ", ".join(str(spec.seed) for spec in group.specs)
            lines.append(f"  {len(group.specs)} runs of {first.model} on {first.benchmark}"
                         f"{f' {first.configuration}' if first.configuration else ''} (seeds {seeds})")
    return lines
