"""The run folder's format: training writes it, evaluation and reports read it.

A run folder holds the selected checkpoint at its root (`save_pretrained` safetensors + config + tokenizer), the
latest checkpoints under `checkpoints/step-NNNNNNNN/` (weights + `trainer_state.pt`: optimizer, scheduler and RNG
state, loadable with `torch.load(weights_only=True)`), `train_log.jsonl` (one JSON record a line: `step`, `loss`, `lr`
every few steps, and `step`, `validation_exact_match`, `elapsed_s` at each validation) and `run.json` (the run's
identity, which a resumption must match, its arguments, and how far it got: `status` is `complete` at the end).
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchbuild.atomic import atomic_directory
from benchbuild.errors import BenchbuildError

RUN_FILE = "run.json"
LOG_FILE = "train_log.jsonl"
STATE_FILE = "trainer_state.pt"
CHECKPOINTS_DIR = "checkpoints"
KEEP_CHECKPOINTS = 2
# Files another benchbuild command may put in a run folder before training starts (`sweep` records the run's
# configuration there first): a folder holding only these is still a new run's.
CLAIM_FILES = frozenset({"sweep_run.json"})


@dataclass
class TrainerState:
    """How far training got: steps done, the best validation score (by the recipe's `validate_by`) and its step, the
    selected checkpoint's (the one at the run folder's root, chosen by the recipe's `select`) score, step and exact
    match, and the seconds spent training and validating (summed over a killed run and its resumption).
    Checkpointed with every checkpoint."""

    step: int = 0
    best: float | None = None
    best_step: int | None = None
    elapsed: float = 0.0
    selected: float | None = None
    selected_step: int | None = None
    selected_exact_match: float | None = None


def read_run(run_dir: str | Path) -> dict[str, Any]:
    """The `run.json` of a run folder."""
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        raise BenchbuildError(f"{run_dir} is not a benchbuild run: {path} is missing")
    return json.loads(path.read_text(encoding="utf-8"))


def load_model(folder: str | Path):
    """The model saved in `folder` (a run folder or one of its checkpoints; the zoo's classes are registered first);
    a missing, truncated or otherwise unreadable file is a BenchbuildError naming it."""
    from transformers import AutoModelForSeq2SeqLM

    from benchbuild import zoo

    zoo.register()
    folder = Path(folder)
    try:
        model = AutoModelForSeq2SeqLM.from_pretrained(folder)
    except Exception as error:  # noqa: BLE001 - transformers and safetensors raise many kinds for one bad file
        raise BenchbuildError(f"{_unreadable_file(folder, error)} cannot be loaded "
                              f"({type(error).__name__}: {' '.join(str(error).split())[:200]}): the file is "
                              f"truncated or corrupt; {_recovery(folder)}") from error
    # Runs saved before the zoo left output lengths to the calls hold `max_length = 256`, which would make a
    # `generate(max_new_tokens=N)` call warn that both are set.
    zoo.catalogue.leave_lengths_to_calls(model.generation_config)
    return model


def _unreadable_file(folder: Path, error: BaseException) -> Path:
    """The file of `folder` that `error` is about: the config when it names the config, else the weights."""
    if "config" in str(error).lower() and "safetensors" not in str(error).lower():
        return folder / "config.json"
    return folder / "model.safetensors"


def _recovery(checkpoint: Path) -> str:
    if checkpoint.parent.name == CHECKPOINTS_DIR:
        return f"delete {checkpoint} to resume from the checkpoint before it, or rerun with --overwrite"
    return "retrain the run (benchbuild train ... --overwrite)"


def write_run(out: Path, run: dict[str, Any]) -> None:
    """Replace `run.json` in one rename, so a killed run never leaves it half written."""
    tmp = out / (RUN_FILE + ".tmp")
    tmp.write_text(json.dumps(run, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(out / RUN_FILE)


def open_run(out: Path, identity: dict[str, Any], overwrite: bool) -> dict[str, Any]:
    """The run record to continue: a fresh one (written at once), or the existing one when `out` holds the same run
    (resume); a folder of another run, or of something else, is refused unless `overwrite`."""
    identity = json.loads(json.dumps(identity))
    if out.exists() and overwrite:
        shutil.rmtree(out)
    if out.exists() and any(path.name not in CLAIM_FILES for path in out.iterdir()):
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
    write_run(out, run)
    return run


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint folder (one whose trainer state was written), if any."""
    folder = run_dir / CHECKPOINTS_DIR
    checkpoints = sorted(folder.glob("step-*")) if folder.is_dir() else []
    complete = [path for path in checkpoints if (path / STATE_FILE).is_file()]
    return complete[-1] if complete else None


def save_checkpoint(out: Path, network, optimizer, scheduler, state: TrainerState) -> None:
    """Write `checkpoints/step-NNNNNNNN/` (weights, optimizer, scheduler, `state` and every RNG state) atomically and
    keep only the newest `KEEP_CHECKPOINTS`."""
    target = out / CHECKPOINTS_DIR / f"step-{state.step:08d}"
    with atomic_directory(target, overwrite=True) as tmp:
        network.save_pretrained(tmp)
        torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "step": state.step,
                    "best": state.best, "best_step": state.best_step, "elapsed": state.elapsed,
                    "selected": state.selected, "selected_step": state.selected_step,
                    "selected_exact_match": state.selected_exact_match, "rng": _rng_state()}, tmp / STATE_FILE)
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
                              f"truncated or corrupt; {_recovery(checkpoint)}") from error
    optimizer.load_state_dict(saved["optimizer"])
    scheduler.load_state_dict(saved["scheduler"])
    # A checkpoint written before `select` existed selected the best validation checkpoint; one written before
    # `validate_by` existed selected by exact match, so its selected score is the selected exact match.
    selected = saved.get("selected", saved["best"])
    state = TrainerState(step=int(saved["step"]), best=saved["best"], best_step=saved["best_step"],
                         elapsed=float(saved.get("elapsed", 0.0)), selected=selected,
                         selected_step=saved.get("selected_step", saved["best_step"]),
                         selected_exact_match=saved.get("selected_exact_match", selected))
    _set_rng_state(saved["rng"])
    return state


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



def append_log(out: Path, record: dict[str, Any]) -> None:
    """Add one record to the run's `train_log.jsonl`."""
    with open(out / LOG_FILE, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


def truncate_log(out: Path, step: int) -> None:
    """Drop log lines past the checkpoint a resumed run restarts from (the killed run wrote them)."""
    path = out / LOG_FILE
    if not path.is_file():
        return
    kept = [line for line in path.read_text(encoding="utf-8").splitlines() if line and json.loads(line)["step"] <= step]
    path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
