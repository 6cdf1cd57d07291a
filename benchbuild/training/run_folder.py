"""TEMPORARY: load_model until benchbuild.zoo.loading holds it."""

from __future__ import annotations

from pathlib import Path

from benchbuild.errors import BenchbuildError
from benchbuild.run_folder import CHECKPOINTS_DIR


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
