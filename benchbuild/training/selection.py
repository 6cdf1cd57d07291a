"""Which checkpoint a run keeps: the selection rule applied to each validation score (no torch here, so the sweep's
status and the report read scores by the same rule)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importing benchbuild.zoo imports torch and transformers (seconds)
    from benchbuild.zoo.recipe import Selection, Ties


def lower_is_better(metric: str) -> bool:
    """Whether a smaller value of `validate_by` metric is the better checkpoint (the loss) or a larger one."""
    return metric == "loss"


def selects(select: Selection, value: float, selected: float | None, metric: str = "exact_match",
            ties: Ties = "latest") -> bool:
    """Whether a checkpoint just validated at `value` of `metric` replaces the one selected so far (validated at
    `selected`): under `last` always; under `best_validation` when it is better (higher, or lower for the loss), or
    as good and `ties` is `latest` (a tie goes to the later step; `earliest` keeps the first step with the best
    score)."""
    if select == "last" or selected is None:
        return True
    if value == selected:
        return ties == "latest"
    return value < selected if lower_is_better(metric) else value > selected


def better(metric: str, first: float, second: float) -> float:
    """The better of two validation scores by `metric`."""
    return min(first, second) if lower_is_better(metric) else max(first, second)
