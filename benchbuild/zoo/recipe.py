"""The training recipe of a catalogue entry (`[recipe.scan]` / `[recipe.mt]`): its fields are the recipe keys."""

from __future__ import annotations

import math
import typing
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Mapping

from benchbuild.errors import BenchbuildError
from benchbuild.toml_schema import check_overrides

RecipeFamily = Literal["scan", "mt"]
RECIPE_FAMILIES: tuple[str, ...] = typing.get_args(RecipeFamily)
Schedule = Literal["constant", "inverse_sqrt"]
Selection = Literal["best_validation", "last"]


@dataclass(frozen=True)
class TrainingRecipe:
    """How to train one model on one family of benchmarks (the catalogue's `[recipe.scan]` / `[recipe.mt]`).

    `micro_batches`: each batch is sorted by length and cut into this many parts whose gradients are accumulated
    before the optimizer step. The update is the whole batch's (its mean token loss), only the padding shrinks: on
    SCAN a random batch pads every target to ~48 tokens while most are ~15. (Batches built from rows of similar
    length instead, i.e. length bucketing, cut padding too but slowed SCAN convergence several-fold: see
    benchmarks/RESULTS.md.)

    `length_groups`: the same cut, into this many parts, for models that take a batch's parts in one forward pass
    (`accepts_length_groups`, the zoo Transformer): position-wise layers run once over all parts and only attention
    runs part by part, so more parts (less padding) cost little; 8 was fastest for SCAN batches of 256.

    `select`: which validated checkpoint the run folder's root holds. `best_validation` keeps the one of highest
    validation exact match (of tied ones, the later); `last` keeps the final step's, as papers that train for a fixed
    budget report it (003 §3.2: early stopping on in-distribution validation can halve generalization accuracy).

    `architecture` (`[recipe.mt.architecture]`): architecture keys this family's runs change, merged over the entry's
    `[architecture]` (and under `train`'s architecture overrides): the papers train bigger models on MT than on SCAN.
    """

    steps: int
    batch_size: int
    learning_rate: float
    schedule: Schedule = "constant"
    warmup_steps: int = 0
    label_smoothing: float = 0.0
    grad_clip: float = 1.0
    weight_decay: float = 0.0
    eval_every: int = 1000
    bpe_vocab_size: int | None = None
    eval_batch_size: int = 256
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    micro_batches: int = 4
    length_groups: int = 8
    select: Selection = "best_validation"
    architecture: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        positive = {"steps": self.steps, "batch_size": self.batch_size, "eval_every": self.eval_every,
                    "micro_batches": self.micro_batches, "length_groups": self.length_groups,
                    "eval_batch_size": self.eval_batch_size, "learning_rate": self.learning_rate}
        for key, value in positive.items():
            if not value > 0:
                raise BenchbuildError(f"recipe key {key!r} must be positive; got {value!r}")
        if self.warmup_steps < 0 or self.weight_decay < 0 or self.grad_clip < 0:
            raise BenchbuildError("recipe keys 'warmup_steps', 'weight_decay' and 'grad_clip' must not be negative")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise BenchbuildError(f"recipe key 'label_smoothing' must be in [0, 1); got {self.label_smoothing}")
        if self.bpe_vocab_size is not None and self.bpe_vocab_size <= 4:
            raise BenchbuildError(f"recipe key 'bpe_vocab_size' must exceed 4; got {self.bpe_vocab_size}")

    @classmethod
    def checked_overrides(cls, overrides: Mapping[str, Any], option: str) -> dict[str, Any]:
        """Recipe keys given as command-line option `option` (`--set KEY=VALUE`): each a field, of the field's type."""
        return check_overrides(cls, overrides, option, noun="recipe key")

    @property
    def tokenizer_kind(self) -> str:
        """`bpe` when the recipe names a BPE vocabulary size, else whitespace words."""
        return "word" if self.bpe_vocab_size is None else "bpe"

    def learning_rate_factor(self, step: int) -> float:
        """Multiplier of `learning_rate` at optimizer step `step` (0-based): linear warm-up, then the schedule."""
        warmup = max(self.warmup_steps, 1)
        if self.schedule == "constant":
            return min(1.0, (step + 1) / warmup)
        return min((step + 1) / warmup, math.sqrt(warmup / (step + 1)))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
