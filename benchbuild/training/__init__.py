"""Training: the run's tokenizer, the typed recipe, batching, validation, the run folder's format, and the loop that
writes a run folder.

The names below are loaded when first used (PEP 562), so that reading a torch-free part of the package, such as
`benchbuild.training.selection` (which `sweep --status` reads), does not import torch and transformers."""

from __future__ import annotations

import importlib

_WHERE = {"TrainResult": "benchbuild.training.loop", "train": "benchbuild.training.loop",
          "TrainingRecipe": "benchbuild.zoo.recipe", "resolve_recipe": "benchbuild.zoo.recipe",
          "build_tokenizer": "benchbuild.training.tokenization"}

__all__ = ["TrainResult", "TrainingRecipe", "build_tokenizer", "resolve_recipe", "train"]


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
