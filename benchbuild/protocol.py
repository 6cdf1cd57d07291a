"""Like with like: whether the runs of a report row were made as the paper's number was, and why not in words.

A paper's number (a catalogue `[[reported]]` row) is set beside ours only when every run of the row trained with the
recipe the row names, for that recipe's whole step budget on this benchmark (not cut by `--max-steps`,
`--max-minutes` or a `--set steps=...`), with no other recipe key changed, kept the checkpoint the recipe's selection
rule keeps, and was scored on the split the paper scores; and when the row has as many runs as the paper's statistic
summarises. Anything else is a difference, said as a reader needs it: "trained 700 of 14,327 steps", "recipe scan,
the paper's number is scan_000's", "selected by validation exact match, the paper takes the last checkpoint", "1 seed,
the paper reports the mean of 3". The report then shows the paper's number apart from ours.

Architecture keys a run sets (`architecture_overrides`: a sweep's grid point) are not judged here: a grid paper such
as Chaabouni et al. (2021) reports its best configuration without naming it, and the report's grid tables say which
configuration they picked and how (`grid`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from benchbuild.errors import BenchbuildError
from benchbuild.papers import selection_rule

if TYPE_CHECKING:
    from benchbuild.zoo.recipe import TrainingRecipe

# Recipe keys a run may set differently without changing the model the paper's protocol gives: the budget and the
# selection rule (judged apart, in words of their own), how a batch's gradient is computed (the same update in
# parts: `micro_batches`, `length_groups`), the evaluation batch, and what is measured after training.
_JUDGED_APART = ("steps", "epochs", "select", "validate_by")
_SAME_UPDATE = ("micro_batches", "length_groups", "eval_batch_size", "score_train")
# Under `last` no validation score picks anything, and no train row is held out: how often and on what a run
# validates changes nothing it keeps.
_VALIDATION_ONLY = ("eval_every", "eval_every_epochs", "ties", "held_out", "held_out_from")
_METRIC_WORDS = {"exact_match": "exact match", "bleu": "BLEU", "loss": "loss"}


@dataclass(frozen=True)
class RunProtocol:
    """How one run was trained, as its `run.json` records it."""

    seed: Any
    recipe_name: str | None  # `recipe_family`: the catalogue recipe it trained with
    recipe: Mapping[str, Any] | None  # that recipe as the run resolved it, its `--set` overrides applied
    steps_done: int | None
    stopped_by: str | None  # "step budget", "time budget", "settled" (`training.bookkeeping.settled`)
    select: str  # `selection_rule`: "last", "best_validation by bleu"
    split_rows: Mapping[str, int]  # rows per split of the benchmark it trained on
    validation: str | None  # the split it validated on, or how it held rows out
    token_batches: int | None = None  # `token_batches_per_epoch`: the token batches of an epoch, where it had them

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> RunProtocol:
        benchmark = record.get("benchmark")
        splits = benchmark.get("splits", {}) if isinstance(benchmark, dict) else {}
        return cls(record.get("seed"), record.get("recipe_family"), record.get("recipe"), record.get("steps_done"),
                   record.get("stopped_by"), selection_rule(record),
                   {name: int(split["rows"]) for name, split in splits.items()
                    if isinstance(split, dict) and "rows" in split},
                   record.get("validation"), record.get("token_batches_per_epoch"))


@dataclass(frozen=True)
class PaperProtocol:
    """How the paper made its number, as the catalogue trains it: the `[[reported]]` row (its statistic and runs,
    its benchmark) and the entry's recipe it names, resolved (None where the row names none, or the entry lacks it:
    `problem` says which)."""

    reported: Mapping[str, Any]
    recipe: TrainingRecipe | None
    problem: str = ""

    @classmethod
    def of(cls, recipes: Mapping[str, Mapping[str, Any]], reported: Mapping[str, Any],
           source: str = "the catalogue entry") -> PaperProtocol:
        """The protocol of `reported`, its recipe resolved from an entry's `recipes` (`ModelEntry.recipes`)."""
        from benchbuild.zoo.recipe import resolve_recipe

        name = reported.get("recipe")
        if not name:
            return cls(reported, None, "the catalogue names no recipe for the paper's number")
        try:
            return cls(reported, resolve_recipe(recipes, str(name), source=source))
        except BenchbuildError:
            return cls(reported, None, f"the catalogue has no recipe {name} to train as the paper did")

    @property
    def recipe_name(self) -> str:
        return str(self.reported.get("recipe") or "")

    @property
    def select(self) -> str:
        return "" if self.recipe is None else selection_rule(self.recipe.to_dict())

    def split(self, benchmark: str) -> str:
        """The split the paper scores: the one the reported benchmark names after its family (`react/cg_test`) when
        that is not the benchmark's own name (`scan/simple`), else `test`."""
        _, _, rest = str(self.reported.get("benchmark", "")).partition("/")
        return rest if rest and rest != benchmark.split("/")[-1] else "test"

    def steps_on(self, run: RunProtocol) -> int | None:
        """The paper's recipe's step budget on the benchmark `run` trained on (`epochs` count that benchmark's
        rows, or the run's token batches); None when the run's record lacks what an epoch budget needs."""
        from benchbuild.zoo.recipe import planned_steps

        if self.recipe is None:
            return None
        if self.recipe.epochs is None:
            return self.recipe.steps
        if "train" not in run.split_rows or (self.recipe.batch_tokens is not None and run.token_batches is None):
            return None
        validation = run.validation if run.validation in run.split_rows else None
        return planned_steps(self.recipe, run.split_rows, validation, run.token_batches)


@dataclass
class Comparison:
    """What differs between a row's runs and the paper's protocol, in words, each once; none: like with like."""

    differences: list[str] = field(default_factory=list)

    @property
    def comparable(self) -> bool:
        return not self.differences

    @property
    def words(self) -> str:
        return "; ".join(self.differences)


def compare(paper: PaperProtocol, runs: Sequence[RunProtocol], benchmark: str, split: str,
            train_exact_matches: Sequence[float | None] = ()) -> Comparison:
    """The differences between `runs` (one report row: their scores on `split` of `benchmark`) and `paper`. A
    difference only some runs have names their seeds."""
    seen: dict[str, list[Any]] = {}
    for run in runs:
        for difference in run_differences(paper, run):
            seen.setdefault(difference, []).append(run.seed)
    differences = [text if len(seeds) == len(runs) else f"{text} ({_seeds(seeds)})" for text, seeds in seen.items()]
    if split != paper.split(benchmark):
        differences.append(f"scored on {split}, the paper's number is on {paper.split(benchmark)}")
    differences += statistic_differences(paper.reported, len(runs), train_exact_matches)
    return Comparison(differences)


def run_differences(paper: PaperProtocol, run: RunProtocol) -> list[str]:
    """How one run's training differs from the paper's recipe: its name, the steps trained, recipe keys it changed,
    the checkpoint it keeps."""
    if paper.recipe is None:
        return [paper.problem]
    differences = []
    if run.recipe_name != paper.recipe_name:
        differences.append(f"recipe {run.recipe_name}, the paper's number is {paper.recipe_name}'s"
                           if run.recipe_name else f"run.json names no recipe, the paper's number is "
                           f"{paper.recipe_name}'s")
    budget = paper.steps_on(run)
    if run.steps_done is None or budget is None:
        differences.append("run.json does not record the steps trained" if run.steps_done is None else
                           f"trained {run.steps_done:,} steps; the paper's recipe budget on this benchmark is not "
                           "known from run.json")
    elif run.steps_done != budget and not (run.stopped_by == "settled" and run.steps_done < budget):
        differences.append(_budget_words(run, budget))  # a settled run kept what the whole budget would have
    if run.recipe_name == paper.recipe_name and run.recipe is not None:
        changed = changed_keys(run.recipe, paper.recipe.to_dict())
        if changed:
            differences.append("recipe keys changed: " + ", ".join(changed))
    if run.select != paper.select:
        differences.append(f"{_selection_words(run.select)}, the paper {_selection_words(paper.select, paper=True)}")
    return differences


def changed_keys(ours: Mapping[str, Any], recipe: Mapping[str, Any]) -> list[str]:
    """"learning_rate 0.01 (the recipe's 0.001)" for each key a run's resolved recipe sets otherwise than the
    catalogue's recipe, leaving out what changes nothing the run keeps."""
    ignored = {*_JUDGED_APART, *_SAME_UPDATE, *(_VALIDATION_ONLY if recipe.get("select") == "last" else ())}
    return [f"{key} {_value(ours.get(key))} (the recipe's {_value(recipe.get(key))})"
            for key in sorted(set(ours) | set(recipe)) if key not in ignored and ours.get(key) != recipe.get(key)]


def statistic_differences(reported: Mapping[str, Any], runs: int,
                          train_exact_matches: Sequence[float | None] = ()) -> list[str]:
    """Fewer runs than the paper's statistic summarises ("1 seed, the paper reports the median of 25"); runs whose
    train exact match the paper's exclusion needs but run.json lacks."""
    differences = []
    statistic, wanted = reported.get("statistic", "mean"), reported.get("runs")
    if statistic != "single" and wanted is not None and runs < wanted:
        differences.append(f"{runs} seed{'' if runs == 1 else 's'}, the paper reports the {statistic} of {wanted}")
    threshold = reported.get("min_train_exact_match")
    unrecorded = sum(value is None for value in train_exact_matches)
    if threshold is not None and unrecorded:
        differences.append(f"train exact match not recorded for {unrecorded} run{'' if unrecorded == 1 else 's'}, "
                           f"the paper leaves out runs at or under {threshold:g}%")
    return differences


def _budget_words(run: RunProtocol, budget: int) -> str:
    if run.steps_done > budget:
        return f"trained {run.steps_done:,} steps, the paper's recipe {budget:,}"
    if run.stopped_by == "time budget":
        return f"stopped by its time budget after {run.steps_done:,} of {budget:,} steps"
    return f"trained {run.steps_done:,} of {budget:,} steps"


def _selection_words(rule: str, paper: bool = False) -> str:
    """A run's selection rule, "kept the last checkpoint" or "selected by validation BLEU"; the paper's, "takes the
    last checkpoint" or "selects by validation BLEU"."""
    if rule == "last":
        return "takes the last checkpoint" if paper else "kept the last checkpoint"
    metric = rule.partition(" by ")[2]
    return f"{'selects' if paper else 'selected'} by validation {_METRIC_WORDS.get(metric, metric)}"


def _value(value: Any) -> str:
    return "unset" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _seeds(seeds: Sequence[Any]) -> str:
    return f"seed{'' if len(seeds) == 1 else 's'} {', '.join(map(str, seeds))}"
