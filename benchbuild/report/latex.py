"""The report as a LaTeX booktabs table, ready to `\\input` inside a `table` float: one row per model, per headline
column our mean ± standard error over seeds beside the paper's number, whose table reference a footnote names."""

from __future__ import annotations

import itertools
from typing import Sequence

from benchbuild.evaluation.report import ReportRow
from benchbuild.report.headline import Column, cell_index, headline_columns

MISSING = "--"
_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
            "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


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


def latex_table(rows: Sequence[ReportRow]) -> str:
    """A `tabular` with booktabs rules (needs `\\usepackage{booktabs}`), its legend in the last rows."""
    columns = headline_columns(rows)
    cells = cell_index(rows)
    models = sorted({row.model for row in rows})
    shown = set(columns)
    sources = list(dict.fromkeys(row.paper_source or "the catalogue" for row in rows
                                 if row.paper is not None and Column.of(row) in shown))
    marks = {source: chr(ord("a") + index) for index, source in enumerate(sources)}
    width = 1 + 2 * len(columns)

    def paper(row: ReportRow | None) -> str:
        if row is None or row.paper is None:
            return MISSING
        return f"${row.paper:g}^{{{marks[row.paper_source or 'the catalogue']}}}$"

    # Adjacent columns of one benchmark split share its heading.
    groups = [(key, len(list(members))) for key, members in
              itertools.groupby(columns, key=lambda column: (column.benchmark, column.split))]
    lines = ["% Written by `benchbuild report`; needs \\usepackage{booktabs}.",
             "\\begin{tabular}{l" + "rr" * len(columns) + "}", "\\toprule"]
    lines.append(" & ".join(["", *(f"\\multicolumn{{{2 * count}}}{{c}}{{{escape(benchmark)} ({escape(split)})}}"
                                   for (benchmark, split), count in groups)]) + " \\\\")
    lines.append(" & ".join(["", *(f"\\multicolumn{{2}}{{c}}{{{escape(column.metric_name)}}}" for column in columns)])
                 + " \\\\")
    lines.append("".join(f"\\cmidrule(lr){{{2 + 2 * i}-{3 + 2 * i}}}" for i in range(len(columns))))
    lines.append(" & ".join(["Model", *(["Ours", "Paper"] * len(columns))]) + " \\\\")
    lines.append("\\midrule")
    for model in models:
        row_cells = [escape(model)]
        for column in columns:
            row = cells.get((model, column))
            row_cells += [ours(row), paper(row)]
        lines.append(" & ".join(row_cells) + " \\\\")
    lines.append("\\bottomrule")
    lines.append(f"\\multicolumn{{{width}}}{{l}}{{\\footnotesize Ours: mean $\\pm$ standard error over seeds "
                 f"(no $\\pm$: one seed); {MISSING}: no number.}} \\\\")
    if sources:
        legend = "; ".join(f"$^{{{marks[source]}}}$~{escape(source)}" for source in sources)
        lines.append(f"\\multicolumn{{{width}}}{{l}}{{\\footnotesize Paper: {legend}.}} \\\\")
    lines.append("\\end{tabular}")
    return "\n".join(lines) + "\n"

