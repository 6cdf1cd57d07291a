"""`write_report`: every format of the report over evaluated run folders — `PREFIX.md`, `PREFIX.csv`, `PREFIX.tex`
with its references in `PREFIX.bib`, `PREFIX.html` and the figures under `PREFIX_files/` — drawing each figure only
where the runs hold what it needs and saying what is missing instead of failing."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from benchbuild.atomic import work_directory
from benchbuild.errors import BenchbuildError
from benchbuild.report import analyses, figures
from benchbuild.report.csv_table import csv_table
from benchbuild.report.figures import Figure, FigureFolder
from benchbuild.report.formats import FORMATS
from benchbuild.report.grid import DEFAULT_RULE, Grid, csv_grid, grid_report, html_grid, latex_grid, markdown_grid
from benchbuild.outputs import MARKDOWN_SIGNATURE
from benchbuild.report.markdown import markdown_table, text as markdown_text
from benchbuild.report.rows import ReportRow, build_report
from benchbuild.report.runs import BenchmarkFolders, RunSummary, read_runs
from benchbuild.report.significance import compare_with_best


@dataclass
class Report:
    """What `write_report` wrote: the table rows, the files, the figures and the notes on what is missing."""

    rows: list[ReportRow]
    files: list[Path] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    grid: Grid | None = None  # the runs' hyperparameter grid, when some set architecture keys


def output_path(prefix: Path, suffix: str) -> Path:
    return prefix.with_name(prefix.name + suffix)


def write_report(run_dirs: Sequence[str | Path], prefix: str | Path, formats: Sequence[str] = FORMATS,
                 data_dirs: Sequence[str | Path] = (), grid_rule: str = DEFAULT_RULE) -> Report:
    """Write the asked formats under `prefix`; the figures are drawn for `tex` (PDFs) and `html` (PNGs), and `tex`
    comes with `PREFIX.bib`, the BibTeX entries its `\\citet`s cite (`papers.bibtex_file`). The main tables mark
    the rows that differ significantly from the best of their column (`significance.compare_with_best`). Runs of a
    hyperparameter grid (some set architecture keys) show the configuration `grid_rule` picks per model and
    benchmark in every table and figure, with every configuration's mean listed (`report.grid`).

    Everything is written beside the outputs first and moved into place at the end, so a killed report leaves the
    old report whole (its page and its figures); an existing output is replaced only when a report wrote it. A run
    folder given twice counts once; a failed run (its loss diverged) is left out with a note."""
    prefix = Path(prefix)
    targets = check_report_outputs(prefix, formats, [*run_dirs, *data_dirs])
    folders = BenchmarkFolders(data_dirs)
    run_dirs, notes = usable_runs(run_dirs)
    runs = read_runs(run_dirs)
    evaluated = [run for run in runs if run.evaluations]
    if not evaluated:
        raise BenchbuildError(f"{runs[0].folder} has no metrics.json: run `benchbuild eval --run {runs[0].folder}` "
                              "first" if len(runs) == 1 else "none of the run folders has a metrics.json: run "
                              "`benchbuild eval --run RUN_DIR` on them first")
    grid = grid_report(evaluated, grid_rule)
    report = Report(rows=grid.rows if grid else build_report([run.folder for run in evaluated]), notes=notes,
                    grid=grid)
    report.notes += missing_pieces(runs, report.rows) + (grid.notes if grid else [])
    compare_with_best(report.rows)
    shown = runs if grid is None else [run for run in runs if run.folder in grid.selected]
    with work_directory(prefix) as stage:
        staged: list[tuple[Path, Path]] = []  # (written in the stage, its place)
        if "tex" in formats or "html" in formats:
            figure_folder = FigureFolder(stage / "figures")
            drawn, notes = draw_figures(report.rows, shown, folders, data_dirs, figure_folder)
            final = targets["figures"]
            report.figures += [dataclasses.replace(figure, png=final / figure.png.name, pdf=final / figure.pdf.name)
                               for figure in drawn]
            report.notes += notes
            staged.append((figure_folder.folder, final))
        texts = {}
        if "md" in formats:
            notes = "".join(f"- {markdown_text(note)}\n" for note in report.notes)
            # What the runs lack goes first, as on the HTML page (README "Models: train, evaluate, score, report").
            texts["md"] = (f"{MARKDOWN_SIGNATURE}\n\n" + (f"## What is missing\n\n{notes}\n" if notes else "")
                           + markdown_table(report.rows) + (markdown_grid(grid) if grid else ""))
        if "csv" in formats:
            texts["csv"] = csv_grid(grid) if grid else csv_table(report.rows)
        if "tex" in formats:
            from benchbuild.report.latex import latex_table

            from benchbuild.papers import bibtex_file

            texts["tex"] = latex_table(report.rows, targets["bib"].name) + (latex_grid(grid) if grid else "")
            texts["bib"] = (f"% Written by `benchbuild report`: the references {targets['tex'].name} cites.\n"
                            + bibtex_file())
        if "html" in formats:
            from benchbuild.report.html import render_page

            texts["html"] = render_page(report.rows, runs, report.figures, report.notes, targets["html"],
                                        grid=html_grid(grid) if grid else None)
        for name, text in texts.items():
            (stage / name).write_text(text, encoding="utf-8")
            staged.append((stage / name, targets[name]))
            report.files.append(targets[name])
        _move_into_place(staged)
    return report


def check_report_outputs(prefix: Path, formats: Sequence[str], inputs: Sequence[str | Path]) -> dict[str, Path]:
    """The report's output paths by format (and `bib`: `PREFIX.bib` with `tex`; `figures`: `PREFIX_files/`), each
    checked before any work: none is an input, and an existing one is replaced only when a report wrote it."""
    from benchbuild.outputs import check_output, check_path_text

    check_path_text(str(prefix), "--out")
    if prefix.name in ("", ".", ".."):
        raise BenchbuildError(f"--out {prefix} must name a file prefix (e.g. runs/report), not a folder")
    targets = {name: output_path(prefix, f".{name}") for name in formats}
    if "tex" in formats:
        targets["bib"] = output_path(prefix, ".bib")
    if "tex" in formats or "html" in formats:
        targets["figures"] = output_path(prefix, "_files")
    given = [("a run folder or --data", Path(path)) for path in inputs]
    for name, path in targets.items():
        check_output(path, "--out", "figures" if name == "figures" else "report", inputs=given, overwrite=True)
    return targets


def usable_runs(run_dirs: Sequence[str | Path]) -> tuple[list[Path], list[str]]:
    """The run folders to report, each once (a folder named twice, or by two paths, is one run), less failed runs;
    and a note for each left out."""
    from benchbuild.run_folder import read_run, unfinished_note

    kept, seen, notes = [], {}, []
    for folder in map(Path, run_dirs):
        key = folder.resolve()
        if key in seen:
            notes.append(f"{folder} was given twice (as {seen[key]}): counted once")
            continue
        seen[key] = folder
        run = read_run(folder)
        if run.get("status") == "failed":
            notes.append(f"{folder} is left out: it failed at step {run.get('failed_at_step')} ({run.get('failure')})")
            continue
        if (unfinished := unfinished_note(run)) is not None:
            notes.append(f"{folder} has not finished training ({unfinished}): its scores, if any (eval "
                         "--allow-unfinished), are not a finished run's")
        kept.append(folder)
    if not kept:
        raise BenchbuildError("every run folder given failed: " + "; ".join(notes))
    return kept, notes


def _move_into_place(staged: list[tuple[Path, Path]]) -> None:
    """Rename each staged output over its place: the figure folder (the old one set aside, then removed) first, so a
    page never links to figures that are not there yet."""
    import os
    import shutil

    for written, place in staged:
        if written.is_dir():
            aside = place.with_name(f".{place.name}.replaced-{os.getpid()}")
            if place.exists():
                os.replace(place, aside)
            os.replace(written, place)
            shutil.rmtree(aside, ignore_errors=True)
        else:
            os.replace(written, place)


def missing_pieces(runs: Sequence[RunSummary], rows: Sequence[ReportRow]) -> list[str]:
    """What the report cannot show, one sentence each: runs not evaluated, runs without validation lines or
    predictions, model × benchmark cells of one seed, and headline cells without a paper number."""
    from benchbuild.report.headline import Column, headline_columns

    notes = []
    repeated = {(row.model, row.benchmark, row.split): row.repeated_seeds for row in rows if row.repeated_seeds}
    for (model, benchmark, split), seeds in repeated.items():
        notes.append(f"{model} on {benchmark} ({split}): seed {', '.join(map(str, dict.fromkeys(seeds)))} was given "
                     "by more than one run of the same configuration: counted once (the first run given).")
    for run in runs:
        if not run.evaluations:
            notes.append(f"{run.folder} has no metrics.json: left out of the tables (run `benchbuild eval --run "
                         f"{run.folder}`).")
        if not run.validations:
            notes.append(f"{run.folder} has no validation lines in train_log.jsonl: no learning curve for it.")
        for evaluation in run.evaluations:
            if evaluation.predictions_file is None:
                notes.append(f"{evaluation.metrics_file.parent} has no predictions.jsonl: no error view for "
                             f"{run.label} on {evaluation.benchmark}.")
    headline = set(headline_columns(rows))
    unreported: dict[str, list[str]] = {}
    for row in rows:
        if Column.of(row) not in headline:
            continue
        cell = f"{row.model} on {row.benchmark} ({row.split})"
        if len(row.values) == 1:
            notes.append(f"{cell}: one seed ({row.seeds[0]}), so no standard error.")
        if row.paper is None:
            unreported.setdefault(cell, []).append(row.metric)
    notes += [f"{cell}: the catalogue has no paper number for {', '.join(metrics)}."
              for cell, metrics in unreported.items()]
    return list(dict.fromkeys(notes))


def draw_figures(rows: Sequence[ReportRow], runs: Sequence[RunSummary], folders: BenchmarkFolders,
                 data_dirs: Sequence[str | Path], out: FigureFolder) -> tuple[list[Figure], list[str]]:
    """Every figure the runs (and `--data` folders) allow, and a note for each one they almost allow."""
    drawn: list[Figure] = []
    notes: list[str] = []
    trained: dict[str, list[RunSummary]] = {}
    for run in runs:
        if run.validations:
            trained.setdefault(run.trained_on, []).append(run)
    for benchmark, of_benchmark in sorted(trained.items()):
        drawn.append(figures.learning_curves(benchmark, of_benchmark, out))
    results = figures.results_bars(rows, out)
    if results is not None:
        drawn.append(results)
    spread = figures.seed_spread(rows, out)
    if spread is not None:
        drawn.append(spread)
    drawn += _degree_figures(runs, folders, out, notes)
    drawn += _noun_adjective_figures(runs, folders, out, notes)
    for run in runs:
        weights = run.folder / "model.safetensors"
        try:
            biases = analyses.relative_biases(weights) if weights.is_file() else {}
        except Exception as error:  # noqa: BLE001 - safetensors raises several kinds for a truncated file
            notes.append(f"{weights} cannot be read ({type(error).__name__}): no relative-position bias figure.")
            continue
        if biases:
            drawn.append(figures.relative_position_biases(run, biases, out))
    for folder in map(Path, data_dirs):
        figure = _data_figure(folder, folders, out)
        if figure is None:
            notes.append(f"--data {folder}: no figure for a {folders.family(folder)} benchmark (degree histograms "
                         "need a degree column, length histograms a SCAN benchmark).")
        else:
            drawn.append(figure)
    return drawn, notes


def _evaluations_by_split(runs: Sequence[RunSummary]):
    """(benchmark, split) -> model -> [(run, evaluation)], runs in seed order."""
    grouped: dict[tuple[str, str], dict[str, list]] = {}
    for run in sorted(runs, key=lambda run: (run.model, str(run.seed))):
        for evaluation in run.evaluations:
            grouped.setdefault((evaluation.benchmark, evaluation.split), {}).setdefault(run.model, []).append(
                (run, evaluation))
    return dict(sorted(grouped.items()))


def _degree_figures(runs, folders: BenchmarkFolders, out: FigureFolder, notes: list[str]) -> list[Figure]:
    drawn = []
    for (benchmark, split), models in _evaluations_by_split(runs).items():
        buckets: dict[str, list] = {}
        for model, evaluated in models.items():
            for run, evaluation in evaluated:
                found = analyses.degree_buckets(evaluation, folders.rows(evaluation))
                if found:
                    buckets.setdefault(model, []).append(found)
                elif benchmark.startswith("react/"):
                    notes.append(f"{run.label} on {benchmark} ({split}): no BLEU by degree (metrics.json has none "
                                 "and the benchmark folder with its degree column was not found: pass --data).")
        if buckets:
            drawn.append(figures.bleu_by_degree(f"{benchmark} ({split})", buckets, out))
    return drawn


def _noun_adjective_figures(runs, folders: BenchmarkFolders, out: FigureFolder, notes: list[str]) -> list[Figure]:
    drawn = []
    lemmatizer = None
    for (benchmark, split), models in _evaluations_by_split(runs).items():
        if not any("comp" in evaluation.metrics for evaluated in models.values() for _, evaluation in evaluated):
            continue
        scores: dict[str, list] = {}
        for model, evaluated in models.items():
            for run, evaluation in evaluated:
                rows, predictions = folders.rows(evaluation), evaluation.predictions()
                if not analyses.has_pair_columns(rows) or len(predictions) != len(rows):
                    notes.append(f"{run.label} on {benchmark} ({split}): no COMP per pair (it needs predictions.jsonl "
                                 "and the benchmark folder's test rows: pass --data).")
                    continue
                if lemmatizer is None:
                    from benchbuild.french import FrenchLemmatizer

                    lemmatizer = FrenchLemmatizer()
                scores.setdefault(model, []).append(analyses.pair_scores(
                    [p["prediction"] for p in predictions], rows, lemmatizer))
        if scores:
            drawn.append(figures.noun_adjective_pairs(f"{benchmark} ({split})", scores, out))
    return drawn


def _data_figure(folder: Path, folders: BenchmarkFolders, out: FigureFolder) -> Figure | None:
    """The degree histogram of a benchmark with a degree column, else the length histograms of a SCAN one."""
    from benchbuild.benchmark import load_splits
    from benchbuild.evaluation.scoring import benchmark_label

    splits = load_splits(folder)
    degrees = analyses.split_degrees({name: split["degree"] for name, split in splits.items()
                                      if "degree" in split.column_names})
    if degrees:
        return figures.degree_histogram(benchmark_label(folder), degrees, out)
    if folders.family(folder) == "scan":
        return figures.length_histograms(benchmark_label(folder), analyses.split_lengths(
            {name: (split["source"], split["target"]) for name, split in splits.items()}), out)
    return None
