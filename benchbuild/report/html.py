"""The report as one HTML page that a person opens from disk (`report/templates/report.html.j2`): a leaderboard per
benchmark split, sortable by any column (a few lines of inline script), the papers' numbers beside ours where our runs
were made as they were (else the cell says what differs, and the number is listed apart under the leaderboard), our
runs summarised by each paper's statistic, with numbered notes (recipes that differ from their paper, a paper's number
that is another model's) and each headline cell's test against the best of its column (significant differences
marked, the level and tests stated under the leaderboard), the references of the papers cited, the figures
(files in `PREFIX_files/`), every run with its predictions linked, and the first wrong predictions of each benchmark
with their differences from the reference marked. Nothing is fetched from a network."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import quote

import jinja2
from markupsafe import Markup, escape

from benchbuild import __version__
from benchbuild.report.figures import Figure
from benchbuild.papers import statistic_in_words
from benchbuild.progress import clock
from benchbuild.report.headline import headline_columns, metric_name, metric_rank
from benchbuild.report.rows import Footnotes, ReportRow, cited_papers
from benchbuild.report.runs import RunSummary
from benchbuild.report.significance import LEGEND, MARK, missing_note

WRONG_SHOWN = 10


@dataclass(frozen=True)
class Cell:
    """A table cell: what it shows, the value its column sorts by (a number, text, or "" for no value: last), and
    an optional tooltip."""

    text: Any
    sort: Any = None
    title: str = ""


def diff_markup(reference: str, prediction: str) -> tuple[Markup, Markup]:
    """Reference and prediction with the words each lacks from the other marked (`<del>` in the reference,
    `<ins>` in the prediction), aligned word by word with difflib."""
    left_words, right_words = reference.split(), prediction.split()
    left, right = [], []
    matcher = difflib.SequenceMatcher(a=left_words, b=right_words, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        removed, added = " ".join(left_words[i1:i2]), " ".join(right_words[j1:j2])
        if tag == "equal":
            left.append(escape(removed))
            right.append(escape(added))
            continue
        if removed:
            left.append(Markup("<del>{}</del>").format(removed))
        if added:
            right.append(Markup("<ins>{}</ins>").format(added))
    return Markup(" ").join(left), Markup(" ").join(right)


def leaderboards(rows: Sequence[ReportRow]) -> list[dict[str, Any]]:
    """Per benchmark split: a header and a row per model (runs, seeds, every metric's mean ± s.e., the paper's
    number beside the headline metrics and any other it reports, our runs by the paper's statistic beside each paper
    number, the selection rule), best headline mean first, and the notes its cells mark."""
    headline = {(c.benchmark, c.split, c.metric) for c in headline_columns(rows)}
    boards = []
    for (benchmark, split), found in groupby(sorted(rows, key=lambda r: (r.benchmark, r.split)),
                                             key=lambda r: (r.benchmark, r.split)):
        found = list(found)
        metrics = sorted({row.metric for row in found}, key=metric_rank)
        reported = [m for m in metrics if any(row.paper is not None for row in found if row.metric == m)]
        with_paper = [m for m in metrics if (benchmark, split, m) in headline or m in reported]
        header = ["model", "runs", "seeds"]
        for metric in metrics:
            header.append(metric_name(metric))
            if metric in reported:
                header.append(f"{metric_name(metric)}: as the paper")
            if metric in with_paper:
                header.append(f"{metric_name(metric)}: paper")
        header.append("select")
        by_model = {}
        for row in found:
            by_model.setdefault(row.model, {})[row.metric] = row
        lines = []
        notes = Footnotes()
        for model, of_model in by_model.items():
            any_row = next(iter(of_model.values()))
            marks = [notes.mark(row.recipe_note) for row in of_model.values()]
            cells = [Cell(_marked(model, *marks), model), Cell(len(any_row.values), len(any_row.values)),
                     Cell(", ".join(map(str, any_row.seeds)), " ".join(map(str, any_row.seeds)))]
            for metric in metrics:
                row = of_model.get(metric)
                cells.append(_ours(row, notes))
                if metric in reported:
                    cells.append(_as_paper(row))
                if metric in with_paper:
                    cells.append(_paper(row, notes))
            cells.append(Cell(any_row.select, any_row.select))
            lines.append(cells)
        first = next((m for m in metrics if (benchmark, split, m) in headline), metrics[0])
        position = 3 + sum(1 + (m in reported) + (m in with_paper) for m in metrics[:metrics.index(first)])
        lines.sort(key=lambda cells: -cells[position].sort if cells[position].sort != "" else float("inf"))
        apart = [{"model": row.model, "metric": metric_name(row.metric),
                  "published": _marked(f"{row.paper:g}", notes.mark(row.paper_note)),
                  "statistic": statistic_in_words(row.reported), "source": _source(row),
                  "differs": row.comparison.words} for row in found if row.published_apart is not None]
        tested = any(row.against_best is not None for row in found)
        boards.append({"benchmark": benchmark, "split": split, "header": header, "rows": lines,
                       "sorted_by": header[position], "notes": [_note_markup(text) for text in notes.texts],
                       "apart": apart, "significance": _note_markup(LEGEND) if tested else None})
    return boards


def _ours(row: ReportRow | None, notes: Footnotes) -> Cell:
    """Mean ± s.e. and its 95% interval: over seeds (t) where there are several, else the run's bootstrap over its
    test rows, as its metrics.json records it (`uncertainty`); `MARK` where it differs significantly from the best
    of its column, a note where no test could be run, and the test in the tooltip."""
    if row is None:
        return Cell("—", "", "not evaluated")
    error = "" if row.standard_error is None else f" ± {row.standard_error:.2f}"
    title = "one seed: no standard error" if row.standard_error is None else "mean ± standard error over seeds"
    number = Markup("{}{}").format(f"{row.mean:.2f}", error)
    against = row.against_best
    if against is not None:
        title += f"; against the best: {against.words}"
        number = (Markup('{}<sup class="significant">{}</sup>').format(number, MARK) if against.significant
                  else _marked(number, notes.mark(missing_note(row))))
    found = row.interval
    if found is None:
        return Cell(number, round(row.mean, 6), title)
    interval, basis = found
    low, high = (f"{bound:.2f}" for bound in interval)
    return Cell(Markup('{} <small class="ci">95% CI [{}, {}]</small>').format(number, low, high),
                round(row.mean, 6), f"{title}; 95% confidence interval: {basis}")


def _as_paper(row: ReportRow | None) -> Cell:
    by_paper = None if row is None else row.by_paper_statistic
    if by_paper is None:
        return Cell("—", "", "the catalogue has no paper number here")
    return Cell(Markup("{} <small>{}</small>").format(by_paper.text, by_paper.words),
                "" if by_paper.value is None else round(by_paper.value, 6),
                "our runs summarised by the statistic of the paper's number")


def _paper(row: ReportRow | None, notes: Footnotes) -> Cell:
    if row is None or row.paper is None:
        return Cell("—", "", "the catalogue has no paper number here")
    if row.compared_paper is None:
        return Cell(Markup("<small>not compared: {}</small>").format(row.comparison.words), "",
                    f"{row.source} publishes {row.paper:g} here; our runs were not made as it was (listed apart "
                    "below the table)")
    return Cell(Markup("{} <small>{}</small>").format(_marked(f"{row.paper:g}", notes.mark(row.paper_note)),
                                                      _source(row)), row.paper, row.source)


def _source(row: ReportRow) -> Markup:
    """The paper's number's source in words, linked to its entry in the page's references where it has one, and what
    benchbuild's reproduction ledger says of that number."""
    ledger = Markup(" (benchbuild's ledger: {})").format(row.ledger_status) if row.ledger_status else ""
    if not row.citation_key:
        return Markup("{}{}").format(row.source, ledger)
    return Markup('<a href="#ref-{}">{}</a>{}').format(row.citation_key, row.source, ledger)


def _marked(text: str | Markup, *numbers: int | None) -> Markup:
    """`text` with the numbers of its notes as a superscript, each once."""
    shown = sorted({number for number in numbers if number is not None})
    return Markup("{}<sup>{}</sup>").format(text, ",".join(map(str, shown))) if shown else Markup("{}").format(text)


def _note_markup(text: str) -> Markup:
    """A note with its `code` spans as `<code>`."""
    return Markup("").join(Markup("<code>{}</code>").format(part) if index % 2 else escape(part)
                           for index, part in enumerate(text.split("`")))


def _href(target: Path, page: Path) -> str:
    """`target` as a link relative to the page's folder, so the page and its runs can move together."""
    return quote(Path(os.path.relpath(target.resolve(), page.resolve().parent)).as_posix())


def run_table(runs: Sequence[RunSummary], page: Path) -> list[dict[str, Any]]:
    """Per run: the facts the runs table shows, and its evaluations with links to their predictions."""
    table = []
    for run in runs:
        evaluations = [{"label": f"{e.benchmark} ({e.split})", "metrics": _href(e.metrics_file, page),
                        "predictions": None if e.predictions_file is None else _href(e.predictions_file, page)}
                       for e in run.evaluations]
        table.append({"folder": str(run.folder), "name": run.folder.name, "href": _href(run.folder, page),
                      "model": run.model,
                      "recipe": run.recipe or "—", "seed": run.seed, "trained_on": run.trained_on,
                      "select": run.select, "selected_step": run.selected_step, "steps_done": run.steps_done,
                      "seconds": run.training_seconds, "time": "—" if run.training_seconds is None else clock(run.training_seconds),
                      "stopped_by": run.record.get("stopped_by"), "evaluations": evaluations})
    return table


def error_views(runs: Sequence[RunSummary], limit: int = WRONG_SHOWN) -> list[dict[str, Any]]:
    """Per evaluated benchmark split, per model: the first `limit` wrong predictions of its lowest-seed run that has
    predictions, with the differences marked."""
    views: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for run in sorted(runs, key=lambda run: (run.model, str(run.seed))):
        for evaluation in run.evaluations:
            models = views.setdefault((evaluation.benchmark, evaluation.split), {})
            if run.model in models:
                continue
            predictions = evaluation.predictions()
            if not predictions:
                continue
            wrong = [p for p in predictions if not p.get("correct", " ".join(p["prediction"].split())
                                                         == " ".join(p["target"].split()))]
            examples = []
            for record in wrong[:limit]:
                reference, prediction = diff_markup(record["target"], record["prediction"])
                examples.append({"id": record.get("id"), "source": record["source"], "reference": reference,
                                 "prediction": prediction})
            models[run.model] = {"run": run.label, "wrong": len(wrong), "total": len(predictions),
                                 "examples": examples}
    return [{"benchmark": benchmark, "split": split, "models": models}
            for (benchmark, split), models in sorted(views.items())]


def render_page(rows: Sequence[ReportRow], runs: Sequence[RunSummary], figures: Sequence[Figure],
                notes: Sequence[str], page: Path, title: str = "benchbuild report",
                grid: dict[str, Any] | None = None) -> str:
    """The page; `grid` (`report.grid.html_grid`) adds the hyperparameter grid's section."""
    environment = jinja2.Environment(loader=jinja2.PackageLoader("benchbuild", "report/templates"),
                                     autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                                     lstrip_blocks=True)
    return environment.get_template("report.html.j2").render(
        title=title, version=__version__, notes=notes, leaderboards=leaderboards(rows), grid=grid,
        references=[{"key": paper.bibtex_key, "in_text": paper.in_text, "citation": paper.citation()}
                    for paper in cited_papers(rows)],
        figures=[{"title": f.title, "caption": f.caption, "png": _href(f.png, page), "pdf": _href(f.pdf, page)}
                 for f in figures],
        runs=run_table(runs, page), errors=error_views(runs), wrong_shown=WRONG_SHOWN)
