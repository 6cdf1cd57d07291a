"""Like with like: the report sets a paper's number beside ours only when the runs were made as it was (the recipe
its `[[reported]]` row names, that recipe's whole budget, its checkpoint selection, the split the paper scores, as
many seeds as its statistic takes); otherwise it shows the number apart and says in words what differs. Papers are
named by authors and year, with their references (BibTeX beside the LaTeX, a list in the HTML and Markdown).

The runs are real and tiny: the catalogue's own `transformer` trained as the quickstart trains it (its `scan` recipe,
cut by --max-steps, on a benchmark labelled `scan/simple`, where the catalogue has Chaabouni et al.'s `scan_000`
number), and a small entry of the test's own whose `[[reported]]` row its runs either match or miss one way each."""

from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path

import pytest
from small_inputs import scan_grammar_rows, tiny_transformer_entry, write_benchmark

from benchbuild.ledger import load_ledger
from benchbuild.papers import PAPERS
from benchbuild.report.markdown import APART_HEADING
from benchbuild.protocol import PaperProtocol, RunProtocol, compare
from benchbuild.report.rows import build_report
from benchbuild.zoo.catalogue import load_entry

ENTRY = tiny_transformer_entry("tiny_reported", "scan", paper="000", steps=12, batch_size=16, learning_rate=3e-3,
                               eval_every=6, select="last") + """
[[reported]]
benchmark = "scan/tiny"
recipe = "scan"
metric = "exact_match"
value = 42.0
table = "000 Table 3"
statistic = "mean"
runs = 2
spread = "se"
spread_value = 1.0
"""


def scan_rows() -> list[dict[str, str]]:
    return scan_grammar_rows(186, 4, seed=0)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Every run of this file by what it shows, each trained and evaluated for real on a 150-row SCAN benchmark."""
    from benchbuild.evaluation.evaluate import evaluate_run
    from benchbuild.training.loop import train

    root = tmp_path_factory.mktemp("like-with-like")
    rows = scan_rows()
    splits = {"train": rows[:150], "validation": rows[174:], "test": rows[150:174]}
    simple = write_benchmark(root / "scan-simple", splits, "scan", "simple")
    tiny = write_benchmark(root / "scan-tiny", splits, "scan", "tiny")
    entry = root / "tiny_reported.toml"
    entry.write_text(ENTRY, encoding="utf-8")

    def trained(name: str, model: Path | str, data: Path, split: str = "test", **options) -> Path:
        run = root / name
        train(model, data, run, device="cpu", progress=False, **options)
        evaluate_run(run, data, split=split, device="cpu")
        return run

    return {
        # The quickstart's run: the catalogue's transformer (its own size: 3 steps of it take a second), its `scan`
        # recipe, --max-steps, --set eval_every=300.
        "quickstart": trained("quickstart", "transformer", simple, recipe="scan", max_steps=3,
                              overrides={"eval_every": 300}),
        "matching_seed0": trained("matching-seed0", entry, tiny, seed=0),
        "matching_seed1": trained("matching-seed1", entry, tiny, seed=1, overrides={"eval_every": 4}),
        "max_steps": trained("max-steps", entry, tiny, seed=2, max_steps=5),
        "set_steps": trained("set-steps", entry, tiny, seed=3, overrides={"steps": 5}),
        "by_validation": trained("by-validation", entry, tiny, seed=4, overrides={"select": "best_validation"}),
        "learning_rate": trained("learning-rate", entry, tiny, seed=5, overrides={"learning_rate": 0.01}),
        "validation_split": trained("validation-split", entry, tiny, seed=6, split="validation"),
    }


def only_row(run_dirs: list[Path], metric: str = "exact_match"):
    return next(row for row in build_report(run_dirs) if row.metric == metric)


def differences(run_dirs: list[Path]) -> list[str]:
    """The differences from the paper of the row that holds the last run given (runs of another configuration than
    the others form a row of their own)."""
    last = run_dirs[-1].resolve()
    return next(row for row in build_report(run_dirs) if row.metric == "exact_match"
                and any(path.resolve().is_relative_to(last) for path in row.metrics_files)).comparison.differences


def papers_budget_on_150_rows() -> int:
    """000's recipe on these 150 train rows: 250 epochs of batches of 256 (no row held out: it keeps the last)."""
    return math.ceil(250 * 150 / 256)


def test_the_quickstarts_report_says_why_the_papers_number_is_not_comparable(runs, tmp_path):
    from benchbuild.report.write import write_report

    row = only_row([runs["quickstart"]])
    assert (row.paper, row.source) == (100.0, "Chaabouni et al. (2021), Table 3")
    assert not row.comparable and row.compared_paper is None and row.published_apart == 100.0
    assert row.comparison.differences == [
        "recipe scan, the paper's number is scan_000's",
        f"trained 3 of {papers_budget_on_150_rows()} steps",
        "1 seed, the paper reports the mean of 3"]
    report = write_report([runs["quickstart"]], tmp_path / "report")
    markdown = report.files[0].read_text(encoding="utf-8")
    table, apart = markdown.split(f"## {APART_HEADING}")
    line = next(line for line in table.splitlines() if re.match(r"\| transformer( \[\d\])? \| scan/simple \| test \| "
                                                                 r"exact_match \|", line))
    cells = [cell.strip() for cell in line.split("|")[1:-1]]
    assert cells[8:11] == ["", "", ""]  # no paper number, statistic or source beside ours
    assert cells[11] == f"no: {row.comparison.words}"
    apart_line = next(line for line in apart.splitlines() if line.startswith("| transformer | scan/simple |"))
    assert apart_line.startswith("| transformer | scan/simple | test | exact_match | 100 | mean of 3 runs, ± 0 (s.e.); "
                                 "the best of N 3-seed means over App. A.1's grid, picked on the test set ")
    # The status the ledger file writes for this number (it moves as runs are filed; tests/test_ledger.py holds it
    # to what `assess` computes from the runs).
    written = load_ledger()[("transformer", "scan/simple", "exact_match", "000 Table 3")].status
    assert written in ("not run", "partial", "reproduced", "not reproduced")
    assert apart_line.endswith(f" | Chaabouni et al. (2021), Table 3 (benchbuild's ledger: {written}) | "
                               f"{row.comparison.words} |"), apart_line


def test_the_papers_scan_000_budget_is_counted_on_the_benchmark_the_run_trained_on():
    """The quickstart's addprim_jump run: 700 steps of `scan`, against 000's 250 epochs of its 14,670 train rows."""
    entry = load_entry("transformer")
    reported = next(row for row in entry.reported if row["benchmark"] == "scan/addprim_jump")
    run = RunProtocol.of({"seed": 0, "recipe_family": "scan", "steps_done": 700, "stopped_by": "step budget",
                          "select": "last", "validation": "none",
                          "benchmark": {"splits": {"train": {"rows": 14_670}, "test": {"rows": 7_706}}}})
    comparison = compare(PaperProtocol.of(entry.recipes, reported), [run], "scan/addprim_jump", "test")
    assert comparison.differences == ["recipe scan, the paper's number is scan_000's",
                                      "trained 700 of 14,327 steps", "1 seed, the paper reports the mean of 3"]


def test_runs_made_as_the_papers_number_was_are_set_beside_it(runs):
    row = only_row([runs["matching_seed0"], runs["matching_seed1"]])
    assert row.comparable and row.comparison_words == "yes"
    assert (row.compared_paper, row.published_apart) == (42.0, None)


def test_a_run_cut_by_max_steps_or_by_set_steps_is_not_compared(runs):
    seed0 = runs["matching_seed0"]
    # Each is a configuration of its own (another budget): a row of its own, one seed against the paper's two.
    one_seed = "1 seed, the paper reports the mean of 2"
    assert differences([seed0, runs["max_steps"]]) == ["trained 5 of 12 steps", one_seed]
    assert differences([seed0, runs["set_steps"]]) == ["trained 5 of 12 steps", one_seed]


def test_a_run_selected_by_validation_is_not_compared_with_a_paper_that_takes_the_last_checkpoint(runs):
    assert differences([runs["matching_seed0"], runs["by_validation"]]) == [
        "selected by validation exact match, the paper takes the last checkpoint",
        "1 seed, the paper reports the mean of 2"]


def test_a_recipe_key_set_otherwise_is_named_with_the_recipes_value(runs):
    assert differences([runs["matching_seed0"], runs["learning_rate"]]) == [
        "recipe keys changed: learning_rate 0.01 (the recipe's 0.003)", "1 seed, the paper reports the mean of 2"]


def test_fewer_seeds_than_the_papers_statistic_and_another_split_are_not_compared(runs):
    assert differences([runs["matching_seed0"]]) == ["1 seed, the paper reports the mean of 2"]
    row = next(row for row in build_report([runs["matching_seed0"], runs["validation_split"]])
               if (row.split, row.metric) == ("validation", "exact_match"))
    assert row.comparison.differences == ["scored on validation, the paper's number is on test",
                                          "1 seed, the paper reports the mean of 2"]


@pytest.fixture(scope="module")
def mixed_report(runs, tmp_path_factory):
    """Every format over rows compared (the two matching seeds on test) and rows shown apart (the quickstart's, and a
    matching entry's run scored on validation)."""
    from benchbuild.report.write import write_report

    prefix = tmp_path_factory.mktemp("mixed") / "report"
    return write_report([runs["matching_seed0"], runs["matching_seed1"], runs["validation_split"],
                         runs["quickstart"]], prefix)


def output(report, suffix: str) -> str:
    return next(path for path in report.files if path.suffix == suffix).read_text(encoding="utf-8")


def test_the_csv_keeps_compared_and_published_numbers_in_separate_columns(mixed_report):
    table = {row["model"]: row for row in csv.DictReader(io.StringIO(output(mixed_report, ".csv")))
             if (row["split"], row["metric"]) == ("test", "exact_match")}
    matching, quickstart = table["tiny_reported"], table["transformer"]
    assert (matching["paper"], matching["published"], matching["comparable"], matching["not_comparable_because"]) == \
        ("42", "", "yes", "")
    assert (quickstart["paper"], quickstart["published"], quickstart["comparable"]) == ("", "100", "no")
    assert quickstart["not_comparable_because"].startswith("recipe scan, the paper's number is scan_000's; trained 3 ")
    assert {row["paper_source"] for row in table.values()} == {"Chaabouni et al. (2021), Table 3"}
    assert {row["paper_citation_key"] for row in table.values()} == {"chaabouni2021"}


def test_papers_are_named_by_authors_and_year_in_every_format(mixed_report):
    for suffix in (".md", ".csv", ".html"):
        text = output(mixed_report, suffix)
        assert "Chaabouni et al. (2021), Table 3" in text, suffix
        assert "000 Table 3" not in text, suffix
    latex = output(mixed_report, ".tex")
    assert "\\citet{chaabouni2021}, Table 3" in latex and "000 Table 3" not in latex
    markdown = output(mixed_report, ".md")
    references = markdown.split("## References")[1].split("\n## ")[0]
    assert references.strip() == f"- Chaabouni et al. (2021): {PAPERS['000'].citation()}"


def test_latex_cites_the_paper_beside_a_compared_number_and_lists_the_others_apart(mixed_report):
    latex = output(mixed_report, ".tex")
    main, apart = latex.split("\\medskip")
    model_line = next(line for line in main.splitlines() if line.startswith("tiny\\_reported &"))
    mark = re.search(r"\$42\^\{(\w)\}\$", model_line).group(1)
    assert f"$^{{{mark}}}$~\\citet{{chaabouni2021}}, Table 3" in main
    quickstart_line = next(line for line in main.splitlines() if line.startswith("transformer"))
    assert "$100" not in quickstart_line and "n.c.\\textsuperscript{" in quickstart_line
    assert "not compared with the paper's number (100, in the table of published numbers below)" in main
    assert re.search(r"^transformer & scan/simple \(test\) & exact match & \$100\$ & \\citet\{chaabouni2021\}, Table 3 "
                     r"& recipe scan, the paper's number is scan\\_000's; trained 3 of \d+ steps; 1 seed, the paper "
                     r"reports the mean of 3 \\\\$", apart, re.MULTILINE)


def bibtex_entries(text: str) -> dict[str, dict[str, str]]:
    """The entries of a BibTeX text, `@type{key, name = {value}, ...}`, by key; fields by lower-case name. Refuses
    (AssertionError) unbalanced braces, a field without `=` or a braced value, and text between entries other than
    `%` comments."""
    entries, position = {}, 0
    while True:
        rest = text[position:]
        stripped = "\n".join(line for line in rest.splitlines() if not line.lstrip().startswith("%")).strip()
        if not stripped:
            return entries
        start = re.compile(r"\s*(?:%[^\n]*\n\s*)*@(\w+)\s*\{\s*([^,\s]+)\s*,").match(text, position)
        assert start, f"no entry at: {rest[:60]!r}"
        position, fields = start.end(), {}
        while True:
            field = re.compile(r"\s*(\w+)\s*=\s*\{").match(text, position)
            if field is None:
                closing = re.compile(r"\s*\}").match(text, position)
                assert closing, f"entry {start.group(2)} is not closed: {text[position:position + 60]!r}"
                position = closing.end()
                break
            depth, cursor = 1, field.end()
            while depth:
                assert cursor < len(text), f"unbalanced braces in {start.group(2)}.{field.group(1)}"
                depth += {"{": 1, "}": -1}.get(text[cursor], 0)
                cursor += 1
            fields[field.group(1).lower()] = text[field.end():cursor - 1]
            position = cursor
            separator = re.compile(r"\s*,").match(text, position)
            if separator:
                position = separator.end()
        entries[start.group(2)] = {"type": start.group(1), **fields}


def test_the_bibtex_beside_the_latex_parses_and_holds_every_key_it_cites(mixed_report):
    bib = next(path for path in mixed_report.files if path.suffix == ".bib")
    assert bib.name == "report.bib"
    entries = bibtex_entries(bib.read_text(encoding="utf-8"))
    assert set(entries) == {paper.bibtex_key for paper in PAPERS.values()}
    for key, fields in entries.items():
        assert fields["author"] and fields["title"] and re.fullmatch(r"\d{4}", fields["year"]), key
    assert entries["chaabouni2021"]["author"] == "Chaabouni, Rahma and Dessì, Roberto and Kharitonov, Eugene"
    assert entries["russin2020"]["pages"] == "313--327"
    assert entries["zheng2023layer"]["type"] == "misc" and entries["zheng2023real"]["type"] == "inproceedings"
    cited = set(re.findall(r"\\cite[tp]?\{([^}]+)\}", output(mixed_report, ".tex")))
    assert cited == {"chaabouni2021"} and cited <= set(entries)
    assert "\\bibliography{report}" in output(mixed_report, ".tex").splitlines()[0]


def test_the_html_page_lists_the_references_and_the_numbers_shown_apart(mixed_report):
    from markupsafe import escape

    page = output(mixed_report, ".html")
    references = page.split('<section id="references">')[1].split("</section>")[0]
    assert (f'<li id="ref-chaabouni2021"><strong>Chaabouni et al. (2021)</strong>: '
            f"{escape(PAPERS['000'].citation())}</li>") in references
    board = page.split('<table class="sortable leaderboard" data-benchmark="scan/simple"')[1].split("</table>")[0]
    assert "not compared: recipe scan, the paper&#39;s number is scan_000&#39;s" in board and ">100<" not in board
    apart = page.split('<table class="published" data-benchmark="scan/simple"')[1].split("</table>")[0]
    assert "<td>transformer</td><td>exact match</td><td class=\"number\">100</td>" in apart
    assert '<a href="#ref-chaabouni2021">Chaabouni et al. (2021), Table 3</a>' in apart
    compared = page.split('data-benchmark="scan/tiny" data-split="test"')[1].split("</table>")[0]
    assert '42 <small><a href="#ref-chaabouni2021">Chaabouni et al. (2021), Table 3</a></small>' in compared
    validation = page.split('<table class="published" data-benchmark="scan/tiny" data-split="validation"')[1]
    assert ("<td>scored on validation, the paper&#39;s number is on test; 1 seed, the paper reports the mean of "
            "2</td>") in validation.split("</table>")[0]
