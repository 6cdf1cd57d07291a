"""The report computes our runs' number with the statistic the paper used (median or mean, IQR or std, the runs it
leaves out by train exact match), says what it is, and footnotes rows whose recipe differs from the paper or whose
paper number is another model's; a paper number summarising more runs than ours is shown apart from ours. The runs
are real: three seeds of a tiny variant of the catalogue's `transformer` trained with `score_train`, so each run.json
records its train exact match."""

from __future__ import annotations

import csv
import io
import json
import random
import re
import shutil
import statistics
import tomllib
from pathlib import Path

import pytest
from small_inputs import write_benchmark

from benchbuild.report.markdown import APART_HEADING, markdown_table
from benchbuild.report.rows import PaperStatistic, build_report
from benchbuild.zoo.catalogue import CATALOGUE

VARIANT = """\
name = "tiny_median"
paper = "test"
summary = "The catalogue's transformer, shrunk: its [recipe.scan] and [fidelity.scan], with a budget of seconds."
extends = "transformer"

[architecture]
d_model = 32
num_heads = 4
d_ff = 64
encoder_layers = 1
decoder_layers = 1
dropout = 0.0
attention_dropout = 0.0

[recipe.scan]
steps = 150
batch_size = 16
learning_rate = 5e-3
eval_every = 50
"""

REPORTED = """
[[reported]]
benchmark = "scan/tiny"
recipe = "scan"
metric = "exact_match"
value = 91.0
table = "test Table 1"
statistic = "median"
runs = 25
min_train_exact_match = {threshold}
spread = "iqr"
spread_value = 10.0

[[reported]]
benchmark = "scan/tiny"
recipe = "scan"
metric = "bleu"
value = 50.0
table = "test Table 2"
statistic = "mean"
runs = 3
spread = "std"
spread_value = 1.5
model_reported = "the GRU + attention of another paper"
"""


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> list[Path]:
    """Three seeds trained with `score_train` and evaluated on the test split of a small SCAN benchmark."""
    from benchbuild.evaluation.evaluate import evaluate_run
    from benchbuild.scan.grammar import generate
    from benchbuild.training.loop import train

    root = tmp_path_factory.mktemp("statistics")
    examples = [example for example in generate() if len(example.actions.split()) <= 4]
    random.Random(0).shuffle(examples)
    rows = [{"id": f"scan-{i}", "source": e.command, "target": e.actions} for i, e in enumerate(examples[:186])]
    data = write_benchmark(root / "scan-tiny", {"train": rows[:150], "validation": rows[174:], "test": rows[150:174]},
                           "scan", "tiny")
    entry = root / "tiny_median.toml"
    entry.write_text(VARIANT, encoding="utf-8")
    runs = []
    for seed in range(3):
        run = root / f"seed{seed}"
        train(entry, data, run, seed=seed, device="cpu", progress=False, overrides={"score_train": True})
        evaluate_run(run, data, split="test", device="cpu")
        runs.append(run)
    return runs


def recorded(run: Path) -> tuple[float, float, float]:
    """(test exact match, test BLEU, train exact match) as the run folder's files hold them."""
    metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
    return metrics["exact_match"], metrics["bleu"]["score"], json.loads((run / "run.json").read_text())[
        "train_exact_match"]


def threshold_between_the_two_lowest(runs: list[Path]) -> float:
    """A train exact match threshold that leaves out the run(s) with the lowest one and keeps the rest."""
    trains = sorted({recorded(run)[2] for run in runs})
    assert len(trains) >= 2, f"the seeds should reach different train exact matches: {trains}"
    return (trains[0] + trains[1]) / 2


def judged_by(tmp_path: Path, runs: list[Path], reported: str, entry: Path | None = None) -> list[Path]:
    """Copies of the runs' run.json and metrics.json whose model entry is `entry` (default: the variant with
    `reported` rows written under tmp_path), as if the catalogue had been edited after training."""
    if entry is None:
        entry = tmp_path / "tiny_median.toml"
        entry.write_text(VARIANT + reported, encoding="utf-8")
    copies = []
    for run in runs:
        copy = tmp_path / run.name
        copy.mkdir()
        record = json.loads((run / "run.json").read_text(encoding="utf-8"))
        record["model_entry"] = str(entry)
        (copy / "run.json").write_text(json.dumps(record), encoding="utf-8")
        shutil.copy(run / "metrics.json", copy / "metrics.json")
        copies.append(copy)
    return copies


def row_of(rows, metric: str):
    return next(row for row in rows if row.metric == metric)


def test_the_median_leaves_out_runs_below_the_papers_train_exact_match(trained, tmp_path):
    threshold = threshold_between_the_two_lowest(trained)
    row = row_of(build_report(judged_by(tmp_path, trained, REPORTED.format(threshold=threshold))), "exact_match")
    kept = [test for test, _, train in map(recorded, trained) if train > threshold]
    everything = [test for test, _, _ in map(recorded, trained)]
    assert 1 <= len(kept) < len(everything)
    by_paper = row.by_paper_statistic
    assert by_paper.value == statistics.median(kept)
    assert by_paper.value != statistics.median(everything)  # the left-out run changes the median: it was left out
    quartiles = statistics.quantiles(kept, n=4, method="inclusive") if len(kept) > 1 else None
    assert by_paper.spread_value == (None if quartiles is None else pytest.approx(quartiles[2] - quartiles[0]))
    excluded = len(everything) - len(kept)
    assert (by_paper.runs, by_paper.excluded, by_paper.unrecorded) == (3, excluded, 0)
    assert by_paper.words == (f"median of 3 runs ({excluded} excluded: train exact match ≤ {threshold:g}%); the "
                              "paper: median of 25")
    # The mean ± s.e. over every run is still there.
    assert row.mean == pytest.approx(statistics.fmean(everything))


def test_a_run_without_a_recorded_train_exact_match_is_kept_and_the_row_says_so(trained, tmp_path):
    threshold = threshold_between_the_two_lowest(trained)
    copies = judged_by(tmp_path, trained, REPORTED.format(threshold=threshold))
    lowest = min(copies, key=lambda copy: recorded(copy)[2])
    record = json.loads((lowest / "run.json").read_text())
    del record["train_exact_match"]
    (lowest / "run.json").write_text(json.dumps(record))
    by_paper = row_of(build_report(copies), "exact_match").by_paper_statistic
    others = [recorded(copy) for copy in copies if copy != lowest]
    kept = [test for test, _, train in others if train > threshold] + [json.loads(
        (lowest / "metrics.json").read_text())["exact_match"]]
    assert by_paper.value == statistics.median(kept) and (by_paper.excluded, by_paper.unrecorded) == (
        len(copies) - len(kept), 1)
    assert "train exact match not recorded for 1 run: exclusion not applied to it" in by_paper.words


def test_a_mean_with_a_standard_deviation_is_the_sample_standard_deviation_of_every_run(trained, tmp_path):
    row = row_of(build_report(judged_by(tmp_path, trained, REPORTED.format(threshold=0.0))), "bleu")
    bleu = [score for _, score, _ in map(recorded, trained)]
    by_paper = row.by_paper_statistic
    assert by_paper.value == pytest.approx(statistics.fmean(bleu))
    assert by_paper.spread_value == pytest.approx(statistics.stdev(bleu))
    assert by_paper.words == "mean of 3 runs"  # as many runs as the paper's: nothing to add
    assert by_paper.text == f"{statistics.fmean(bleu):.2f} ± {statistics.stdev(bleu):.2f} (std)"


def test_a_run_exactly_at_the_threshold_is_left_out_as_002_leaves_it_out():
    """002 App. B: "we excluded runs in which training accuracy did not get above 10%": 10% itself is out."""
    reported = {"statistic": "median", "runs": 25, "min_train_exact_match": 10.0}
    by_paper = PaperStatistic.of([3.0, 5.0, 7.0], [10.0, 10.5, 99.0], reported)
    assert (by_paper.excluded, by_paper.value) == (1, 6.0)


def test_when_every_run_is_left_out_there_is_no_number_and_the_words_say_why():
    reported = {"statistic": "median", "runs": 25, "min_train_exact_match": 10.0, "spread": "std"}
    by_paper = PaperStatistic.of([3.0, 5.0], [2.0, 9.5], reported)
    assert (by_paper.value, by_paper.spread_value, by_paper.text) == (None, None, "—")
    assert by_paper.words == "median of 2 runs (2 excluded: train exact match ≤ 10%); the paper: median of 25"
    single = PaperStatistic.of([3.0, 5.0], [None, None], {"statistic": "single", "runs": 1})
    assert (single.value, single.words) == (4.0, "mean of 2 runs; the paper: a single run")


def transformer_differences() -> list[str]:
    """The `what`s of the catalogue transformer's [fidelity.scan] differences, read from its file."""
    with open(CATALOGUE / "transformer.toml", "rb") as handle:
        return [row["what"] for row in tomllib.load(handle)["fidelity"]["scan"]["differences"]]


def test_markdown_footnotes_the_recipes_differences_and_a_paper_number_of_another_model(trained, tmp_path):
    copies = judged_by(tmp_path, trained, REPORTED.format(threshold=0.0))
    markdown = markdown_table(build_report(copies))
    table, _, rest = markdown.partition("\n\n")
    lines = {line.split(" | ")[3]: line for line in table.splitlines()[2:]}  # by metric
    assert all(line.startswith("| tiny_median [1] |") for line in lines.values())
    # Three runs, as many as the paper's BLEU: beside ours; 25 for its exact match: apart, saying so.
    assert " | 50 [2] | mean of 3 runs, ± 1.5 (std) | test Table 2 | yes |" in lines["bleu"]
    assert " |  |  |  | no: 3 seeds, the paper reports the median of 25 |" in lines["exact_match"]
    apart = rest.split(f"## {APART_HEADING}")[1]
    assert ("| tiny_median | scan/tiny | test | exact_match | 91 | median of 25 runs, runs with train exact match "
            "≤ 0% excluded, ± 10 (IQR) | test Table 1 | 3 seeds, the paper reports the median of 25 |") in apart
    differences = transformer_differences()
    assert differences, "the catalogue transformer should list differences for its scan recipe"
    notes = "\n".join(line for line in rest.splitlines() if re.match(r"\d+\. ", line))
    assert notes.splitlines() == [
        f"1. tiny_median as trained here differs from its paper (recipe scan: {', '.join(differences)}): "
        f"`benchbuild zoo --model {tmp_path / 'tiny_median.toml'}` for details.",
        "2. The paper's number (50, test Table 2) is for the GRU + attention of another paper, not for tiny_median as "
        "benchbuild builds it."]


def test_a_catalogue_models_footnote_names_it_for_benchbuild_zoo(trained, tmp_path):
    copies = judged_by(tmp_path, trained[:1], "", entry=CATALOGUE / "transformer.toml")
    row = build_report(copies)[0]
    assert row.differences == {"scan": transformer_differences()}
    assert row.recipe_note.endswith("`benchbuild zoo --model transformer` for details.")


def test_the_csv_has_the_paper_statistic_and_the_footnotes_columns(trained, tmp_path):
    from benchbuild.report.write import write_report

    threshold = threshold_between_the_two_lowest(trained)
    copies = judged_by(tmp_path, trained, REPORTED.format(threshold=threshold))
    report = write_report(copies, tmp_path / "out" / "report", formats=("csv",))
    rows = {row["metric"]: row for row in csv.DictReader(io.StringIO(report.files[0].read_text(encoding="utf-8")))}
    kept = [test for test, _, train in map(recorded, trained) if train > threshold]
    exact = rows["exact_match"]
    assert exact["paper_statistic"] == (f"median of 25 runs, runs with train exact match ≤ {threshold:g}% excluded, "
                                        "± 10 (IQR)")
    assert float(exact["ours_by_paper_statistic"]) == pytest.approx(statistics.median(kept), abs=1e-4)
    assert exact["excluded_runs"] == str(3 - len(kept)) and exact["paper_model"] == ""
    assert (exact["paper"], exact["published"], exact["not_comparable_because"]) == (
        "", "91", "3 seeds, the paper reports the median of 25")
    assert exact["ours_statistic"].startswith(f"median of 3 runs ({3 - len(kept)} excluded")
    assert exact["differences"] == f"recipe scan: {', '.join(transformer_differences())}"
    bleu = rows["bleu"]
    assert (bleu["paper_model"], bleu["excluded_runs"]) == ("the GRU + attention of another paper", "")
    assert float(bleu["ours_spread"]) == pytest.approx(statistics.stdev(b for _, b, _ in map(recorded, trained)),
                                                       abs=1e-4)
    assert rows["chrf"]["paper_statistic"] == rows["chrf"]["ours_by_paper_statistic"] == ""


def test_latex_and_html_show_ours_as_the_paper_and_the_notes_under_the_table(trained, tmp_path):
    from markupsafe import escape

    from benchbuild.report.latex import escape as latex_escape
    from benchbuild.report.write import write_report

    threshold = threshold_between_the_two_lowest(trained)
    copies = judged_by(tmp_path, trained, REPORTED.format(threshold=threshold))
    write_report(copies, tmp_path / "out" / "report", formats=("tex", "html"))
    row = row_of(build_report(copies), "exact_match")
    by_paper = row.by_paper_statistic
    latex = (tmp_path / "out" / "report.tex").read_text(encoding="utf-8")
    model_line = next(line for line in latex.splitlines() if line.startswith("tiny\\_median"))

    def note(mark: str) -> str:
        return next(line for line in latex.splitlines() if f"\\footnotesize \\textsuperscript{{{mark}}}~" in line)

    recipe_mark = re.match(r"tiny\\_median\\textsuperscript\{(\d+)\} & ", model_line).group(1)
    differences = latex_escape(", ".join(transformer_differences()))
    assert f"~tiny\\_median as trained here differs from its paper (recipe scan: {differences}): " \
           "\\texttt{benchbuild zoo --model " in note(recipe_mark)
    # The runs left after the threshold: two or more give the median with its IQR; one (when two seeds tie at the
    # lowest train exact match, which the thread count decides) gives the median alone.
    shown = (f"${by_paper.value:.2f}$" if by_paper.runs - by_paper.excluded < 2
             else f"${by_paper.value:.2f}$ (IQR ${by_paper.spread_value:.2f}$)")
    as_paper = shown + "\\textsuperscript{"
    words_mark = model_line.split(as_paper)[1].split("}")[0]
    assert note(words_mark).endswith(f"~{latex_escape(by_paper.words)}}} \\\\") and "$\\leq$" in note(words_mark)
    paper_mark = re.search(r"\$50\^\{\w\}\$\\textsuperscript\{(\d+)\}", model_line).group(1)
    assert "~The paper's number (50, test Table 2) is for the GRU + attention of another paper" in note(paper_mark)
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    notes = page.split('<ol class="table-notes">')[1].split("</ol>")[0]
    assert str(escape(row.recipe_note.split("`")[0])) in notes and "<code>benchbuild zoo --model" in notes
    assert str(escape(row_of(build_report(copies), "bleu").paper_note)) in notes
    assert str(escape(f"{by_paper.text} ")) + "<small>" + str(escape(by_paper.words)) + "</small>" in page


def test_report_md_shows_names_that_look_like_html_or_hold_a_pipe_as_text_in_their_own_cell():
    """A model, benchmark or note is user text: rendered (here by markdown-it, GitHub's CommonMark with tables), the
    Markdown report shows it as written, as the HTML page does, instead of running it as HTML or splitting a cell."""
    from markdown_it import MarkdownIt

    from benchbuild.report.rows import ReportRow

    row = ReportRow(model="<img src=x onerror=alert(1)>", benchmark="scan/a|b", split="test", metric="exact_match",
                    values=[50.0], seeds=[0])
    html = MarkdownIt("commonmark").enable("table").render(markdown_table([row]))
    assert "<img" not in html
    body = html.split("<tbody>")[1]
    cells = body.split("<td>")[1:]
    assert len(cells) == 14  # the header's columns: the pipe stayed inside its cell
    assert cells[0].startswith("&lt;img src=x onerror=alert(1)&gt;") and cells[1].startswith("scan/a|b")
