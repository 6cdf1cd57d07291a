"""The headline numbers of each evaluated benchmark split: the metrics a paper reports a number for there, else
exact match (SCAN) or BLEU (translation). The LaTeX table and the results figure show these; the HTML leaderboard
shows every metric."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from benchbuild.evaluation.paper_bleu import WAYS
from benchbuild.report.rows import ReportRow

METRIC_NAMES = {"exact_match": "exact match", "bleu": "BLEU",
                **{way.metric: way.label for way in WAYS.values()},  # BLEU as a paper computed it
                "chrf": "chrF", "comp": "COMP", "order_accuracy": "order accuracy",
                "cter_instance": "CTER (instance)", "cter_aggregate": "CTER (aggregate)"}


@dataclass(frozen=True, order=True)
class Column:
    """A metric of one benchmark split: one column group of the LaTeX table, one panel of the results figure."""

    benchmark: str
    split: str
    metric: str

    @classmethod
    def of(cls, row: ReportRow) -> Column:
        return cls(row.benchmark, row.split, row.metric)

    @property
    def metric_name(self) -> str:
        return metric_name(self.metric)


def metric_name(metric: str) -> str:
    return METRIC_NAMES.get(metric, metric)


def metric_rank(metric: str) -> tuple[int, str]:
    """Sort key: the metrics of METRIC_NAMES in that order, any other after them by name."""
    names = list(METRIC_NAMES)
    return (names.index(metric), "") if metric in names else (len(names), metric)


def primary_metric(benchmark: str) -> str:
    return "exact_match" if benchmark.split("/")[0] == "scan" else "bleu"


def headline_columns(rows: Sequence[ReportRow]) -> list[Column]:
    """Per benchmark split: its primary metric and every metric with a paper number, in METRIC_NAMES order."""
    by_split: dict[tuple[str, str], dict[str, bool]] = {}
    for row in rows:
        metrics = by_split.setdefault((row.benchmark, row.split), {})
        metrics[row.metric] = metrics.get(row.metric, False) or row.paper is not None
    columns = []
    for (benchmark, split), metrics in sorted(by_split.items()):
        chosen = {metric for metric, reported in metrics.items() if reported}
        if primary_metric(benchmark) in metrics:
            chosen.add(primary_metric(benchmark))
        if not chosen:
            chosen.add(min(metrics, key=metric_rank))
        columns += [Column(benchmark, split, metric) for metric in sorted(chosen, key=metric_rank)]
    return columns


def cell_index(rows: Iterable[ReportRow]) -> dict[tuple[str, Column], ReportRow]:
    """Each row under its (model, column)."""
    return {(row.model, Column.of(row)): row for row in rows}
