"""Report tables over evaluated runs: model × benchmark split × metric, mean ± standard error over seeds, with the
number the paper reports (the catalogue's `[[reported]]`) beside ours. Written as Markdown and CSV here; the
`benchbuild.report` package adds the LaTeX table, the figures and the HTML page."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from benchbuild.errors import BenchbuildError
from benchbuild.papers import reported_on, selection_rule
from benchbuild.run_folder import METRICS_FILE, metrics_files, read_metrics, read_run

COLUMNS = ("model", "benchmark", "split", "metric", "runs", "seeds", "mean", "standard_error", "paper", "paper_source",
           "select")


@dataclass
class ReportRow:
    """One cell group of the table: a metric of one model on one benchmark split, over seeds."""

    model: str
    benchmark: str
    split: str
    metric: str
    values: list[float] = field(default_factory=list)
    seeds: list[Any] = field(default_factory=list)
    paper: float | None = None
    paper_source: str = ""
    selections: list[str] = field(default_factory=list)

    @property
    def select(self) -> str:
        """The checkpoint selection rule of the runs (`last`, `best_validation`), each named once."""
        return ", ".join(dict.fromkeys(self.selections))

    @property
    def mean(self) -> float:
        return sum(self.values) / len(self.values)

    @property
    def standard_error(self) -> float | None:
        """Sample standard deviation over √n, as the papers' ± columns; undefined for a single run."""
        n = len(self.values)
        if n < 2:
            return None
        variance = sum((value - self.mean) ** 2 for value in self.values) / (n - 1)
        return math.sqrt(variance / n)


def headline_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """The single numbers of a `metrics.json` that a table shows (percentages or BLEU points)."""
    numbers = {"exact_match": metrics.get("exact_match"),
               "bleu": (metrics.get("bleu") or {}).get("score"),
               "chrf": (metrics.get("chrf") or {}).get("score")}
    comp = metrics.get("comp")
    if isinstance(comp, dict):
        numbers.update({key: value for key, value in comp.items() if isinstance(value, (int, float))
                        and not isinstance(value, bool) and key not in ("rows", "n", "count")})
    elif isinstance(comp, (int, float)):
        numbers["comp"] = comp
    if isinstance(metrics.get("cter"), dict):
        numbers["cter_instance"] = metrics["cter"]["instance"]
        numbers["cter_aggregate"] = metrics["cter"]["aggregate"]
    return {key: float(value) for key, value in numbers.items() if value is not None}


def build_report(run_dirs: Sequence[str | Path]) -> list[ReportRow]:
    """Group every evaluation of the given runs by model, benchmark, split and metric."""
    groups: dict[tuple[str, str, str, str], ReportRow] = {}
    reported_cache: dict[str, list[dict]] = {}
    for run_dir in map(Path, run_dirs):
        run = read_run(run_dir)
        files = metrics_files(run_dir)
        if not files:
            raise BenchbuildError(f"{run_dir} has no {METRICS_FILE}: run `benchbuild eval --run {run_dir}` first")
        model = str(run.get("model"))
        if model not in reported_cache:
            reported_cache[model] = _reported(run)
        for path in files:
            metrics = read_metrics(path)
            benchmark, split = str(metrics.get("benchmark")), str(metrics.get("split"))
            for metric, value in headline_metrics(metrics).items():
                key = (model, benchmark, split, metric)
                if key not in groups:
                    groups[key] = ReportRow(model, benchmark, split, metric)
                    paper = next((r for r in reported_cache[model] if r.get("metric") == metric
                                  and _same_benchmark(str(r.get("benchmark")), benchmark, split)), None)
                    if paper is not None:
                        groups[key].paper = float(paper["value"])
                        groups[key].paper_source = str(paper.get("table", ""))
                groups[key].values.append(value)
                groups[key].seeds.append(run.get("seed"))
                groups[key].selections.append(selection_rule(run))
    return [groups[key] for key in sorted(groups)]


def markdown_table(rows: Iterable[ReportRow]) -> str:
    lines = ["| model | benchmark | split | metric | runs (seeds) | ours: mean ± s.e. | paper | source | select |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        error = "" if row.standard_error is None else f" ± {row.standard_error:.2f}"
        paper = "" if row.paper is None else f"{row.paper:g}"
        seeds = ", ".join(str(seed) for seed in row.seeds)
        lines.append(f"| {row.model} | {row.benchmark} | {row.split} | {row.metric} | {len(row.values)} ({seeds}) | "
                     f"{row.mean:.2f}{error} | {paper} | {row.paper_source} | {row.select} |")
    return "\n".join(lines) + "\n"


def csv_table(rows: Iterable[ReportRow]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow([row.model, row.benchmark, row.split, row.metric, len(row.values),
                         " ".join(str(seed) for seed in row.seeds), f"{row.mean:.4f}",
                         "" if row.standard_error is None else f"{row.standard_error:.4f}",
                         "" if row.paper is None else f"{row.paper:g}", row.paper_source, row.select])
    return buffer.getvalue()


def write_report(run_dirs: Sequence[str | Path], prefix: str | Path) -> tuple[list[ReportRow], Path, Path]:
    """Write `PREFIX.md` and `PREFIX.csv`; returns the rows and both paths."""
    rows = build_report(run_dirs)
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    markdown, table = prefix.with_name(prefix.name + ".md"), prefix.with_name(prefix.name + ".csv")
    markdown.write_text(markdown_table(rows), encoding="utf-8")
    table.write_text(csv_table(rows), encoding="utf-8")
    return rows, markdown, table


def _same_benchmark(reported: str, ours: str, split: str) -> bool:
    """Whether a `[[reported]]` number is one for split `split` of benchmark `ours` (`family/name`): a reported
    `scan/simple` names one benchmark, `nounadj` its family's, `react/cg_test` the family and the split (a folder
    `build-react` writes is labelled `react/react`), as `train` reads them to pick a recipe (`reported_on`)."""
    family, _, name = ours.partition("/")
    return reported_on(reported, family, name, [split])


def _reported(run: dict[str, Any]) -> list[dict]:
    """The catalogue's reported numbers for the run's model (none when its entry cannot be found any more)."""
    from benchbuild import zoo

    for reference in (run.get("model_entry"), run.get("model")):
        if not reference:
            continue
        try:
            return zoo.load_entry(reference).reported
        except BenchbuildError:
            continue
    return []
