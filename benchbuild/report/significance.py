"""Each model against the best of its column: per benchmark split and headline metric with two or more models, the row
with the best mean and, for every other row, the test `benchbuild report --compare BEST MODEL` prints for that metric
(`evaluation.uncertainty`: McNemar's exact test or sacrebleu's paired bootstrap over the test rows of the runs it
pairs by seed, Welch's t-test over seeds), so every format can mark the rows that differ significantly from the best
(`MARK`) and say where no test could be run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from benchbuild.errors import BenchbuildError
from benchbuild.evaluation.uncertainty import SIGNIFICANCE, welch_over_seeds
from benchbuild.report.compare import RunPair, compare_runs
from benchbuild.report.headline import Column, headline_columns, metric_name
from benchbuild.report.rows import MARK, AgainstBest, ReportRow

if TYPE_CHECKING:
    from benchbuild.report.runs import RunSummary

LOWER_IS_BETTER = frozenset({"cter_instance", "cter_aggregate"})  # error rates: their best mean is the lowest
ROW_TESTED = frozenset({"exact_match", "bleu"})  # the metrics `compare_runs` tests over the test rows
LEGEND = (f"{MARK}: significantly different from the best mean of its column (the highest; the lowest for CTER) at "
          f"α = {SIGNIFICANCE:g}, two-sided p < {SIGNIFICANCE:g} in the test `benchbuild report --compare BEST MODEL` "
          "prints: Welch's t-test over seeds where both models have two or more, else McNemar's exact test (exact "
          "match) or sacrebleu's paired bootstrap resampling (BLEU) over the test rows of their runs paired by seed; "
          "not corrected for multiple comparisons.")


def missing_note(row: ReportRow) -> str | None:
    """A table note for a row whose test against the best could not be run (None for any other row)."""
    against = row.against_best
    if against is None or not against.missing:
        return None
    return (f"{row.model} on {row.benchmark} ({row.split}), {metric_name(row.metric)}: no test against the best mean "
            f"({against.best}): {against.missing}.")


def compare_with_best(rows: Sequence[ReportRow]) -> None:
    """Set `against_best` on every row of a headline column (`headline_columns`) that two or more models share: the
    best row is the first with the best mean; every other row gets its test against it."""
    headline = set(headline_columns(rows))
    columns: dict[Column, list[ReportRow]] = {}
    for row in rows:
        if Column.of(row) in headline:
            columns.setdefault(Column.of(row), []).append(row)
    paired: dict[tuple[str, str, str, str], RunPair | str] = {}
    for column, found in columns.items():
        if len(found) < 2:
            continue
        sign = 1.0 if column.metric in LOWER_IS_BETTER else -1.0
        best = min(found, key=lambda row: sign * row.mean)
        for row in found:
            row.against_best = AgainstBest(best.model) if row is best else _against(best, row, paired)


def _against(best: ReportRow, row: ReportRow, paired: dict[tuple[str, str, str, str], RunPair | str]) -> AgainstBest:
    """Welch's t-test over seeds where both rows have two or more; else the test over the test rows of the one pair
    of runs `compare_runs` makes (one side has a single seed), computed once per pair of models and split."""
    name = metric_name(row.metric)
    if len(best.values) >= 2 and len(row.values) >= 2:
        test = welch_over_seeds(name, best.values, row.values)
        if test.p_value is None:
            return AgainstBest(best.model, missing=f"{test.test} is undefined: neither model's number varies over its "
                                                   "seeds")
        return AgainstBest(best.model, test, f"{len(best.values)} seeds of {best.model}, {len(row.values)} of "
                                             f"{row.model}")
    if row.metric not in ROW_TESTED:
        return AgainstBest(best.model, missing=f"{name} has no test over the test rows, and a test over seeds needs "
                                               f"two or more seeds of each model ({best.model}: {len(best.values)}, "
                                               f"{row.model}: {len(row.values)})")
    key = (best.model, row.model, row.benchmark, row.split)
    if key not in paired:
        paired[key] = _run_pair(best, row)
    pair = paired[key]
    if isinstance(pair, str):
        return AgainstBest(best.model, missing=pair)
    test = next(test for test in pair.tests if test.metric == name)
    return AgainstBest(best.model, test, f"{pair.rows} test rows, seed {pair.seed_a} of {best.model} against seed "
                                         f"{pair.seed_b} of {row.model}")


def _run_pair(best: ReportRow, row: ReportRow) -> RunPair | str:
    """`compare_runs`' tests over the rows of the runs it pairs, or why there are none (no predictions.jsonl, not the
    same rows)."""
    try:
        comparison, = compare_runs(_runs(best), _runs(row))
    except BenchbuildError as error:
        return str(error)
    pair = comparison.run_pairs[0]
    return pair.missing or pair


def _runs(row: ReportRow) -> list[RunSummary]:
    """The row's runs as `compare_runs` reads them: each with its model, its seed and its evaluation of the row's
    split."""
    from benchbuild.report.runs import Evaluation, RunSummary
    from benchbuild.run_folder import read_metrics

    return [RunSummary(path.parent, {"model": row.model, "seed": seed}, (), (Evaluation(path, read_metrics(path)),))
            for seed, path in zip(row.seeds, row.metrics_files, strict=True)]
