"""The report as one CSV table (`PREFIX.csv`), a row per model × benchmark split × metric: `paper` holds the paper's
number only where our runs were made as it was (`comparable`), `published` holds it where they were not, and
`not_comparable_because` says what differs; the paper is named by authors and year (`paper_source`) and by its BibTeX
key (`paper_citation_key`, an entry of `PREFIX.bib`). In a headline column two or more models share, `p_vs_best` is
the p-value of the row's test against the column's best mean (`significance`: the one `report --compare BEST MODEL`
prints) and `test_vs_best` says which test that was, "best" on the best row, or why no test could be run. `ci_low` and
`ci_high` bound the 95% confidence interval of `mean`, `ci_basis` says how it was made (the t-interval over seeds, or
one run's bootstrap over its test rows), as the HTML leaderboard shows it."""

from __future__ import annotations

import csv
import io
from typing import Any, Iterable

from benchbuild.papers import statistic_in_words
from benchbuild.report.rows import ReportRow

COLUMNS = ("model", "benchmark", "split", "metric", "runs", "seeds", "mean", "standard_error", "paper", "published",
           "comparable", "not_comparable_because", "paper_source", "paper_citation_key", "select", "paper_statistic",
           "paper_model", "ours_by_paper_statistic", "ours_spread", "ours_statistic", "excluded_runs", "differences",
           "p_vs_best", "test_vs_best", "ci_low", "ci_high", "ci_basis", "ledger_status")


def csv_fields(row: ReportRow) -> list[Any]:
    """A row's values under `COLUMNS`."""
    by_paper = row.by_paper_statistic
    comparison = row.comparison
    against = row.against_best
    interval = row.interval  # computed once: a t-interval over seeds or the run's recorded bootstrap
    return [row.model, row.benchmark, row.split, row.metric, len(row.values),
            " ".join(str(seed) for seed in row.seeds), f"{row.mean:.4f}",
            "" if row.standard_error is None else f"{row.standard_error:.4f}",
            "" if row.compared_paper is None else f"{row.paper:g}",
            "" if row.published_apart is None else f"{row.paper:g}",
            "" if comparison is None else "yes" if comparison.comparable else "no",
            "" if comparison is None else comparison.words,
            row.source if row.paper is not None else "", row.citation_key if row.paper is not None else "",
            row.select,
            "" if row.reported is None else statistic_in_words(row.reported),
            "" if row.reported is None else row.reported.get("model_reported", ""),
            "" if by_paper is None or by_paper.value is None else f"{by_paper.value:.4f}",
            "" if by_paper is None or by_paper.spread_value is None else f"{by_paper.spread_value:.4f}",
            "" if by_paper is None else by_paper.words,
            "" if by_paper is None or by_paper.reported.get("min_train_exact_match") is None else by_paper.excluded,
            row.differences_in_words,
            "" if against is None or against.p_value is None else f"{against.p_value:.6g}",
            "" if against is None else against.method,
            *(("", "", "") if interval is None else
              (f"{interval[0][0]:.4f}", f"{interval[0][1]:.4f}", interval[1])),
            row.ledger_status]


def csv_table(rows: Iterable[ReportRow]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow(csv_fields(row))
    return buffer.getvalue()
