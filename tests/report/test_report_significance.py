"""The report tests every model against the best of its column, with the test `report --compare BEST MODEL` prints,
and marks the rows that differ significantly (`*`, at α = 0.05) in its HTML, LaTeX and Markdown tables, the p-value
in the CSV's `p_vs_best`; where no test can be run it says why instead of marking. The runs are real: a tiny
Transformer trained 150 steps and the same architecture after one step, on a SCAN benchmark whose test rows are
train rows, so training gets many of them right and one step none."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from small_inputs import scan_grammar_rows, tiny_transformer_entry, write_benchmark
from typer.testing import CliRunner

from benchbuild.cli import app
from benchbuild.report.write import write_report

def tiny_entry(name: str) -> str:
    """A one-layer Transformer small enough to train in seconds, 150 steps of batch 32 on SCAN."""
    return tiny_transformer_entry(name, "scan", steps=150, batch_size=32, learning_rate=5e-3, eval_every=150,
                                  select="last")


@dataclass(frozen=True)
class Runs:
    trained: Path  # tiny_trained, 150 steps, seed 0
    untrained: Path  # tiny_untrained, one step, seed 0
    twin: Path  # tiny_twin: tiny_untrained's architecture under another name, one step, seed 0


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Runs:
    from benchbuild.evaluation.evaluate import evaluate_run
    from benchbuild.training.loop import train

    root = tmp_path_factory.mktemp("significance")
    rows = scan_grammar_rows(162, 4, seed=0)
    test = [{**row, "id": f"test-{i}"} for i, row in enumerate(rows[:48])]
    data = write_benchmark(root / "scan-tiny", {"train": rows[:150], "validation": rows[150:], "test": test},
                           "scan", "tiny")

    def run(name: str, steps: int | None = None) -> Path:
        entry = root / f"{name}.toml"
        entry.write_text(tiny_entry(name), encoding="utf-8")
        folder = root / name
        train(entry, data, folder, seed=0, max_steps=steps, device="cpu", progress=False)
        evaluate_run(folder, data, split="test", device="cpu")
        return folder

    return Runs(run("tiny_trained"), run("tiny_untrained", steps=1), run("tiny_twin", steps=1))


def report(runs: list[Path], out: Path) -> dict[str, str]:
    """`write_report` over `runs`: each format's text by suffix."""
    written = write_report(runs, out / "report", formats=("md", "csv", "tex", "html"))
    return {path.suffix: path.read_text(encoding="utf-8") for path in written.files}


def csv_row(texts: dict[str, str], model: str, metric: str = "exact_match") -> dict[str, str]:
    return next(row for row in csv.DictReader(io.StringIO(texts[".csv"]))
                if (row["model"], row["metric"]) == (model, metric))


def printed_p(a: Path, b: Path, test: str) -> float:
    """The p-value `report --compare A B` prints for exact match in `test`."""
    result = CliRunner().invoke(app, ["report", "--compare", str(a), str(b)])
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if "exact match: A" in line and test in line)
    return float(re.search(r"p = ([0-9.e+-]+)", line).group(1))


def exact_match(run: Path) -> float:
    return json.loads((run / "metrics.json").read_text(encoding="utf-8"))["exact_match"]


def latex_line(texts: dict[str, str], model: str) -> str:
    return next(line for line in texts[".tex"].splitlines() if line.startswith(model.replace("_", "\\_") + " &"))


def markdown_cells(texts: dict[str, str], model: str, metric: str = "exact_match") -> dict[str, str]:
    """The Markdown table's row of `model` and `metric`, by column heading."""
    lines = texts[".md"].splitlines()
    header = next(line for line in lines if line.startswith("| model | benchmark |"))
    cells = (dict(zip((cell.strip() for cell in header.split("|")), (cell.strip() for cell in line.split("|"))))
             for line in lines if line.startswith(f"| {model} | "))
    return next(row for row in cells if row["metric"] == metric)


def html_row(texts: dict[str, str], model: str) -> str:
    return next(row for row in texts[".html"].split("<tr>") if f'data-sort="{model}"' in row)


def test_one_runs_csv_row_carries_its_bootstrap_interval_over_the_test_rows(runs, tmp_path):
    texts = report([runs.trained], tmp_path)
    row = csv_row(texts, "tiny_trained")
    recorded = json.loads((runs.trained / "metrics.json").read_text(encoding="utf-8"))["exact_match_ci"]
    assert recorded[0] < recorded[1], "a fixture whose interval has a width"
    assert [float(row["ci_low"]), float(row["ci_high"])] == pytest.approx(recorded, abs=1e-4)
    assert row["ci_basis"] == "bootstrap over the test rows (the run's metrics.json)"
    cells = markdown_cells(texts, "tiny_trained")  # the table printed and written as Markdown carries it too
    assert cells["ours: 95% CI"] == (f"[{recorded[0]:.2f}, {recorded[1]:.2f}]: bootstrap over the test rows "
                                     "(the run's metrics.json)")


def test_a_clearly_worse_model_gets_compares_p_value_and_is_marked_significant(runs, tmp_path):
    assert exact_match(runs.trained) >= 25.0 and exact_match(runs.untrained) == 0.0
    texts = report([runs.trained, runs.untrained], tmp_path)
    best, worse = csv_row(texts, "tiny_trained"), csv_row(texts, "tiny_untrained")
    assert (best["p_vs_best"], best["test_vs_best"]) == ("", "best")
    p = float(worse["p_vs_best"])
    assert p == pytest.approx(printed_p(runs.trained, runs.untrained, "McNemar's exact test"), rel=1e-3)
    assert p < 0.05 and worse["test_vs_best"] == ("McNemar's exact test against tiny_trained (48 test rows, seed 0 of "
                                                  "tiny_trained against seed 0 of tiny_untrained)")


def test_latex_html_and_markdown_mark_the_significant_row_and_state_the_level_and_test(runs, tmp_path):
    texts = report([runs.trained, runs.untrained], tmp_path)
    assert "\\textsuperscript{*}" in latex_line(texts, "tiny_untrained")
    assert "\\textsuperscript{*}" not in latex_line(texts, "tiny_trained")
    legend = next(line for line in texts[".tex"].splitlines() if "significantly different from the best" in line)
    assert "$\\alpha$ = 0.05" in legend and "McNemar's exact test" in legend and "Welch's t-test" in legend
    assert '<sup class="significant">*</sup>' in html_row(texts, "tiny_untrained")
    assert '<sup class="significant">' not in html_row(texts, "tiny_trained")
    page_legend = texts[".html"].split('<p class="significance">')[1].split("</p>")[0]
    assert "α = 0.05" in page_legend and "McNemar&#39;s exact test" in page_legend
    markdown = next(line for line in texts[".md"].splitlines()
                    if line.startswith("| tiny_untrained | scan/tiny | test | exact_match |"))
    assert re.search(r"\| p = [0-9.e-]+ \* in McNemar's exact test against tiny_trained \(48 test rows", markdown)
    assert "Against the best: *: significantly different from the best mean of its column" in texts[".md"]


def test_identical_runs_do_not_differ_and_nothing_is_marked(runs, tmp_path):
    assert (runs.untrained / "predictions.jsonl").read_text() == (runs.twin / "predictions.jsonl").read_text()
    texts = report([runs.untrained, runs.twin], tmp_path)
    # The two means tie: the first row with the best mean (tiny_twin) is the best, the other is tested against it.
    assert csv_row(texts, "tiny_twin")["test_vs_best"] == "best"
    assert csv_row(texts, "tiny_untrained")["p_vs_best"] == "1"
    assert printed_p(runs.twin, runs.untrained, "McNemar's exact test") == 1.0
    assert "\\textsuperscript{*}" not in texts[".tex"] and '<sup class="significant">' not in texts[".html"]


def test_two_seeds_each_are_tested_over_seeds_as_compare_does(runs, tmp_path):
    """Copies of the two runs as a second seed of each model: Welch's t-test over seeds, where both have two."""
    folders = []
    for run in (runs.trained, runs.untrained):
        for seed in (0, 1):
            copy = tmp_path / "runs" / run.name / f"seed{seed}"
            shutil.copytree(run, copy)
            record = json.loads((copy / "run.json").read_text(encoding="utf-8"))
            (copy / "run.json").write_text(json.dumps({**record, "seed": seed}), encoding="utf-8")
            metrics = json.loads((copy / "metrics.json").read_text(encoding="utf-8"))
            # The trained model's second seed one row better, so its numbers vary and Welch's test is defined.
            bump = 100.0 / 48 if seed and run == runs.trained else 0.0
            (copy / "metrics.json").write_text(json.dumps({**metrics, "exact_match": metrics["exact_match"] + bump}),
                                               encoding="utf-8")
            folders.append(copy)
    texts = report(folders, tmp_path / "out")
    worse = csv_row(texts, "tiny_untrained")
    # Two seeds: the 95% t-interval of the mean over them (1 degree of freedom), as the HTML leaderboard shows it.
    from scipy.stats import t as student

    seeds = [exact_match(runs.trained), exact_match(runs.trained) + 100.0 / 48]
    mean, error = sum(seeds) / 2, abs(seeds[1] - seeds[0]) / 2
    best = csv_row(texts, "tiny_trained")
    assert (float(best["ci_low"]), float(best["ci_high"])) == pytest.approx(
        student.interval(0.95, 1, loc=mean, scale=error), abs=1e-4)
    assert best["ci_basis"] == "t-interval of the mean over 2 seeds"
    low, high = student.interval(0.95, 1, loc=mean, scale=error)
    assert markdown_cells(texts, "tiny_trained")["ours: 95% CI"] == f"[{low:.2f}, {high:.2f}]: t-interval of the mean over 2 seeds"
    assert worse["test_vs_best"].startswith("Welch's t-test over seeds against tiny_trained (2 seeds of tiny_trained")
    assert float(worse["p_vs_best"]) == pytest.approx(
        printed_p(tmp_path / "runs" / runs.trained.name, tmp_path / "runs" / runs.untrained.name,
                  "Welch's t-test over seeds"), rel=1e-3)


@pytest.mark.parametrize("broken", ["no predictions", "other rows"])
def test_where_no_test_can_be_run_the_tables_say_why_instead_of_marking(runs, tmp_path, broken):
    copy = tmp_path / "untrained"
    shutil.copytree(runs.untrained, copy)
    if broken == "no predictions":
        (copy / "predictions.jsonl").unlink()
        why = f"{copy} has no predictions.jsonl"
    else:
        records = [json.loads(line) for line in (copy / "predictions.jsonl").read_text().splitlines()]
        (copy / "predictions.jsonl").write_text("".join(json.dumps({**record, "id": f"other-{i}"}) + "\n"
                                                        for i, record in enumerate(records)))
        why = "are not of the same rows (their ids differ)"
    texts = report([runs.trained, copy], tmp_path / "out")
    row = csv_row(texts, "tiny_untrained")
    assert row["p_vs_best"] == "" and row["test_vs_best"].startswith("no test against tiny_trained: ")
    assert why in row["test_vs_best"]
    assert "\\textsuperscript{*}" not in texts[".tex"] and '<sup class="significant">' not in texts[".html"]
    mark = re.search(r"\\textsuperscript\{(\d+)\}", latex_line(texts, "tiny_untrained")).group(1)
    note = next(line for line in texts[".tex"].splitlines() if f"\\textsuperscript{{{mark}}}~" in line)
    assert "tiny\\_untrained on scan/tiny (test), exact match: no test against the best mean (tiny\\_trained)" in note
    assert "no test against the best mean (tiny_trained)" in texts[".html"].split('<ol class="table-notes">')[1]
