"""The `report` command: tables, figures and an HTML page over evaluated runs, or `--compare` of two runs' numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from benchbuild.commands import console, out
from benchbuild.report.formats import format_option


def report_command(
    run_dirs: Annotated[Optional[list[Path]], typer.Argument(
        help="Evaluated run folders (seeds of a model are averaged).", show_default=False)] = None,
    prefix: Annotated[Optional[Path], typer.Option(
        "--out", help="Writes PREFIX.md, .csv, .tex with its references in .bib, .html and the figures in "
        "PREFIX_files/ (default: report.* beside the first run folder, in its parent folder).")] = None,
    formats: Annotated[str, typer.Option(
        "--format", callback=format_option,
        help="Comma-separated formats to write: md, csv, tex, html (figures come with tex and html).")
    ] = "md,csv,tex,html",
    data: Annotated[Optional[list[Path]], typer.Option(
        "--data", help="A benchmark folder (repeatable): its degree or length histograms, and its rows for figures "
        "whose evaluations did not record where their benchmark is.")] = None,
    compare: Annotated[Optional[tuple[Path, Path]], typer.Option(
        "--compare", metavar="A B", show_default=False,
        help="Instead of a report, test whether two runs, or two folders of runs (a model's seeds), differ on each "
        "benchmark split both evaluated: McNemar's exact test (exact match) and sacrebleu's paired bootstrap (BLEU) "
        "over the test rows, Welch's t-test over seeds; prints each p-value.")] = None,
) -> None:
    """Tables, figures and an HTML page of model × benchmark split: mean ± s.e. over seeds and, beside the paper's
    number where the runs were made as it was (else apart, saying what differs), ours by the paper's statistic."""
    from benchbuild.report.formats import parse_formats
    from benchbuild.report.markdown import markdown_table
    from benchbuild.report.write import write_report

    if compare is not None:
        from benchbuild.report.compare import compare_runs, comparison_text, run_group
        from benchbuild.report.runs import read_runs

        if run_dirs:
            raise typer.BadParameter("it takes its two runs or folders of runs itself: give no other run folder",
                                     param_hint="'--compare'")
        a_runs, b_runs = (read_runs(run_group(folder)) for folder in compare)
        out.print(comparison_text(str(compare[0]), a_runs, str(compare[1]), b_runs, compare_runs(a_runs, b_runs)),
                  markup=False, highlight=False, soft_wrap=True)
        return
    if not run_dirs:
        raise typer.BadParameter("give one or more evaluated run folders (or --compare A B)",
                                 param_hint="'run_dirs'")
    report = write_report(run_dirs, prefix if prefix is not None else run_dirs[0].resolve().parent / "report",
                          parse_formats(formats), data or ())
    out.print(markdown_table(report.rows), markup=False, highlight=False, soft_wrap=True)
    for note in report.notes:
        console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    console.print("wrote " + ", ".join(map(str, report.files))
                  + (f" and {len(report.figures)} figures in {report.figures[0].png.parent}" if report.figures else ""),
                  markup=False, highlight=False, soft_wrap=True)
    page = next((path for path in report.files if path.suffix == ".html"), None)
    if page is not None:
        console.print(f"open {page} in a browser", markup=False, highlight=False, soft_wrap=True)
