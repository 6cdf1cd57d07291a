"""`benchbuild report`: mean ± standard error over seeds, the paper's number with its source, Markdown and CSV; run
folders that record nothing of how they were trained (no recipe, no steps) are not compared with it."""

import csv
import json

import pytest
from typer.testing import CliRunner

from benchbuild.cli import app
from benchbuild.errors import BenchbuildError
from benchbuild.report.rows import build_report

ENTRY = """\
name = "tiny_transformer"
paper = "000"
summary = "test entry"
[architecture]
kind = "transformer"
d_model = 32
num_heads = 4
[[reported]]
benchmark = "scan/addprim_jump"
metric = "exact_match"
value = 3.0
table = "000 Table 3"
"""


def evaluated_run(folder, entry, seed, exact_match, bleu, benchmark="scan/addprim_jump", split="test"):
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"model": "tiny_transformer", "model_entry": str(entry), "seed": seed}))
    metrics = {"benchmark": benchmark, "split": split, "rows": 10, "exact_match": exact_match,
               "bleu": {"score": bleu, "signature": "nrefs:1|tok:13a"}, "chrf": {"score": 50.0, "signature": "x"}}
    (folder / "metrics.json").write_text(json.dumps(metrics))
    return folder


@pytest.fixture
def runs(tmp_path):
    entry = tmp_path / "tiny_transformer.toml"
    entry.write_text(ENTRY)
    return [evaluated_run(tmp_path / "seed0", entry, 0, 2.0, 40.0), evaluated_run(tmp_path / "seed1", entry, 1, 6.0, 44.0),
            evaluated_run(tmp_path / "simple", entry, 0, 99.0, 98.0, benchmark="scan/simple")]


def test_two_seeds_give_mean_and_standard_error_beside_the_papers_number(runs):
    rows = {(r.benchmark, r.metric): r for r in build_report(runs)}
    jump = rows[("scan/addprim_jump", "exact_match")]
    assert jump.values == [2.0, 6.0] and jump.seeds == [0, 1]
    assert jump.mean == 4.0 and jump.standard_error == pytest.approx(2.0)  # sd 2.828 / sqrt(2)
    assert (jump.paper, jump.paper_source, jump.source) == (3.0, "000 Table 3", "Chaabouni et al. (2021), Table 3")
    assert jump.comparison.differences == ["the catalogue names no recipe for the paper's number"]
    assert rows[("scan/addprim_jump", "bleu")].paper is None
    single = rows[("scan/simple", "exact_match")]
    assert single.standard_error is None and single.paper is None


def test_a_number_reported_for_a_family_and_split_sits_beside_that_split_of_a_built_benchmark(tmp_path):
    entry = tmp_path / "tiny_transformer.toml"
    entry.write_text(ENTRY + '[[reported]]\nbenchmark = "react/cg_test"\nmetric = "bleu"\nvalue = 11.4\n'
                             'table = "001 Table 5"\n')
    runs = [evaluated_run(tmp_path / split, entry, 0, 1.0, 12.0, benchmark="react/react", split=split)
            for split in ("cg_test", "test")]
    rows = {(r.split, r.metric): r for r in build_report(runs)}
    assert (rows[("cg_test", "bleu")].paper, rows[("cg_test", "bleu")].paper_source) == (11.4, "001 Table 5")
    assert rows[("test", "bleu")].paper is None  # the in-domain test split is not the one the paper reports


def test_report_command_writes_markdown_and_csv(runs, tmp_path):
    result = CliRunner().invoke(app, ["report", *map(str, runs), "--out", str(tmp_path / "out" / "table")])
    assert result.exit_code == 0, result.output
    markdown = (tmp_path / "out" / "table.md").read_text()
    # 2 and 6: mean 4, s.e. 2, the 95% t-interval 4 ± 12.706 x 2 (t with 1 degree of freedom), [-21.41, 29.41],
    # clipped to a percentage's range
    assert ("| tiny_transformer | scan/addprim_jump | test | exact_match | 2 (0, 1) | 4.00 ± 2.00 | "
            "[0.00, 29.41]: t-interval of the mean over 2 seeds, clipped to [0, 100] | "
            "4.00: mean of 2 runs |  |  |  | no: the catalogue names no recipe for the paper's number | "
            "best_validation by exact_match |") in markdown
    assert ("| tiny_transformer | scan/addprim_jump | test | exact_match | 3 | mean (runs not recorded) | "
            "Chaabouni et al. (2021), Table 3 | the catalogue names no recipe for the paper's number |") in markdown
    assert ("| tiny_transformer | scan/simple | test | exact_match | 1 (0) | 99.00 |  |  |  |  |  |  | "
            "best_validation by exact_match |") in markdown
    assert next(line for line in markdown.splitlines() if line.startswith("| model |")) in result.output
    with open(tmp_path / "out" / "table.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    jump = next(r for r in table if r["benchmark"] == "scan/addprim_jump" and r["metric"] == "exact_match")
    assert (jump["runs"], jump["seeds"], jump["mean"], jump["standard_error"], jump["paper"], jump["published"]) == \
        ("2", "0 1", "4.0000", "2.0000", "", "3")


def test_a_run_without_metrics_is_an_error_saying_what_to_run(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text(json.dumps({"model": "m", "seed": 0}))
    with pytest.raises(BenchbuildError, match="benchbuild eval --run"):
        build_report([tmp_path / "run"])


def test_report_without_out_writes_beside_the_first_run_folder_not_into_the_working_folder(runs, tmp_path,
                                                                                          monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = CliRunner().invoke(app, ["report", *map(str, runs)])
    assert result.exit_code == 0, result.output
    assert (runs[0].parent / "report.md").is_file() and (runs[0].parent / "report.csv").is_file()
    assert list(elsewhere.iterdir()) == []
