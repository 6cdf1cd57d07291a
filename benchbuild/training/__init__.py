"""Training: the run's tokenizer, the typed recipe, batching, validation, the run folder's format, and the loop that
writes a run folder."""

from benchbuild.training.loop import TrainResult, train
from benchbuild.zoo.recipe import TrainingRecipe, resolve_recipe
from benchbuild.training.tokenization import build_tokenizer

__all__ = ["TrainResult", "TrainingRecipe", "build_tokenizer", "resolve_recipe", "train"]
