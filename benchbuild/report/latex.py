"""The report as LaTeX booktabs tables, ready to `\\input` inside a `table` float: one row per model, per headline
column our mean ± standard error over seeds with its 95% confidence interval, then (where the paper reports a
number) our runs summarised by the paper's statistic and the paper's number, where our runs were made as it was, its
source cited with natbib's `\\citet` (the entries are in `PREFIX.bib`, `bibtex_file`); a number our runs were not
made as reads "n.c." there, its note says what differs, and a second table lists those published numbers apart.
Numbered notes under the table say what each "As paper" cell is, where a model's recipe differs from its paper and
where a paper's number is another model's; an Ours cell that differs significantly from the best of its column
carries `significance.MARK`, stated with the level and the tests in a row of its own, and a note where no test could
be run."""

from __future__ import annotations

import itertools
from typing import Sequence

from benchbuild.papers import source_parts
from benchbuild.report.headline import Column, cell_index, headline_columns
from benchbuild.report.rows import Footnotes, ReportRow
from benchbuild.report.significance import LEGEND, MARK, missing_note

MISSING = "--"
_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
            "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}",
            ">": r"\textgreater{}", "≤": r"$\leq$", "≥": r"$\geq$",
            "α": r"$\alpha$"}  # pdflatex's utf8 input has no ≤, ≥, α


def escape(text: str) -> str:
    """`text` as LaTeX prints it literally."""
    return "".join(_SPECIAL.get(character, character) for character in text)


def ours(row: ReportRow | None) -> str:
    """`$mean \\pm s.e.$` at two decimals; the mean alone for one seed; MISSING without a run."""
    if row is None:
        return MISSING
    if row.standard_error is None:
        return f"${row.mean:.2f}$"
    return f"${row.mean:.2f} \\pm {row.standard_error:.2f}$"


def interval(row: ReportRow | None) -> str:
    """` {\\scriptsize $[low, high]$}`: the 95% confidence interval of the Ours cell's mean (`ReportRow.interval`: the
    t-interval over seeds, else the one run's bootstrap over its test rows), set after it; "" without one."""
    found = None if row is None else row.interval
    if found is None:
        return ""
    (low, high), _ = found
    return f" {{\\scriptsize $[{low:.2f}, {high:.2f}]$}}"


def as_paper(row: ReportRow | None) -> str:
    """Our runs by the statistic of the paper's number: `$median \\pm std$`, `$median$ (IQR $x$)`, `$mean$`; MISSING
    without a paper number or when every run was excluded."""
    by_paper = None if row is None else row.by_paper_statistic
    if by_paper is None or by_paper.value is None:
        return MISSING
    if by_paper.spread_value is None:
        return f"${by_paper.value:.2f}$"
    if by_paper.spread == "iqr":
        return f"${by_paper.value:.2f}$ (IQR ${by_paper.spread_value:.2f}$)"
    return f"${by_paper.value:.2f} \\pm {by_paper.spread_value:.2f}$"


def note_text(text: str) -> str:
    """A note as LaTeX prints it: escaped, its `code` spans in typewriter type (where `--` stays two hyphens)."""
    return "".join(f"\\texttt{{{escape(part)}}}" if index % 2 else escape(part)
                   for index, part in enumerate(text.split("`")))


def cite(source: str) -> str:
    """A reported number's `table` as LaTeX: "\\citet{chaabouni2021}, Table 3" for a paper of `PAPERS`, else the
    text, escaped."""
    paper, where = source_parts(source)
    if paper is None:
        return escape(source)
    return f"\\citet{{{paper.bibtex_key}}}" + (f", {escape(where)}" if where else "")


def not_compared_note(row: ReportRow) -> str:
    """The note of an "n.c." cell: why our runs do not compare with the paper's number."""
    return (f"n.c.: not compared with the paper's number ({row.paper:g}, in the table of published numbers below): "
            f"{row.comparison.words}.")


def note_marks(*numbers: int | None) -> str:
    """`\\textsuperscript{1,3}` for the notes numbered so, each once; "" for none."""
    shown = sorted({number for number in numbers if number is not None})
    return f"\\textsuperscript{{{','.join(map(str, shown))}}}" if shown else ""


def significance_mark(row: ReportRow | None, notes: Footnotes) -> str:
    """`\\textsuperscript{*}` after an Ours cell that differs significantly from its column's best, the number of its
    note where no test could be run; "" otherwise."""
    if row is None or row.against_best is None:
        return ""
    if row.against_best.significant:
        return f"\\textsuperscript{{{MARK}}}"
    return note_marks(notes.mark(missing_note(row)))


def latex_table(rows: Sequence[ReportRow], bibliography: str = "") -> str:
    """A `tabular` with booktabs rules (needs `\\usepackage{booktabs}`, and natbib for `\\citet`), its legend and
    notes in the last rows, then the published numbers our runs were not made as (`published_table`). A column with
    a paper number has three cells per model (Ours, As paper, Paper), any other two (Ours, Paper). `bibliography`:
    the name of the .bib file the header comment points to."""
    columns = headline_columns(rows)
    cells = cell_index(rows)
    models = sorted({row.model for row in rows})
    shown = set(columns)
    sources = list(dict.fromkeys(row.paper_source or "the catalogue" for row in rows
                                 if row.compared_paper is not None and Column.of(row) in shown))
    marks = {source: chr(ord("a") + index) for index, source in enumerate(sources)}
    reported = {Column.of(row) for row in rows if row.paper is not None}
    widths = [3 if column in reported else 2 for column in columns]
    width = 1 + sum(widths)
    notes = Footnotes()

    def paper(row: ReportRow | None) -> str:
        if row is None or row.paper is None:
            return MISSING
        if row.compared_paper is None:
            return f"n.c.{note_marks(notes.mark(not_compared_note(row)))}"
        mark = marks[row.paper_source or "the catalogue"]
        return f"${row.paper:g}^{{{mark}}}${note_marks(notes.mark(row.paper_note))}"

    # Adjacent columns of one benchmark split share its heading.
    groups = [(key, sum(widths[columns.index(column)] for column in members)) for key, members in
              itertools.groupby(columns, key=lambda column: (column.benchmark, column.split))]
    starts = list(itertools.accumulate([2, *widths]))
    lines = ["% Written by `benchbuild report`; needs \\usepackage{booktabs} and \\usepackage{natbib}"
             + (f", and \\bibliography{{{bibliography.removesuffix('.bib')}}} ({bibliography}) for its references."
                if bibliography else "."),
             "\\begin{tabular}{l" + "".join("r" * w for w in widths) + "}", "\\toprule"]
    lines.append(" & ".join(["", *(f"\\multicolumn{{{count}}}{{c}}{{{escape(benchmark)} ({escape(split)})}}"
                                   for (benchmark, split), count in groups)]) + " \\\\")
    lines.append(" & ".join(["", *(f"\\multicolumn{{{w}}}{{c}}{{{escape(column.metric_name)}}}"
                                   for column, w in zip(columns, widths))]) + " \\\\")
    lines.append("".join(f"\\cmidrule(lr){{{start}-{start + w - 1}}}" for start, w in zip(starts, widths)))
    lines.append(" & ".join(["Model", *(label for w in widths for label in
                                        (["Ours", "As paper", "Paper"] if w == 3 else ["Ours", "Paper"]))]) + " \\\\")
    lines.append("\\midrule")
    for model in models:
        of_model = [cells.get((model, column)) for column in columns]
        row_cells = [escape(model) + note_marks(*(notes.mark(row.recipe_note) for row in of_model if row))]
        for row, w in zip(of_model, widths):
            by_paper = None if row is None else row.by_paper_statistic
            words = None if by_paper is None else by_paper.words
            ours_cell = ours(row) + significance_mark(row, notes) + interval(row)
            row_cells += [ours_cell, as_paper(row) + note_marks(notes.mark(words)), paper(row)] if w == 3 else \
                [ours_cell, paper(row)]
        lines.append(" & ".join(row_cells) + " \\\\")
    lines.append("\\bottomrule")
    lines.append(f"\\multicolumn{{{width}}}{{p{{0.9\\linewidth}}}}{{\\footnotesize Ours: mean $\\pm$ standard "
                 "error over seeds (no $\\pm$: one seed), then in brackets its 95\\% confidence interval: the "
                 f"t-interval over seeds, or for one seed the bootstrap over its test rows; {MISSING}: no number.}} "
                 "\\\\")
    if any(row.against_best is not None for row in rows if Column.of(row) in shown):
        lines.append(f"\\multicolumn{{{width}}}{{p{{0.9\\linewidth}}}}{{\\footnotesize {note_text(LEGEND)}}} \\\\")
    if reported & shown:
        lines.append(f"\\multicolumn{{{width}}}{{l}}{{\\footnotesize As paper: our runs summarised by the statistic "
                     "of the paper's number (its spread: $\\pm$ std or s.e., or the IQR), as its note says.} \\\\")
    if sources:
        legend = "; ".join(f"$^{{{marks[source]}}}$~{cite(source)}" for source in sources)
        lines.append(f"\\multicolumn{{{width}}}{{l}}{{\\footnotesize Paper: {legend}; set beside ours only where our "
                     "runs were made as it was.} \\\\")
    for number, text in enumerate(notes.texts, start=1):
        lines.append(f"\\multicolumn{{{width}}}{{p{{0.9\\linewidth}}}}{{\\footnotesize \\textsuperscript{{{number}}}~"
                     f"{note_text(text)}}} \\\\")
    lines.append("\\end{tabular}")
    return "\n".join(lines) + "\n" + published_table(rows)


def published_table(rows: Sequence[ReportRow]) -> str:
    """A second booktabs `tabular`: each published number our runs were not made as, its source cited, and what
    differs; "" when there is none."""
    apart = [row for row in rows if row.published_apart is not None]
    if not apart:
        return ""
    lines = ["", "\\medskip", "% Published numbers our runs were not made as (`benchbuild report`).",
             "\\begin{tabular}{lllrlp{0.35\\linewidth}}", "\\toprule",
             "Model & Benchmark (split) & Metric & Published & Source & What differs \\\\", "\\midrule"]
    for row in apart:
        lines.append(f"{escape(row.model)} & {escape(row.benchmark)} ({escape(row.split)}) & "
                     f"{escape(Column.of(row).metric_name)} & ${row.paper:g}$ & {cite(row.paper_source)} & "
                     f"{escape(row.comparison.words)} \\\\")
    lines += ["\\bottomrule",
              "\\multicolumn{6}{p{0.9\\linewidth}}{\\footnotesize Not set beside ours: our runs were not made as "
              "these numbers were (recipe, steps trained, checkpoint selection, split, number of seeds, or a "
              "BLEU computed otherwise than the paper's).} \\\\",
              "\\end{tabular}"]
    return "\n".join(lines) + "\n"

