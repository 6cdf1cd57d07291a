"""Hyperparameter grids in a report: the runs of one model grouped by configuration (the architecture keys their
`run.json` records as `architecture_overrides`), every configuration's mean over seeds, and the one a stated rule
picks per model × benchmark split; the report's main tables show the picked configuration's numbers beside the
paper's, and these tables name it and list the others."""

from __future__ import annotations

import csv
import io
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Mapping, Sequence

from benchbuild.papers import PAPERS
from benchbuild.report.csv_table import COLUMNS, csv_fields
from benchbuild.report.headline import metric_name, metric_rank, primary_metric
from benchbuild.report.markdown import interval_text, table_row, text
from benchbuild.report.rows import ReportRow, build_report

if TYPE_CHECKING:
    from benchbuild.report.runs import RunSummary

GridRule = Literal["best_mean"]
DEFAULT_RULE: GridRule = "best_mean"
RULES: dict[str, str] = {
    "best_mean": "per model, benchmark and split, the configuration with the highest mean over seeds of the "
                 "split's headline metric (exact match on SCAN, else BLEU) on that split itself (a sweep's [eval] "
                 "split: test), a tie going to the first configuration in the listed order. A paper that reports "
                 "\"the best hyperparameter configuration\" without saying how it was picked ("
                 f"{PAPERS['000'].in_text}, Table 3) is read "
                 "this way: this is our reading, not a rule the paper states",
}
DEFAULT_CONFIGURATION = "default"  # the label of runs that set no architecture key: the catalogue entry's own


def configuration_label(architecture: Mapping[str, Any]) -> str:
    """`d_ff-256_d_model-128_num_heads-4`: every architecture key with its value, keys in sorted order, joined by `_`
    (a sweep's configuration folder, so it depends on the values alone); "" for none."""
    return "_".join(f"{key}-{_value_text(architecture[key])}" for key in sorted(architecture))


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def configuration_order(architecture: Mapping[str, Any]) -> tuple:
    """Sort key of configurations: key by key, numbers by value (4 before 16), other values by their text."""
    return tuple((key, (0, value, "") if isinstance(value, (int, float)) and not isinstance(value, bool)
                  else (1, 0, _value_text(value))) for key, value in sorted(architecture.items()))


@dataclass
class Configuration:
    """The runs of one model with one set of architecture keys, and their rows (mean ± s.e. over seeds)."""

    model: str
    architecture: dict[str, Any]
    folders: list[Path]
    rows: list[ReportRow]

    @property
    def label(self) -> str:
        return configuration_label(self.architecture) or DEFAULT_CONFIGURATION


@dataclass
class GridCell:
    """One model × benchmark split of a grid: every configuration evaluated there, in order, the metric the rule
    compares them by, and the one it picked."""

    model: str
    benchmark: str
    split: str
    metric: str
    configurations: list[Configuration]
    best: Configuration

    @property
    def spread(self) -> str:
        """How much of the pick's mean is selection (issue #43: 000's numbers are the best of a grid, picked on the
        test set): the best, the median and the worst of the configurations' means; "" for one configuration."""
        means = sorted((self.row(configuration).mean for configuration in self.configurations), reverse=True)
        if len(means) < 2:
            return ""
        return (f"best of {len(means)} configurations' means {means[0]:.2f}, their median "
                f"{statistics.median(means):.2f}, the worst {means[-1]:.2f}")

    def row(self, configuration: Configuration, metric: str | None = None) -> ReportRow:
        """`configuration`'s row of this cell, for `metric` (default: the one the rule compares)."""
        metric = metric or self.metric
        return next(row for row in configuration.rows if (row.benchmark, row.split, row.metric)
                    == (self.benchmark, self.split, metric))


@dataclass
class Grid:
    """A report's grid: the rule, every cell, the rows of the picked configurations (what the main tables show),
    the run folders of those configurations, and notes on what the comparison could not do."""

    rule: str
    cells: list[GridCell]
    rows: list[ReportRow]
    selected: set[Path]
    notes: list[str] = field(default_factory=list)

    @property
    def searched(self) -> list[GridCell]:
        """The cells with a grid: more than one configuration, or one that sets architecture keys."""
        return [cell for cell in self.cells if len(cell.configurations) > 1 or cell.configurations[0].architecture]

    @property
    def rule_text(self) -> str:
        return f"Grid selection, rule `{self.rule}`: {RULES[self.rule]}."


def grid_report(runs: Sequence[RunSummary], rule: str = DEFAULT_RULE) -> Grid | None:
    """The grid of evaluated `runs` picked by `rule`; None when no run sets an architecture key (a report as
    before: one configuration per model)."""
    if rule not in RULES:
        raise ValueError(f"unknown grid selection rule {rule!r} (known: {', '.join(RULES)})")
    if not any(run.record.get("architecture_overrides") for run in runs):
        return None
    grouped: dict[tuple[str, str], Configuration] = {}
    for run in runs:
        architecture = dict(run.record.get("architecture_overrides") or {})
        key = (run.model, json.dumps(architecture, sort_keys=True))
        grouped.setdefault(key, Configuration(run.model, architecture, [], [])).folders.append(run.folder)
    configurations = sorted(grouped.values(), key=lambda c: (c.model, configuration_order(c.architecture)))
    for configuration in configurations:
        configuration.rows = build_report(configuration.folders)
    cells, rows, selected, notes = [], [], set(), []
    splits = sorted({(c.model, row.benchmark, row.split) for c in configurations for row in c.rows})
    for model, benchmark, split in splits:
        evaluated = [c for c in configurations if c.model == model
                     and any((row.benchmark, row.split) == (benchmark, split) for row in c.rows)]
        metric = _compared_metric(benchmark, {row.metric for c in evaluated for row in c.rows
                                              if (row.benchmark, row.split) == (benchmark, split)})
        compared = [c for c in evaluated if any((row.benchmark, row.split, row.metric) == (benchmark, split, metric)
                                                for row in c.rows)]
        cell = GridCell(model, benchmark, split, metric, compared, compared[0])
        cell.best = max(compared, key=lambda c: (cell.row(c).mean, -compared.index(c)))
        cells.append(cell)
        rows += [row for row in cell.best.rows if (row.benchmark, row.split) == (benchmark, split)]
        selected.update(cell.best.folders)
        counts = sorted({len(cell.row(c).values) for c in compared})
        if len(counts) > 1:
            notes.append(f"{model} on {benchmark} ({split}): its configurations have {counts[0]} to {counts[-1]} "
                         "evaluated runs: the grid rule compared means over unequal numbers of seeds.")
    rows.sort(key=lambda row: (row.model, row.benchmark, row.split, row.metric))
    return Grid(rule, cells, rows, selected, notes)


def _compared_metric(benchmark: str, metrics: set[str]) -> str:
    """The metric the rule compares on a benchmark: its primary one (exact match on SCAN, else BLEU) where the runs
    have it, else the first headline metric they have."""
    primary = primary_metric(benchmark)
    return primary if primary in metrics else min(metrics, key=metric_rank)


def _mean(row: ReportRow) -> str:
    return f"{row.mean:.2f}" + ("" if row.standard_error is None else f" ± {row.standard_error:.2f}")


def _bounds(row: ReportRow) -> str:
    """`[low, high]`, the 95% confidence interval of the row's mean (`ReportRow.interval`); "" without one."""
    found = row.interval
    return "" if found is None else f"[{found[0][0]:.2f}, {found[0][1]:.2f}]"


def _seeds(row: ReportRow) -> str:
    return f"{len(row.values)} ({', '.join(map(str, row.seeds))})"


def _paper(row: ReportRow) -> str:
    """The paper's number where the picked runs were made as it was; else what differs (the report's main tables
    list the number apart); "" without one."""
    if row.paper is None:
        return ""
    return f"{row.paper:g}" if row.comparable else f"not compared: {row.comparison.words}"


def markdown_grid(grid: Grid) -> str:
    """Two Markdown tables: the picked configuration of each model × benchmark split beside the paper's number,
    then every configuration's mean (the picked one marked), under the rule in words."""
    lines = ["", "## Hyperparameter grid", "", text(grid.rule_text), "",
             "| model | benchmark | split | metric | best configuration | runs (seeds) | ours: mean ± s.e. | "
             "ours: 95% CI | paper | source | selection spread |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for cell in grid.searched:
        row = cell.row(cell.best)
        lines.append(table_row([cell.model, cell.benchmark, cell.split, metric_name(cell.metric), cell.best.label,
                                _seeds(row), _mean(row), interval_text(row), _paper(row),
                                row.source if row.paper is not None else "", cell.spread]))
    lines += ["", "Every configuration (the rule's pick in bold):", "",
              "| model | benchmark | split | metric | configuration | runs (seeds) | mean ± s.e. | 95% CI |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for cell in grid.searched:
        for configuration in cell.configurations:
            row = cell.row(configuration)
            mark = "**" if configuration is cell.best else ""
            lines.append(table_row([cell.model, cell.benchmark, cell.split, metric_name(cell.metric),
                                    f"{mark}{configuration.label}{mark}", _seeds(row), f"{mark}{_mean(row)}{mark}",
                                    interval_text(row)]))
    return "\n".join(lines) + "\n"


GRID_COLUMNS = (*COLUMNS, "configuration", "selected_by")


def csv_grid(grid: Grid) -> str:
    """The report's CSV with one row per configuration × metric: the plain report's columns, then the
    configuration and `selected_by` (the rule's name on the rows of the configuration it picked, else empty)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(GRID_COLUMNS)
    for cell in grid.cells:
        for configuration in cell.configurations:
            for row in configuration.rows:
                if (row.benchmark, row.split) != (cell.benchmark, cell.split):
                    continue
                writer.writerow([*csv_fields(row), configuration.label,
                                 grid.rule if configuration is cell.best else ""])
    return buffer.getvalue()


def latex_grid(grid: Grid) -> str:
    """A second booktabs `tabular`: the configuration the rule picked per model × benchmark split, its mean and the
    paper's number, the rule in its last row (every configuration's mean is in the CSV, Markdown and HTML)."""
    from benchbuild.report.latex import MISSING, cite, escape, interval, ours

    lines = ["", "\\medskip", "% The grid's picks (`benchbuild report`).", "\\begin{tabular}{lllrr}", "\\toprule",
             "Model & Benchmark (split) & Best configuration & Ours & Paper \\\\", "\\midrule"]
    for cell in grid.searched:
        row = cell.row(cell.best)
        paper = (MISSING if row.paper is None else f"${row.paper:g}$ {cite(row.paper_source)}" if row.comparable
                 else "n.c.")
        lines.append(f"{escape(cell.model)} & {escape(cell.benchmark)} ({escape(cell.split)}) & "
                     f"\\texttt{{{escape(cell.best.label)}}} & {ours(row)}{interval(row)} & {paper} \\\\")
    lines += ["\\bottomrule", f"\\multicolumn{{5}}{{p{{0.9\\linewidth}}}}{{\\footnotesize {escape(grid.rule_text)} "
              "Ours: mean $\\pm$ standard error over seeds, in brackets its 95\\% confidence interval. "
              "n.c.: not compared, our runs were not made as the paper's number was (the first table's notes say "
              "what differs).} \\\\", "\\end{tabular}"]
    return "\n".join(lines) + "\n"


def html_grid(grid: Grid) -> dict[str, Any]:
    """What the page's grid section shows: the rule in words, and per model × benchmark split every configuration's
    mean, the rule's pick first marked."""
    cells = []
    for cell in grid.searched:
        best = cell.row(cell.best)
        cells.append({
            "model": cell.model, "benchmark": cell.benchmark, "split": cell.split, "metric": metric_name(cell.metric),
            "best": cell.best.label, "mean": _mean(best), "ci": _bounds(best), "seeds": _seeds(best),
            "paper": _paper(best) or "—", "paper_source": best.source if best.paper is not None else "",
            "spread": cell.spread,
            "configurations": [{"label": c.label, "mean": _mean(cell.row(c)), "ci": _bounds(cell.row(c)),
                                "seeds": _seeds(cell.row(c)),
                                "sort": round(cell.row(c).mean, 6), "best": c is cell.best}
                               for c in cell.configurations]})
    return {"rule": grid.rule_text, "cells": cells}
