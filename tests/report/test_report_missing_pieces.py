"""Runs with missing pieces still give a report, saying what is missing; input mistakes are one-line errors."""

import json
import shutil

import pytest
from markupsafe import escape
from typer.testing import CliRunner

from benchbuild.cli import app
from benchbuild.errors import BenchbuildError
from benchbuild.report.write import write_report

pytestmark = pytest.mark.shared


@pytest.fixture
def stripped_runs(trained_runs, tmp_path):
    """Copies of session runs: one without train_log.jsonl and predictions.jsonl, one never evaluated."""
    bare = shutil.copytree(trained_runs.t5_scan, tmp_path / "no-log-no-predictions")
    (bare / "train_log.jsonl").unlink()
    (bare / "predictions.jsonl").unlink()
    unevaluated = shutil.copytree(trained_runs.transformer_scan[1], tmp_path / "not-evaluated")
    (unevaluated / "metrics.json").unlink()
    (unevaluated / "predictions.jsonl").unlink()
    return bare, unevaluated


def test_a_report_of_runs_with_missing_pieces_renders_every_format_and_says_what_is_missing(stripped_runs, tmp_path):
    bare, unevaluated = stripped_runs
    report = write_report([bare, unevaluated], tmp_path / "out" / "report")
    assert sorted(path.suffix for path in report.files) == [".bib", ".csv", ".html", ".md", ".tex"]
    expected = [(f"{unevaluated} has no metrics.json: left out of the tables (run `benchbuild eval --run "
                 f"{unevaluated}`)."),
                f"{bare} has no validation lines in train_log.jsonl: no learning curve for it.",
                f"{bare} has no predictions.jsonl: no error view for tiny_sag_t5 seed 0 on scan/tiny.",
                "tiny_sag_t5 on scan/tiny (test): one seed (0), so no standard error.",
                "tiny_sag_t5 on scan/tiny (test): the catalogue has no paper number for exact_match."]
    assert all(note in report.notes for note in expected), report.notes
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    markdown = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    for note in expected:
        assert note in markdown
        assert str(escape(note)) in page
    assert markdown.startswith("<!-- Written by `benchbuild report` -->\n\n## What is missing\n")  # at the top
    # The unevaluated run still has its learning curve; the run without a log has none, nor any error view.
    titles = {figure.title for figure in report.figures}
    assert "learning curves scan/tiny" in titles and "results" in titles
    assert "relative position biases tiny_sag_t5 scan/tiny seed 0" in titles
    assert "No predictions.jsonl beside these metrics" in page
    assert [row.model for row in report.rows] == ["tiny_sag_t5"] * 3


def test_one_run_without_metrics_is_an_error_saying_what_to_run(stripped_runs, tmp_path):
    _, unevaluated = stripped_runs
    with pytest.raises(BenchbuildError, match=f"run `benchbuild eval --run {unevaluated}` first"):
        write_report([unevaluated], tmp_path / "report")


def test_only_the_asked_formats_are_written_and_figures_come_with_tex_or_html(trained_runs, tmp_path):
    result = CliRunner().invoke(app, ["report", str(trained_runs.transformer_scan[0]), "--out",
                                      str(tmp_path / "report"), "--format", "csv,md"])
    assert result.exit_code == 0, result.output
    assert sorted(path.name for path in tmp_path.iterdir()) == ["report.csv", "report.md"]


def test_an_unknown_format_is_a_usage_error_naming_the_option(trained_runs, tmp_path):
    result = CliRunner().invoke(app, ["report", str(trained_runs.transformer_scan[0]), "--out",
                                      str(tmp_path / "report"), "--format", "md,pdf"])
    assert result.exit_code == 2
    assert "--format" in result.output and "'pdf' is none of them" in result.output
    assert list(tmp_path.iterdir()) == []


def test_a_data_folder_that_is_no_benchmark_is_an_error_before_anything_is_written(trained_runs, tmp_path):
    (tmp_path / "notes").mkdir()
    result = CliRunner().invoke(app, ["report", str(trained_runs.transformer_scan[0]), "--out",
                                      str(tmp_path / "report"), "--data", str(tmp_path / "notes")])
    assert isinstance(result.exception, BenchbuildError)
    assert str(result.exception).startswith(f"--data {tmp_path / 'notes'} is not a benchmark folder (no build.json)")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["notes"]


def test_a_report_of_a_run_whose_benchmark_folder_is_gone_explains_the_missing_pair_figure(trained_runs, tmp_path):
    run = shutil.copytree(trained_runs.transformer_nounadj, tmp_path / "run")
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["benchmark_path"] = str(tmp_path / "moved")
    (run / "metrics.json").write_text(json.dumps(metrics))
    report = write_report([run], tmp_path / "report", formats=("html",))
    assert "tiny_transformer seed 0 on nounadj/tiny (test): no COMP per pair (it needs predictions.jsonl and the " \
           "benchmark folder's test rows: pass --data)." in report.notes
    with_data = write_report([run], tmp_path / "again", formats=("html",), data_dirs=[trained_runs.nounadj])
    assert "noun adjective pairs nounadj/tiny (test)" in {figure.title for figure in with_data.figures}


def test_a_truncated_model_leaves_out_its_bias_figure_and_says_so(trained_runs, tmp_path):
    run = shutil.copytree(trained_runs.t5_scan, tmp_path / "run")
    weights = run / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    report = write_report([run], tmp_path / "report", formats=("html",))
    assert any(note.startswith(f"{weights} cannot be read (") for note in report.notes), report.notes
    assert not any(figure.title.startswith("relative position biases") for figure in report.figures)
