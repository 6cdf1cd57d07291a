"""The report as Markdown (`PREFIX.md`, and what `benchbuild report` prints): the table of model × benchmark split ×
metric, ours with its 95% confidence interval (`ReportRow.interval`: the t-interval over seeds, else the run's bootstrap
over its test rows), the paper's number beside ours where the runs were made as it was; the published numbers they were not
made as, apart, each with what differs; the numbered notes; and the references of the papers cited. Its last column
gives each headline row's test against the best of its column, `*` where the difference is significant
(`significance.LEGEND`, stated under the table)."""

from __future__ import annotations

from typing import Sequence

from benchbuild.papers import statistic_in_words
from benchbuild.report.rows import Footnotes, ReportRow, cited_papers
from benchbuild.report.significance import LEGEND

APART_HEADING = "Published numbers not set beside ours"
APART_INTRO = ("Our runs above were not made as these numbers were (another recipe, fewer steps, another checkpoint "
               "selection or split, fewer seeds than the paper's statistic, a BLEU computed otherwise than the "
               "paper's): each is shown here, apart from ours, with what differs.")


def text(value: object) -> str:
    """`value` as Markdown text: `&`, `<` and `>` as HTML entities (a model named `<b>x</b>` shows as such, as on the
    HTML page, instead of turning bold or hiding), `|` escaped (it would end a table cell), on one line."""
    return (" ".join(str(value).split("\n")).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("|", "\\|"))


def table_row(cells: Sequence[object]) -> str:
    """One Markdown table line of `cells`, each as `text`."""
    return "| " + " | ".join(text(cell) for cell in cells) + " |"


def markdown_table(rows: Sequence[ReportRow]) -> str:
    """The table; the published numbers our runs do not compare with; the notes (a model's `[n]` where its recipe
    differs from the paper, a paper number's where it is another model's); the references."""
    rows = list(rows)
    lines = ["| model | benchmark | split | metric | runs (seeds) | ours: mean ± s.e. | ours: 95% CI | ours: as the paper | "
             "paper | paper's statistic | source | compared with the paper | select | against the best |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    notes = Footnotes()
    for row in rows:
        model = row.model + _marker(notes.mark(row.recipe_note))
        error = "" if row.standard_error is None else f" ± {row.standard_error:.2f}"
        seeds = ", ".join(str(seed) for seed in row.seeds)
        by_paper = row.by_paper_statistic
        as_paper = "" if by_paper is None else f"{by_paper.text}: {by_paper.words}"
        paper = statistic = source = ""
        if row.compared_paper is not None:
            paper = f"{row.paper:g}" + _marker(notes.mark(row.paper_note))
            statistic, source = statistic_in_words(row.reported), row.source
            if row.ledger_status:
                source += f" (benchbuild's ledger: {row.ledger_status})"
        lines.append(table_row([model, row.benchmark, row.split, row.metric, f"{len(row.values)} ({seeds})",
                                f"{row.mean:.2f}{error}", interval_text(row), as_paper, paper, statistic, source,
                                row.comparison_words, row.select,
                                "" if row.against_best is None else row.against_best.words]))
    if any(row.against_best is not None for row in rows):
        lines += ["", f"Against the best: {text(LEGEND)}"]
    apart = [row for row in rows if row.published_apart is not None]
    if apart:
        lines += ["", f"## {APART_HEADING}", "", APART_INTRO, "",
                  "| model | benchmark | split | metric | published | paper's statistic | source | what differs |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for row in apart:
            ledger = f" (benchbuild's ledger: {row.ledger_status})" if row.ledger_status else ""
            lines.append(table_row([row.model, row.benchmark, row.split, row.metric,
                                    f"{row.paper:g}{_marker(notes.mark(row.paper_note))}",
                                    statistic_in_words(row.reported), row.source + ledger, row.comparison.words]))
    if notes.texts:
        lines += ["", *(f"{number}. {text(note)}" for number, note in enumerate(notes.texts, start=1))]
    papers = cited_papers(rows)
    if papers:
        lines += ["", "## References", "", *(f"- {text(paper.in_text)}: {text(paper.citation())}" for paper in papers)]
    return "\n".join(lines) + "\n"


def interval_text(row: ReportRow) -> str:
    """`[low, high]: how it was made` (over seeds, or the run's bootstrap over its test rows); empty without one."""
    found = row.interval
    if found is None:
        return ""
    (low, high), basis = found
    return f"[{low:.2f}, {high:.2f}]: {basis}"


def _marker(number: int | None) -> str:
    return "" if number is None else f" [{number}]"
