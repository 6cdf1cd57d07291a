"""A paper's BLEU stands beside ours only when ours is computed as the paper's was: a run scored with 002's BLEU
(metrics.json's `paper_bleu`) shows it beside 002 Table 3's 36.8, while its sacreBLEU 13a BLEU is set apart with the
reason in words; a run evaluated before `paper_bleu` existed has only 13a BLEU, and the paper's number is shown apart
from it. The run is real and tiny: a one-layer Transformer trained on English→French pairs normalised as Lake &
Baroni's are, evaluated on a test split where one English sentence has several French targets."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from small_inputs import tiny_transformer_entry, write_benchmark

from benchbuild.report.markdown import APART_HEADING
from benchbuild.report.rows import build_report

ENTRY = tiny_transformer_entry("tiny_syntactic", "mt", paper="002", steps=150, batch_size=16, learning_rate=5e-3,
                               eval_every=150, select="last", bpe_vocab_size=100) + """
[[reported]]
benchmark = "lake_baroni_en_fr"
recipe = "mt"
metric = "bleu"
bleu = "nltk_multi_reference"
value = 36.8
table = "002 Table 3"
"""
SUBJECTS = [("i m", "je suis"), ("you re", "tu es"), ("he s", "il est"), ("she s", "elle est"),
            ("we re", "nous sommes"), ("they re", "ils sont")]
ADJECTIVES = [("tall", "grand"), ("sad", "triste"), ("tired", "fatigue"), ("ready", "pret"), ("late", "en retard"),
              ("happy", "heureux"), ("busy", "occupe")]
TEST = [("i m not sad .", "je ne suis pas triste ."), ("you re not tired .", "tu n es pas fatigue ."),
        ("you re not tired .", "vous n etes pas fatigue ."), ("he s not late .", "il n est pas en retard ."),
        ("we re not busy .", "nous ne sommes pas occupes ."), ("we re not busy .", "on n est pas occupe ."),
        ("they re not ready .", "ils ne sont pas prets ."), ("they re not ready .", "elles ne sont pas pretes ."),
        ("she s not happy .", "elle n est pas heureuse ."), ("she s not happy .", "elle est malheureuse .")]
REASON = "sacreBLEU 13a BLEU, not 002's multi-reference NLTK BLEU"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """`scored`: the run as `benchbuild eval` leaves it; `only_13a`: a copy of it whose metrics.json has no
    `paper_bleu`, as an evaluation written before it existed."""
    from benchbuild.evaluation.evaluate import evaluate_run
    from benchbuild.training.loop import train

    root = tmp_path_factory.mktemp("paper-bleu")
    pairs = [(f"{english} {adjective} .", f"{french} {french_adjective} .") for english, french in SUBJECTS
             for adjective, french_adjective in ADJECTIVES]
    pairs += [(f"{english} not {adjective} .", f"{french.replace(' ', ' ne ', 1)} pas {french_adjective} .")
              for english, french in SUBJECTS[:2] for adjective, french_adjective in ADJECTIVES]
    rows = [{"id": f"pair-{index}", "source": source, "target": target} for index, (source, target) in
            enumerate(pairs)]
    test = [{"id": f"test-{index}", "source": source, "target": target} for index, (source, target) in
            enumerate(TEST)]
    data = write_benchmark(root / "lake-baroni", {"train": rows, "test": test}, "lake_baroni_en_fr",
                           "lake_baroni_en_fr")
    entry = root / "tiny_syntactic.toml"
    entry.write_text(ENTRY, encoding="utf-8")
    scored = root / "scored"
    train(entry, data, scored, seed=0, device="cpu", progress=False)
    evaluate_run(scored, data, split="test", device="cpu")
    only_13a = root / "only-13a"
    shutil.copytree(scored, only_13a)
    metrics = json.loads((only_13a / "metrics.json").read_text(encoding="utf-8"))
    del metrics["paper_bleu"]
    (only_13a / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
    return {"scored": scored, "only_13a": only_13a}


def rows_by_metric(run: Path) -> dict[str, object]:
    return {row.metric: row for row in build_report([run])}


def test_eval_scores_the_lake_baroni_test_split_with_002s_bleu(runs):
    metrics = json.loads((runs["scored"] / "metrics.json").read_text(encoding="utf-8"))
    entry = metrics["paper_bleu"]["nltk_multi_reference"]
    assert (entry["paper"], entry["rows"], entry["rows_skipped"]) == ("002", 10, 0)
    assert entry["how"].startswith("002's BLEU (evaluate_bleu.py): NLTK corpus_bleu")
    assert "tok:13a" in metrics["bleu"]["signature"]  # ours, kept as it was


def test_002s_bleu_stands_beside_the_papers_number_and_13a_is_set_apart_with_the_reason(runs):
    rows = rows_by_metric(runs["scored"])
    paper_way, ours = rows["bleu_nltk_multi_reference"], rows["bleu"]
    metrics = json.loads((runs["scored"] / "metrics.json").read_text(encoding="utf-8"))
    assert paper_way.mean == pytest.approx(metrics["paper_bleu"]["nltk_multi_reference"]["value"])
    assert paper_way.compared_paper == 36.8 and paper_way.comparison_words == "yes"
    assert ours.mean == pytest.approx(metrics["bleu"]["score"])
    assert ours.compared_paper is None and ours.published_apart == 36.8
    assert ours.comparison.differences == [REASON]


def test_a_run_with_only_13a_bleu_shows_the_papers_number_apart_with_the_reason(runs):
    rows = rows_by_metric(runs["only_13a"])
    assert "bleu_nltk_multi_reference" not in rows
    assert rows["bleu"].published_apart == 36.8 and rows["bleu"].comparison_words == f"no: {REASON}"


def test_a_paper_bleu_computed_another_way_stands_beside_no_paper_way_of_ours(runs, tmp_path):
    # The same evaluation judged against an entry whose paper does not say how it computed its BLEU (as the 28.6 of
    # Lake & Baroni that 002 Table 3 quotes): 002's way is not that paper's, and neither is 13a.
    entry = tmp_path / "tiny_unstated.toml"
    entry.write_text(ENTRY.replace('bleu = "nltk_multi_reference"', 'bleu = "unstated"'), encoding="utf-8")
    copy = tmp_path / "judged"
    shutil.copytree(runs["scored"], copy)
    record = json.loads((copy / "run.json").read_text(encoding="utf-8"))
    record["model_entry"] = str(entry)
    (copy / "run.json").write_text(json.dumps(record), encoding="utf-8")
    rows = rows_by_metric(copy)
    assert rows["bleu_nltk_multi_reference"].paper is None
    assert rows["bleu"].published_apart == 36.8
    assert rows["bleu"].comparison.differences == [
        "sacreBLEU 13a BLEU; the paper does not say how it computed its BLEU"]


def test_every_format_says_why_the_13a_bleu_is_not_compared(runs, tmp_path):
    from benchbuild.report.write import write_report

    report = write_report([runs["scored"]], tmp_path / "report", formats=("md", "csv", "tex", "html"))
    markdown = (tmp_path / "report.md").read_text(encoding="utf-8")
    table, apart = markdown.split(f"## {APART_HEADING}")
    beside = next(line for line in table.splitlines() if "| bleu_nltk_multi_reference |" in line)
    cells = [cell.strip() for cell in beside.split("|")[1:-1]]
    assert cells[8] == "36.8" and cells[10] == "Russin et al. (2020), Table 3" and cells[11] == "yes"
    thirteen_a = next(line for line in table.splitlines() if "| bleu |" in line)
    assert [cell.strip() for cell in thirteen_a.split("|")[1:-1]][8] == ""  # no paper number beside 13a
    assert "| bleu | 36.8 |" in apart and f"| {REASON} |" in apart
    by_metric = {row["metric"]: row for row in csv.DictReader(io.StringIO((tmp_path / "report.csv").read_text()))}
    assert (by_metric["bleu_nltk_multi_reference"]["paper"], by_metric["bleu_nltk_multi_reference"]["comparable"]) \
        == ("36.8", "yes")
    assert (by_metric["bleu"]["published"], by_metric["bleu"]["not_comparable_because"]) == ("36.8", REASON)
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "BLEU (002: NLTK, multi-reference)" in page and REASON.replace("'", "&#39;") in page
    latex = (tmp_path / "report.tex").read_text(encoding="utf-8")
    assert "BLEU (002: NLTK, multi-reference)" in latex and "not 002" in latex
    assert report.rows
