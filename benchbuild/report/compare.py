"""`report --compare A B`: two models' runs on the same benchmark splits, paired by seed, tested against each other
over the test rows they both evaluated (McNemar's exact test for exact match, sacrebleu's paired bootstrap for
BLEU) and over seeds (Welch's t-test); the statistics are `benchbuild.evaluation.uncertainty`'s."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from benchbuild.errors import BenchbuildError
from benchbuild.evaluation.uncertainty import (SIGNIFICANCE, DifferenceTest, mcnemar_exact, paired_bootstrap_bleu,
                                               welch_over_seeds)
from benchbuild.report.runs import Evaluation, RunSummary


@dataclass(frozen=True)
class RunPair:
    """The tests over the rows of one benchmark split that a run of A and a run of B both evaluated."""

    seed_a: Any
    seed_b: Any
    rows: int
    tests: tuple[DifferenceTest, ...]
    missing: str = ""  # why there is no test over rows (no predictions.jsonl)


@dataclass(frozen=True)
class Comparison:
    """A against B on one benchmark split: per pair of runs a test over rows, and per metric a test over seeds."""

    benchmark: str
    split: str
    pairing: str  # how runs were paired: "by seed" or "in seed order"
    run_pairs: tuple[RunPair, ...]
    seed_tests: tuple[DifferenceTest, ...]

    def lines(self) -> list[str]:
        text = [f"{self.benchmark} ({self.split}):"]
        for pair in self.run_pairs:
            text.append(f"  over test rows, A seed {pair.seed_a} vs B seed {pair.seed_b}"
                        + (f" ({pair.rows} rows):" if not pair.missing else f": {pair.missing}"))
            text += [f"    {test.line()}" for test in pair.tests]
        text.append(f"  over seeds (runs paired {self.pairing} above):")
        text += [f"    {test.line()}" for test in self.seed_tests]
        return text


def run_group(folder: str | Path) -> list[Path]:
    """The run folders a `--compare` argument names: the folder itself when it holds `run.json`, else every run
    folder below it (a sweep's seeds), in path order."""
    from benchbuild.run_folder import RUN_FILE

    folder = Path(folder)
    if (folder / RUN_FILE).is_file():
        return [folder]
    found = sorted(path.parent for path in folder.rglob(RUN_FILE)) if folder.is_dir() else []
    if not found:
        raise BenchbuildError(f"{folder} is neither a run folder nor a folder of runs (no {RUN_FILE} in or below "
                              "it): give a run folder `benchbuild train` wrote, or the folder of a model's seeds")
    return found


def compare_runs(a_runs: Sequence[RunSummary], b_runs: Sequence[RunSummary]) -> list[Comparison]:
    """A against B on every benchmark split both evaluated: runs paired by seed where the seeds match (else in seed
    order), each pair tested over the rows (McNemar's exact test for exact match, sacrebleu's paired bootstrap for
    BLEU) from their predictions.jsonl; and every metric both report tested over seeds (Welch)."""
    from benchbuild.report.metric_values import headline_metrics

    a_by_split, b_by_split = _evaluations_by_split(a_runs), _evaluations_by_split(b_runs)
    shared = sorted(set(a_by_split) & set(b_by_split))
    if not shared:
        raise BenchbuildError("A and B evaluated no benchmark split in common: A on "
                              f"{_splits_in_words(a_by_split)}, B on {_splits_in_words(b_by_split)}")
    comparisons = []
    for benchmark, split in shared:
        a_found, b_found = a_by_split[(benchmark, split)], b_by_split[(benchmark, split)]
        common = sorted({seed for seed, _ in a_found} & {seed for seed, _ in b_found}, key=_seed_order)
        if common:
            pairing = "by seed"
            pairs = [(dict(a_found)[seed], dict(b_found)[seed], seed, seed) for seed in common]
        else:
            pairing = "in seed order"
            pairs = [(a, b, seed_a, seed_b) for (seed_a, a), (seed_b, b) in zip(a_found, b_found)]
        run_pairs = tuple(_run_pair(a, b, seed_a, seed_b) for a, b, seed_a, seed_b in pairs)
        a_numbers = [headline_metrics(evaluation.metrics) for _, evaluation in a_found]
        b_numbers = [headline_metrics(evaluation.metrics) for _, evaluation in b_found]
        metrics = [metric for metric in a_numbers[0]
                   if all(metric in numbers for numbers in (*a_numbers, *b_numbers))]
        seed_tests = tuple(welch_over_seeds(_metric_name(metric), [numbers[metric] for numbers in a_numbers],
                                            [numbers[metric] for numbers in b_numbers]) for metric in metrics)
        comparisons.append(Comparison(benchmark, split, pairing, run_pairs, seed_tests))
    return comparisons


def comparison_text(a_name: str, a_runs: Sequence[RunSummary], b_name: str, b_runs: Sequence[RunSummary],
                    comparisons: Sequence[Comparison]) -> str:
    """What `report --compare` prints: who A and B are, each comparison, and how to read the p-values."""
    def who(name: str, runs: Sequence[RunSummary]) -> str:
        models = ", ".join(dict.fromkeys(run.model for run in runs))
        seeds = ", ".join(str(run.seed) for run in runs)
        plural = "s" if len(runs) != 1 else ""
        return f"{name}: {models}, {len(runs)} run{plural} (seed{plural} {seeds})"

    lines = [who("A = " + a_name, a_runs), who("B = " + b_name, b_runs)]
    for comparison in comparisons:
        lines += comparison.lines()
    lines.append(f"p-values are two-sided and not corrected for multiple comparisons; * marks p < {SIGNIFICANCE:g} "
                 f"(significant at the {SIGNIFICANCE:.0%} level).")
    return "\n".join(lines) + "\n"


def _evaluations_by_split(runs: Sequence[RunSummary]) -> dict[tuple[str, str], list[tuple[Any, Evaluation]]]:
    """(benchmark, split) -> [(seed, evaluation)] in seed order; a run's first evaluation of a split counts."""
    grouped: dict[tuple[str, str], dict[Any, Evaluation]] = {}
    for run in runs:
        for evaluation in run.evaluations:
            grouped.setdefault((evaluation.benchmark, evaluation.split), {}).setdefault(run.seed, evaluation)
    return {key: sorted(found.items(), key=lambda item: _seed_order(item[0])) for key, found in grouped.items()}


def _seed_order(seed: Any) -> tuple:
    """Numbers by value (2 before 10), then anything else by its text."""
    return (0, seed, "") if isinstance(seed, (int, float)) else (1, 0, str(seed))


def _run_pair(a: Evaluation, b: Evaluation, seed_a: Any, seed_b: Any) -> RunPair:
    from benchbuild.metrics import normalize_whitespace

    a_records, b_records = a.predictions(), b.predictions()
    if not a_records or not b_records:
        without = a if not a_records else b
        return RunPair(seed_a, seed_b, 0, (), f"{without.metrics_file.parent} has no predictions.jsonl: no test over "
                                                "rows")
    b_records = _aligned(a_records, b_records, a, b)
    references = [record["target"] for record in a_records]
    a_predictions = [record["prediction"] for record in a_records]
    b_predictions = [record["prediction"] for record in b_records]
    a_correct = [normalize_whitespace(p) == normalize_whitespace(r) for p, r in zip(a_predictions, references)]
    b_correct = [normalize_whitespace(p) == normalize_whitespace(r) for p, r in zip(b_predictions, references)]
    return RunPair(seed_a, seed_b, len(references), (
        mcnemar_exact(a_correct, b_correct),
        paired_bootstrap_bleu(a_predictions, b_predictions, references)))


def _aligned(a_records: list[dict[str, Any]], b_records: list[dict[str, Any]], a: Evaluation,
             b: Evaluation) -> list[dict[str, Any]]:
    """B's records in A's row order, matched by `id` (by position where the rows have none); an error naming both
    files unless they hold the same rows with the same references."""
    where = f"{a.predictions_file} and {b.predictions_file}"
    a_ids, b_ids = [record.get("id") for record in a_records], [record.get("id") for record in b_records]
    if None not in a_ids and None not in b_ids and len(set(a_ids)) == len(a_ids):
        if sorted(map(str, a_ids)) != sorted(map(str, b_ids)):
            raise BenchbuildError(f"{where} are not of the same rows (their ids differ): a paired test needs both "
                                  "models' predictions of the same split")
        by_id = {str(record["id"]): record for record in b_records}
        b_records = [by_id[str(identifier)] for identifier in a_ids]
    elif len(a_records) != len(b_records):
        raise BenchbuildError(f"{where} hold {len(a_records)} and {len(b_records)} rows: a paired test needs both "
                              "models' predictions of the same split")
    if any(x["target"] != y["target"] for x, y in zip(a_records, b_records)):
        raise BenchbuildError(f"{where} give different references for the same row: they are not of the same split")
    return b_records


def _splits_in_words(by_split: dict[tuple[str, str], Any]) -> str:
    return ", ".join(f"{benchmark} ({split})" for benchmark, split in sorted(by_split)) or "nothing"


def _metric_name(metric: str) -> str:
    from benchbuild.report.headline import metric_name

    return metric_name(metric)
