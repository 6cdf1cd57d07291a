"""`benchbuild score`: plain-text predictions against a benchmark split, with CTER from a lexicon."""

import json
import sys

import pytest
from typer.testing import CliRunner

from benchbuild.cli import app, main
from benchbuild.errors import BenchbuildError
from benchbuild.evaluation.cter import cter, read_lexicon

ROWS = 50


@pytest.fixture
def cognition_benchmark(shared_data, make_benchmark):
    folder = shared_data / "cognition"
    lines = {name: (folder / f"cg-test.{name}").read_text(encoding="utf-8").splitlines()[:ROWS]
             for name in ("en", "zh", "compound")}
    rows = [{"id": f"cg-{i}", "source": lines["en"][i], "target": lines["zh"][i], "compound": lines["compound"][i],
             "degree": i / ROWS} for i in range(ROWS)]
    return make_benchmark({"test": rows}), lines


def run(*args):
    return CliRunner().invoke(app, ["score", *map(str, args)])


def test_scoring_the_references_gives_perfect_scores_and_the_lexicons_cter(cognition_benchmark, shared_data, tmp_path):
    benchmark, lines = cognition_benchmark
    predictions = tmp_path / "hyp.txt"
    predictions.write_text("\n".join(lines["zh"]) + "\n", encoding="utf-8")
    lexicon = shared_data / "cognition" / "lexicon"
    result = run("--data", benchmark, "--predictions", predictions, "--lexicon", lexicon, "--compound", "compound",
                 "--out", tmp_path / "metrics.json")
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["rows"] == ROWS and metrics["exact_match"] == 100.0
    assert metrics["bleu"]["score"] == pytest.approx(100.0) and "tok:zh" in metrics["bleu"]["signature"]
    assert metrics["cter"] == cter(lines["zh"], lines["compound"], read_lexicon(lexicon))
    assert [b["rows"] for b in metrics["bleu_by_degree"]["buckets"]] == [10] * 5
    assert metrics["bleu_by_degree"]["buckets"][0]["degree_max"] == pytest.approx(9 / ROWS)

    compounds = tmp_path / "compounds.txt"
    compounds.write_text("\n".join(lines["compound"]) + "\n", encoding="utf-8")
    from_file = run("--data", benchmark, "--predictions", predictions, "--lexicon", lexicon, "--compound", compounds)
    assert from_file.exit_code == 0 and json.loads(from_file.output)["cter"] == metrics["cter"]


def test_a_line_count_mismatch_is_one_clear_error(cognition_benchmark, tmp_path, monkeypatch, capsys):
    benchmark, lines = cognition_benchmark
    predictions = tmp_path / "short.txt"
    predictions.write_text("\n".join(lines["zh"][:-1]) + "\n", encoding="utf-8")
    result = run("--data", benchmark, "--predictions", predictions)
    assert isinstance(result.exception, BenchbuildError)
    assert f"has {ROWS - 1} lines but split 'test'" in str(result.exception)
    assert f"has {ROWS} rows" in str(result.exception)
    monkeypatch.setattr(sys, "argv", ["benchbuild", "score", "--data", str(benchmark), "--predictions", str(predictions)])
    with pytest.raises(SystemExit) as stop:
        main()
    assert stop.value.code == 1
    printed = capsys.readouterr()
    assert printed.out == "" and len(printed.err.strip().splitlines()) == 1
    assert printed.err.startswith(f"benchbuild: error: {predictions} has {ROWS - 1} lines")


def test_missing_split_and_missing_compounds_are_errors(cognition_benchmark, shared_data, tmp_path):
    benchmark, lines = cognition_benchmark
    predictions = tmp_path / "hyp.txt"
    predictions.write_text("\n".join(lines["zh"]) + "\n", encoding="utf-8")
    result = run("--data", benchmark, "--split", "validation", "--predictions", predictions)
    assert "has no split 'validation'" in str(result.exception)
    result = run("--data", benchmark, "--predictions", predictions, "--lexicon", shared_data / "cognition" / "lexicon")
    assert "pass --compound" in str(result.exception)
    result = run("--data", benchmark, "--predictions", predictions, "--lexicon", shared_data / "cognition" / "lexicon",
                 "--compound", "no_such_column")
    assert "neither a column" in str(result.exception)


def test_comp_and_order_accuracy_are_scored_where_the_noun_adjective_columns_exist(make_benchmark, tmp_path):
    rows = [{"id": "na-0", "source": "the black cat sleeps .", "target": "le chat noir dort .",
             "fr_noun": "chat", "fr_adjective": "noir", "order": "backward"},
            {"id": "na-1", "source": "a new house .", "target": "une nouvelle maison .",
             "fr_noun": "maison", "fr_adjective": "nouveau", "order": "forward"}]
    benchmark = make_benchmark({"test": rows}, family="nounadj", name="nounadj/europarl")
    predictions = tmp_path / "hyp.txt"
    predictions.write_text("le chat noir dort .\nune maison nouvelle .\n", encoding="utf-8")
    result = run("--data", benchmark, "--predictions", predictions)
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.output)
    assert metrics["benchmark"] == "nounadj/europarl" and metrics["exact_match"] == 50.0
    assert metrics["comp"]["comp"] == 100.0 and metrics["comp"]["order_accuracy"] == 50.0
