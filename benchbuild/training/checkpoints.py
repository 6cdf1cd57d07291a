"""Checkpoints of a run folder (`run_folder` names the files): `checkpoints/step-NNNNNNNN/` holds the weights and
`trainer_state.pt` (optimizer, scheduler and every RNG state, loadable with `torch.load(weights_only=True)`); the
newest `KEEP_CHECKPOINTS` are kept. A killed run resumes from the newest complete one."""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchbuild.atomic import atomic_directory
from benchbuild.errors import BenchbuildError
from benchbuild.run_folder import CHECKPOINTS_DIR, STATE_FILE, check_subfolders, recovery

KEEP_CHECKPOINTS = 2


@dataclass
class TrainerState:
    """How far training got: steps done, the best validation score (by the recipe's `validate_by`) and its step, the
    selected checkpoint's (the one at the run folder's root, chosen by the recipe's `select`) score, step and exact
    match, the seconds spent training and validating (summed over a killed run and its resumption), the losses not
    yet logged (a resume point falls between two log lines), and whether the step still awaits its validation (a
    resume point saved at a step a validation follows, when a stop came before or during it: the rerun validates
    first). Checkpointed with every checkpoint."""

    step: int = 0
    best: float | None = None
    best_step: int | None = None
    elapsed: float = 0.0
    selected: float | None = None
    selected_step: int | None = None
    selected_exact_match: float | None = None
    window: list[float] = field(default_factory=list)  # the step losses since the last log line
    validation_due: bool = False


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint folder (one whose trainer state was written), if any."""
    folder = run_dir / CHECKPOINTS_DIR
    checkpoints = sorted(folder.glob("step-*")) if folder.is_dir() else []
    complete = [path for path in checkpoints if (path / STATE_FILE).is_file()]
    return complete[-1] if complete else None


def save_checkpoint(out: Path, network, optimizer, scheduler, state: TrainerState,
                    rng: dict[str, Any] | None = None) -> None:
    """Write `checkpoints/step-NNNNNNNN/` (weights, optimizer, scheduler, `state` and every RNG state: now, or `rng`,
    from `rng_state()` earlier) atomically and keep only the newest `KEEP_CHECKPOINTS`."""
    check_subfolders(out)
    target = out / CHECKPOINTS_DIR / f"step-{state.step:08d}"
    with atomic_directory(target, overwrite=True) as tmp:
        network.save_pretrained(tmp)
        torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "step": state.step,
                    "best": state.best, "best_step": state.best_step, "elapsed": state.elapsed,
                    "selected": state.selected, "selected_step": state.selected_step,
                    "selected_exact_match": state.selected_exact_match, "window": list(state.window),
                    "validation_due": state.validation_due, "rng": rng_state() if rng is None else rng},
                   tmp / STATE_FILE)
    for old in sorted((out / CHECKPOINTS_DIR).glob("step-*"))[:-KEEP_CHECKPOINTS]:
        shutil.rmtree(old)


def restore_checkpoint(checkpoint: Path, optimizer, scheduler) -> TrainerState:
    """Load a checkpoint's optimizer and scheduler state into `optimizer` and `scheduler`, set every RNG to its saved
    state and return how far training got (the weights load with `from_pretrained(checkpoint)`)."""
    try:
        # On the CPU whatever device wrote it: the optimizer moves its state to its parameters' device on loading.
        saved = torch.load(checkpoint / STATE_FILE, weights_only=True, map_location="cpu")
    except Exception as error:  # noqa: BLE001 - a truncated pickle raises EOFError, RuntimeError or UnpicklingError
        raise BenchbuildError(f"{checkpoint / STATE_FILE} cannot be loaded ({type(error).__name__}): the file is "
                              f"truncated or corrupt; {recovery(checkpoint)}") from error
    optimizer.load_state_dict(saved["optimizer"])
    scheduler.load_state_dict(saved["scheduler"])
    # A checkpoint written before `select` existed selected the best validation checkpoint; one written before
    # `validate_by` existed selected by exact match, so its selected score is the selected exact match.
    selected = saved.get("selected", saved["best"])
    state = TrainerState(step=int(saved["step"]), best=saved["best"], best_step=saved["best_step"],
                         elapsed=float(saved.get("elapsed", 0.0)), selected=selected,
                         selected_step=saved.get("selected_step", saved["best_step"]),
                         selected_exact_match=saved.get("selected_exact_match", selected),
                         window=[float(loss) for loss in saved.get("window", [])],
                         validation_due=bool(saved.get("validation_due", False)))
    _set_rng_state(saved["rng"])
    return state


def rng_state() -> dict[str, Any]:
    """Every RNG's state (torch, python, numpy, each CUDA device), as a checkpoint stores it."""
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

