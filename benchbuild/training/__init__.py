"""Training: the run's tokenizer, the typed recipe, batching, validation, the plan of a run (`plan`: everything
decided before the first step, one value), and the loop that executes it into a run folder.

The names below are loaded when first used (PEP 562), so that reading a torch-free part of the package, such as
`benchbuild.training.selection` (which `sweep --status` reads), does not import torch and transformers."""

from __future__ import annotations

import importlib

_WHERE = {"TrainResult": "benchbuild.training.prepared", "train": "benchbuild.training.loop",
          "RunOptions": "benchbuild.training.plan", "RunPlan": "benchbuild.training.plan",
          "plan_run": "benchbuild.training.plan",
          "TrainingRecipe": "benchbuild.zoo.recipe", "resolve_recipe": "benchbuild.zoo.recipe",
          "build_tokenizer": "benchbuild.training.tokenization"}

__all__ = ["RunOptions", "RunPlan", "TrainResult", "TrainingRecipe", "build_tokenizer", "plan_run", "resolve_recipe",
           "train"]


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
