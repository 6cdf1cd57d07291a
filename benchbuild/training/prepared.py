"""A run ready to step (`PreparedRun`: its plan, and the model, optimizer and schedule built from it on the
accelerator, its `run.json` record, where training stands) and what a finished run produced (`TrainResult`). The
loop (`loop`), its bookkeeping (`bookkeeping`) and its progress display (`progress`) all read these; they import
none of those modules, so training/ has no import circle."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchbuild.training.batching import EncodedSplit, TokenBatches
from benchbuild.training.checkpoints import TrainerState
from benchbuild.training.plan import RunOptions, RunPlan
from benchbuild.zoo.recipe import TrainingRecipe


@dataclass
class TrainResult:
    """What a finished (or resumed and finished) run produced."""

    run_dir: Path
    steps: int
    selected_step: int | None
    validation_exact_match: float | None
    resumed_from: int | None


@dataclass
class PreparedRun:
    """A run ready to step: its plan (`plan.RunPlan`), what the loop built from it (model, optimizer and schedule on
    the accelerator), its `run.json` record, and where training stands."""

    plan: RunPlan
    accelerator: Any
    network: Any
    optimizer: Any
    scheduler: Any
    record: dict[str, Any]
    state: TrainerState
    resumed_from: int | None
    started: float  # perf_counter() less the seconds a killed run already spent: its time budget goes on counting
    window: list[float] = field(default_factory=list)  # the step losses since the last log line
    logged_loss: tuple[float, int] | None = None  # the last log line's loss and how many steps it is the mean of
    validation_seconds: float = 0.0  # the last validation's duration: a time budget stops early enough to fit one more
    checkpointed_step: int | None = None  # the step of the last checkpoint a validation saved in this process
    stopped_by: str = "step budget"

    # What the loop reads of the plan, by the names it has always used.
    @property
    def out(self) -> Path:
        return self.plan.out

    @property
    def options(self) -> RunOptions:
        return self.plan.options

    @property
    def recipe(self) -> TrainingRecipe:
        return self.plan.recipe

    @property
    def budget(self) -> int:
        return self.plan.budget

    @property
    def eval_every(self) -> int:
        return self.plan.eval_every

    @property
    def tokenizer(self) -> Any:
        return self.plan.tokenizer

    @property
    def train_encoded(self) -> EncodedSplit:
        return self.plan.train_encoded

    @property
    def token_batches(self) -> TokenBatches | None:
        return self.plan.token_batches

    @property
    def validation_sources(self) -> list[str]:
        return [row["source"] for row in self.plan.validation_rows]

    @property
    def validation_targets(self) -> list[str]:
        return [row["target"] for row in self.plan.validation_rows]
