"""`benchbuild import cognition|react DIR`: the published CoGnition CG test set and ReaCT valid/test/cg_test of
`../shared/data` (with small training files the tests write) become benchmarks whose published line counts are
checked, that the catalogue's `[[reported]]` rows for `cognition/cg_test` and `react/cg_test` find, and that `train`,
`eval` (CTER on CoGnition, BLEU on ReaCT) and `report` take end to end. A release with a truncated, misaligned or
misnamed file is refused in one line before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from small_inputs import write_lines

from benchbuild.benchmark import load_splits, read_build_info
from benchbuild.corpus import count_lines
from benchbuild.evaluation.scoring import benchmark_label
from benchbuild.importing.layouts import LAYOUTS
from benchbuild.papers import reported_on
from benchbuild.report.rows import _same_benchmark
from benchbuild.zoo.recipe import default_recipe
from benchbuild.zoo.catalogue import load_entry

pytestmark = pytest.mark.shared



def head(path: Path, lines: int) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()[:lines]


def test_the_shared_files_have_the_line_counts_the_layouts_check(shared_data):
    published = {(name, split.name): split.lines for name, layout in LAYOUTS.items() for split in layout.splits}
    react, cognition = shared_data / "react", shared_data / "cognition"
    for split, stem in (("validation", "valid"), ("test", "test"), ("cg_test", "cg_test")):
        assert count_lines(react / f"{stem}.de") == count_lines(react / f"{stem}.en") == published["react", split]
    assert (published["react", "validation"], published["react", "test"], published["react", "cg_test"]) == \
        (7_283, 6_750, 3_000)
    assert {count_lines(cognition / f"cg-test.{suffix}") for suffix in ("en", "zh", "compound")} == \
        {published["cognition", "cg_test"]} == {10_800}


@pytest.fixture(scope="module")
def small_splits(shared_data, tmp_path_factory) -> Path:
    """Training files the tests write: 300 WMT14 pairs (de/en) for ReaCT; for CoGnition, train/valid/test pairs
    made of cg-test lines (every 7th of the first 420, then the next 20 and 20)."""
    folder = tmp_path_factory.mktemp("small")
    wmt = shared_data / "wmt14-ende-sample"
    write_lines(folder / "train.de", [line.lower() for line in head(wmt / "train.de", 300)])
    write_lines(folder / "train.en", [line.lower() for line in head(wmt / "train.en", 300)])
    cognition = shared_data / "cognition"
    for suffix in ("en", "zh"):
        lines = head(cognition / f"cg-test.{suffix}", 1000)
        write_lines(folder / f"cog-train.{suffix}", lines[0:420:7])
        write_lines(folder / f"cog-valid.{suffix}", lines[500:520])
        write_lines(folder / f"cog-test.{suffix}", lines[600:620])
    return folder


def import_react(benchbuild, react: Path, small: Path, out: Path) -> tuple[int, str, str]:
    return benchbuild("import", "react", react, "--split", f"train={small / 'train.de'},{small / 'train.en'}",
                      "--out", out)


def import_cognition(benchbuild, cognition: Path, small: Path, out: Path, *more) -> tuple[int, str, str]:
    given = [f"--split={split}={small / f'cog-{stem}.en'},{small / f'cog-{stem}.zh'}"
             for split, stem in (("train", "train"), ("validation", "valid"), ("test", "test"))]
    return benchbuild("import", "cognition", cognition, *given, "--out", out, *more)


@pytest.fixture(scope="module")
def react_benchmark(benchbuild, shared_data, small_splits, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("react") / "react-published"
    code, _, stderr = import_react(benchbuild, shared_data / "react", small_splits, out)
    assert code == 0, stderr
    return out


SAID: dict[str, str] = {}  # what each module fixture's import printed


@pytest.fixture(scope="module")
def cognition_benchmark(benchbuild, shared_data, small_splits, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cognition") / "cognition-published"
    code, stdout, stderr = import_cognition(benchbuild, shared_data / "cognition", small_splits, out)
    assert code == 0, stderr
    SAID["cognition"] = stdout
    return out


def test_an_import_says_which_published_counts_it_checked_and_which_splits_it_did_not(cognition_benchmark):
    said = " ".join(SAID["cognition"].split())
    assert ("the published line counts of cognition checked for cg_test; train, validation, test given with --split, "
            "not checked against them") in said


def test_react_keeps_the_published_rows_and_scores_each_rows_degree(react_benchmark, shared_data):
    splits = load_splits(react_benchmark)
    # One of the 300 WMT14 pairs has an empty English side: dropped from train, as every build drops it.
    assert {name: len(split) for name, split in splits.items()} == {"train": 299, "validation": 7_283,
                                                                      "test": 6_750, "cg_test": 3_000}
    cg_test = splits["cg_test"]
    assert cg_test["source"][:2] == head(shared_data / "react" / "cg_test.de", 2)
    assert cg_test["target"][-1] == head(shared_data / "react" / "cg_test.en", 3_000)[-1]
    assert cg_test["id"][0] == "cg_test-00000001"
    assert all(degree >= 0 for degree in cg_test["degree"]) and len(set(cg_test["degree"])) > 1
    info = read_build_info(react_benchmark)
    assert (info.family, info.name, info.parameters["metrics"]) == ("react", "react/published", ["bleu"])
    assert info.parameters["degree"]["min_ngram_count"] == 4
    card = (react_benchmark / "README.md").read_text(encoding="utf-8")
    assert "- **cg_test**: `cg_test.de`, `cg_test.en`: ReaCT's compositional test set, 3,000 lines as published " \
           "(count checked)" in card
    assert "given with --split in place of IWSLT14's train set" in card and "dropped: 1" in card
    assert "@inproceedings{zheng-lapata-2023-real" in card


def test_the_reported_react_and_cognition_rows_find_the_imported_benchmarks(react_benchmark, cognition_benchmark):
    transformer, fusion = load_entry("transformer"), load_entry("fusion")
    for folder, entry, reported, recipe in ((react_benchmark, transformer, "react/cg_test", "mt_001"),
                                            (cognition_benchmark, fusion, "cognition/cg_test", "mt")):
        info = read_build_info(folder)
        label = benchmark_label(folder)
        assert reported_on(reported, info.family, info.name, info.splits)
        assert _same_benchmark(reported, label, "cg_test") and not _same_benchmark(reported, label, "test")
        assert default_recipe(entry.recipes, entry.reported, info.family, info.name, info.splits) == recipe
    assert benchmark_label(react_benchmark) == "react/published"
    assert benchmark_label(cognition_benchmark) == "cognition/published"


def test_cognition_keeps_the_compound_column_and_finds_the_lexicon(cognition_benchmark, shared_data):
    splits = load_splits(cognition_benchmark)
    assert {name: len(split) for name, split in splits.items()} == {"train": 60, "validation": 20, "test": 20,
                                                                      "cg_test": 10_800}
    cg_test = splits["cg_test"]
    assert cg_test.column_names == ["id", "source", "target", "compound"]
    assert cg_test["compound"][:5] == ["the dog"] * 5
    info = read_build_info(cognition_benchmark)
    assert info.parameters["metrics"] == ["cter", "bleu"]
    assert Path(info.parameters["lexicon"]) == shared_data / "cognition" / "lexicon"
    assert set(info.inputs) >= {"cg_test:cg-test.compound", "lexicon"}
    card = (cognition_benchmark / "README.md").read_text(encoding="utf-8")
    assert "language:\n- en\n- zh\n" in card and "--lexicon " in card and "--compound compound" in card


def report_row(table: Path, benchmark: str, metric: str) -> dict[str, str]:
    """The report CSV's row of the one run's `metric` on the cg_test split of `benchmark`."""
    import csv

    with open(table, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return next(row for row in rows if (row["model"], row["benchmark"], row["split"], row["metric"])
                == ("tiny_transformer", benchmark, "cg_test", metric))


def test_cognition_trains_evaluates_cter_and_reports_beside_the_paper(benchbuild, cognition_benchmark, reporting_model,
                                                                       shared_data, tmp_path):
    run = tmp_path / "run"
    code, _, stderr = benchbuild("train", "--model", reporting_model, "--data", cognition_benchmark, "--out", run,
                                 "--max-steps", "5", "--device", "cpu")
    assert code == 0, stderr
    code, _, stderr = benchbuild("eval", "--run", run, "--data", cognition_benchmark, "--split", "cg_test",
                                 "--lexicon", shared_data / "cognition" / "lexicon", "--compound", "compound",
                                 "--batch-size", "2000", "--device", "cpu")
    assert code == 0, stderr
    metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
    assert (metrics["benchmark"], metrics["rows"]) == ("cognition/published", 10_800)
    assert (metrics["cter"]["instances"], metrics["cter"]["compounds"]) == (10_800, 2_160)
    assert metrics["bleu"]["signature"].split("|")[3] == "tok:zh"
    code, _, stderr = benchbuild("report", run, "--out", tmp_path / "report", "--format", "md,csv")
    assert code == 0, stderr
    row = report_row(tmp_path / "report.csv", "cognition/published", "cter_instance")
    # The entry's recipe is 5 steps: the run was made as its reported row says, so the number stands beside ours.
    assert (row["paper"], row["published"], row["comparable"], row["paper_source"]) == (
        "20", "", "yes", "Zheng et al. (2023), Table 1")


def test_react_trains_evaluates_bleu_and_reports_beside_the_paper(benchbuild, react_benchmark, reporting_model, tmp_path):
    run = tmp_path / "run"
    code, _, stderr = benchbuild("train", "--model", reporting_model, "--data", react_benchmark, "--out", run,
                                 "--max-steps", "5", "--device", "cpu")
    assert code == 0, stderr
    code, _, stderr = benchbuild("eval", "--run", run, "--data", react_benchmark, "--split", "cg_test",
                                 "--batch-size", "1000", "--device", "cpu")
    assert code == 0, stderr
    metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
    assert (metrics["benchmark"], metrics["rows"]) == ("react/published", 3_000)
    assert 0.0 <= metrics["bleu"]["score"] <= 100.0 and len(metrics["bleu_by_degree"]["buckets"]) == 5
    code, _, stderr = benchbuild("report", run, "--out", tmp_path / "report", "--format", "md,csv")
    assert code == 0, stderr
    row = report_row(tmp_path / "report.csv", "react/published", "bleu")
    assert (row["paper"], row["published"], row["comparable"], row["paper_source"]) == (
        "11.4", "", "yes", "Zheng and Lapata (2023), Table 5")


@pytest.fixture
def react_copy(shared_data, tmp_path) -> Path:
    """A ReaCT release folder the test may damage: links to the shared files, and a train pair of the right length
    is not needed (it comes with --split)."""
    folder = tmp_path / "react"
    folder.mkdir()
    for path in (shared_data / "react").iterdir():
        (folder / path.name).symlink_to(path)
    return folder


def _replace(link: Path, lines: list[str]) -> None:
    link.unlink()
    write_lines(link, lines)


def test_react_refuses_a_truncated_misaligned_or_misnamed_release_in_one_line(refused, react_copy, small_splits,
                                                                              shared_data, tmp_path):
    train = f"train={small_splits / 'train.de'},{small_splits / 'train.en'}"
    cg_test = {suffix: head(shared_data / "react" / f"cg_test.{suffix}", 3_000) for suffix in ("de", "en")}

    _replace(react_copy / "cg_test.en", cg_test["en"][:-1])
    message = refused("import", "react", react_copy, "--split", train, "--out", tmp_path / "out")
    assert "split cg_test: `" in message and "has 2,999 lines but" in message and "not aligned" in message

    _replace(react_copy / "cg_test.de", cg_test["de"][:-1])
    message = refused("import", "react", react_copy, "--split", train, "--out", tmp_path / "out")
    assert "have 2,999 lines, fewer than the 3,000 of ReaCT's compositional test set" in message

    _replace(react_copy / "cg_test.de", cg_test["de"])
    (react_copy / "cg_test.de").rename(react_copy / "cg-test.de")
    message = refused("import", "react", react_copy, "--split", train, "--out", tmp_path / "out")
    assert "lacks the files of cg_test (cg_test.de + cg_test.en) (it holds: cg-test.de, cg_test.en" in message

    message = refused("import", "react", react_copy, "--out", tmp_path / "out")
    assert "lacks the files of train (train.de + train.en); cg_test (cg_test.de + cg_test.en)" in message
    assert not (tmp_path / "out").exists()


def test_cognition_refuses_a_missing_lexicon_an_unknown_atom_and_a_truncated_cg_test(refused, shared_data,
                                                                                     small_splits, tmp_path):
    folder = tmp_path / "cognition"
    folder.mkdir()
    for suffix in ("en", "zh", "compound"):
        (folder / f"cg-test.{suffix}").symlink_to(shared_data / "cognition" / f"cg-test.{suffix}")
    given = [f"--split={split}={small_splits / f'cog-{stem}.en'},{small_splits / f'cog-{stem}.zh'}"
             for split, stem in (("train", "train"), ("validation", "valid"), ("test", "test"))]
    message = refused("import", "cognition", folder, *given, "--out", tmp_path / "out")
    assert "no CTER lexicon in" in message and "pass --lexicon FILE" in message

    lexicon = [line for line in head(shared_data / "cognition" / "lexicon", 100) if not line.startswith("dog\t")]
    write_lines(folder / "lexicon", lexicon)
    message = refused("import", "cognition", folder, *given, "--out", tmp_path / "out")
    assert "split cg_test, row 1: compound 'the dog': atom 'dog' is not in the lexicon" in message

    (folder / "lexicon").unlink()
    (folder / "lexicon").symlink_to(shared_data / "cognition" / "lexicon")
    (folder / "cg-test.compound").unlink()
    write_lines(folder / "cg-test.compound", head(shared_data / "cognition" / "cg-test.compound", 10_795))
    message = refused("import", "cognition", folder, *given, "--out", tmp_path / "out")
    assert "cg-test.compound` has 10,795 lines but" in message and "not aligned" in message
    assert not (tmp_path / "out").exists()


def test_002s_mt_files_import_as_the_benchmark_its_table_3_row_names(refused, benchbuild, shared_data, tmp_path):
    """`import syntactic_attention_mt`: 002's data/MT files (`IN: … OUT: …` lines) become the benchmark 002's Table 3
    row names, with test_no_unk.txt as validation (what 002's scripts select on); `build-lake-baroni-fr`'s benchmark
    is not it. A bad line or a truncated file is refused in one line, before anything is written."""
    release = shared_data.parent / "reference" / "syntactic_attention" / "data" / "MT"
    code, stdout, stderr = benchbuild("import", "syntactic_attention_mt", release, "--out", tmp_path / "mt")
    assert code == 0, stderr
    assert "(train 9,999, validation 783, test 1,191; the published line counts of syntactic_attention_mt checked)" \
        in stdout
    info, splits = read_build_info(tmp_path / "mt"), load_splits(tmp_path / "mt")
    assert splits["test"][0] == {"id": "test-00000001", "source": "you are daxy .", "target": "tu es daxiste ."}
    entry = load_entry("syntactic_attention")
    row = next(row for row in entry.reported if row["table"] == "002 Table 3")
    assert reported_on(row["benchmark"], info.family, info.name, info.splits)
    assert not reported_on(row["benchmark"], "lake_baroni_en_fr", "lake_baroni_en_fr", ["train", "test", "daxy"])
    assert default_recipe(entry.recipes, entry.reported, info.family, info.name, info.splits) == "mt"

    copy = tmp_path / "release"
    copy.mkdir()
    for name in ("train", "test_no_unk.txt"):
        (copy / name).symlink_to(release / name)
    lines = head(release / "test", 1_191)
    write_lines(copy / "test", lines[:-1])
    message = refused("import", "syntactic_attention_mt", copy, "--out", tmp_path / "out")
    assert "have 1,190 lines, fewer than the 1,191 of 002's test file (data/MT/test)" in message
    write_lines(copy / "test", [*lines[:5], lines[5].replace(" OUT: ", " "), *lines[6:]])
    message = refused("import", "syntactic_attention_mt", copy, "--out", tmp_path / "out")
    assert f"`{copy / 'test'}` line 6 is not an `IN: source OUT: target` line" in message
    assert not (tmp_path / "out").exists()
