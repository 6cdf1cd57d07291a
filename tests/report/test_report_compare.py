"""`benchbuild report --compare A B` on tiny real runs: per benchmark split both evaluated, McNemar's exact test and
sacrebleu's paired bootstrap over the test rows of runs paired by seed, and Welch's t-test over seeds."""

import json
import re
import shutil

import pytest
from scipy.stats import binomtest
from typer.testing import CliRunner

from benchbuild.cli import app
from benchbuild.errors import BenchbuildError

pytestmark = pytest.mark.shared


def compare(a, b):
    return CliRunner().invoke(app, ["report", "--compare", str(a), str(b)])


def correct(run):
    return {record["id"]: record["prediction"].split() == record["target"].split()
            for record in map(json.loads, (run / "predictions.jsonl").read_text(encoding="utf-8").splitlines())}


def seed_group(tmp_path, name, *runs):
    """A folder holding copies of `runs`, as a sweep holds a model's seeds."""
    for run in runs:
        shutil.copytree(run, tmp_path / name / run.name)
    return tmp_path / name


def test_two_runs_get_mcnemars_exact_p_value_over_their_test_rows(trained_runs):
    transformer, t5 = trained_runs.transformer_scan[0], trained_runs.t5_scan
    result = compare(transformer, t5)
    assert result.exit_code == 0, result.output
    a, b = correct(transformer), correct(t5)
    only_a = sum(a[i] and not b[i] for i in a)
    only_b = sum(b[i] and not a[i] for i in a)
    expected = 1.0 if only_a + only_b == 0 else binomtest(only_a, only_a + only_b, 0.5).pvalue
    lines = result.output.splitlines()
    assert lines[0].startswith(f"A = {transformer}: tiny_transformer, 1 run (seed 0)")
    assert "scan/tiny (test):" in lines and "  over test rows, A seed 0 vs B seed 0 (24 rows):" in lines
    mcnemar = next(line for line in lines if "McNemar's exact test" in line)
    assert f"only A right: {only_a}, only B right: {only_b} of 24 rows" in mcnemar
    assert float(re.search(r"p = ([0-9.e-]+)", mcnemar).group(1)) == pytest.approx(expected, rel=1e-3)
    bleu = next(line for line in lines if "paired bootstrap resampling" in line)
    assert re.search(r"BLEU: A \d+\.\d\d, B \d+\.\d\d .*sacrebleu --paired-bs, .*bs:1000\|seed:12345.*: p (= |undef)",
                     bleu), bleu
    assert "it needs two or more on each side" in result.output  # one seed each: no test over seeds


def test_the_printed_p_value_is_mcnemars_on_the_runs_table_of_right_and_wrong_rows(trained_runs, tmp_path):
    """Two copies of a real run whose predictions are set right on chosen rows: A alone right on 2 rows, B alone on
    10, both on 5; p = 2 P(X <= 2 | n = 12, 1/2) = 0.0386, significant at 5%."""
    runs = []
    for name, right in (("a", [*range(2), *range(12, 17)]), ("b", range(2, 17))):
        run = seed_group(tmp_path, name, trained_runs.t5_scan) / trained_runs.t5_scan.name
        records = [json.loads(line) for line in (run / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
        for index, record in enumerate(records):
            record["prediction"] = record["target"] if index in right else "WALK"
        (run / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        runs.append(run)
    result = compare(*runs)
    assert result.exit_code == 0, result.output
    mcnemar = next(line for line in result.output.splitlines() if "McNemar" in line)
    assert mcnemar.strip() == ("exact match: A 29.17, B 62.50 (A − B = -33.33); McNemar's exact test (only A right: "
                               "2, only B right: 10 of 24 rows): p = 0.03857 *")


def test_a_folder_of_seeds_is_compared_over_seeds_with_welchs_t_test(trained_runs, tmp_path):
    group = seed_group(tmp_path, "transformer", *trained_runs.transformer_scan)
    same = seed_group(tmp_path, "again", *trained_runs.transformer_scan)
    result = compare(group, same)
    assert result.exit_code == 0, result.output
    assert "tiny_transformer, 2 runs (seeds 0, 1)" in result.output
    assert "over seeds (runs paired by seed above):" in result.output
    assert result.output.count("over test rows, A seed") == 2
    welch = [line for line in result.output.splitlines() if "Welch's t-test over seeds (2 seeds of A, 2 of B)" in line]
    assert welch and all(line.endswith(("p = 1", "neither side varies: p undefined")) for line in welch), welch
    # A model against itself: no discordant row, identical BLEU; nothing is marked significant.
    assert "only A right: 0, only B right: 0" in result.output and " *" not in result.output.replace("* marks", "")


def test_runs_with_no_benchmark_split_in_common_are_one_clear_error(trained_runs):
    result = compare(trained_runs.transformer_scan[0], trained_runs.transformer_react)
    assert isinstance(result.exception, BenchbuildError)
    assert "no benchmark split in common" in str(result.exception)
    assert "scan/tiny (test)" in str(result.exception) and "react/tiny (cg_test)" in str(result.exception)


def test_compare_takes_no_other_run_folders_and_a_report_needs_some(trained_runs, tmp_path):
    both = CliRunner().invoke(app, ["report", str(trained_runs.t5_scan), "--compare", str(trained_runs.t5_scan),
                                    str(trained_runs.t5_scan)])
    assert both.exit_code == 2 and "give no other run folder" in both.output
    neither = CliRunner().invoke(app, ["report"])
    assert neither.exit_code == 2 and "give one or more evaluated run folders" in neither.output
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = compare(empty, trained_runs.t5_scan)
    assert isinstance(nothing.exception, BenchbuildError) and "neither a run folder nor a folder of runs" in \
        str(nothing.exception)


def test_a_p_value_below_the_smallest_double_is_printed_as_such_never_as_0():
    """A right and B wrong on 1,100 rows: McNemar's exact p is 2 x 0.5^1100, below the smallest double (it
    underflows to 0): the line says "p < 1e-300"; a p-value that fits is printed with 4 digits."""
    from benchbuild.evaluation.uncertainty import mcnemar_exact

    test = mcnemar_exact([True] * 1_100, [False] * 1_100)
    assert test.p_value < 1e-300 and test.line().endswith("p < 1e-300 *"), test.line()
    assert "p = 0" not in test.line()
    fits = mcnemar_exact([True] * 12 + [False] * 8, [False] * 12 + [True] * 8)
    assert fits.line().endswith(f"p = {binomtest(8, 20, 0.5).pvalue:.4g}"), fits.line()
