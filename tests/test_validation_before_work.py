"""Invalid options are refused before any work: one line naming the option and its range, a non-zero exit, nothing
written; help texts show their brackets; a built benchmark's card loads in `datasets` without a warning."""

from __future__ import annotations

import subprocess
import sys

import datasets
import pyarrow as pa
import pytest
import torch
from typer._click.exceptions import ClickException
from typer.testing import CliRunner

from benchbuild.cards import arrow_num_bytes
from benchbuild.cli import app
from benchbuild.errors import BenchbuildError
from benchbuild.react.parameters import DegreeParameters, ReactParameters

runner = CliRunner()


def refusal(*arguments: str) -> tuple[int, str]:
    """The exit code and the error line of a refused command, as `benchbuild.cli.main` turns them out: typer's
    usage errors exit 2, a BenchbuildError from a parameters `check()` exits 1."""
    result = runner.invoke(app, list(arguments), standalone_mode=False)
    if isinstance(result.exception, ClickException):
        return result.exception.exit_code, result.exception.format_message()
    assert isinstance(result.exception, BenchbuildError), result.output
    return 1, str(result.exception)


@pytest.fixture()
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("the cat sleeps .\nthe dog barks .\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("option, value, named", [
    ("--min-word-count", "-1", "greater than or equal to 0"),
    ("--min-ngram-count", "-5", "greater than or equal to 1"),
    ("--max-ngram", "0", "greater than or equal to 1"),
    ("--max-ngram", "-1", "greater than or equal to 1"),
])
def test_degree_refuses_an_option_out_of_range_and_writes_nothing(tmp_path, corpus, option, value, named):
    code, message = refusal("degree", "--train-src", str(corpus), "--pool", str(corpus),
                            "--out", str(tmp_path / "degree.tsv"), option, value)
    assert code == 2
    assert message == f"Invalid value for '{option}': Input should be {named}"
    assert not (tmp_path / "degree.tsv").exists()


def test_the_declared_ranges_also_hold_for_parameters_built_in_python(corpus):
    with pytest.raises(BenchbuildError, match="^--max-ngram must be at least 1; got 0$"):
        DegreeParameters(max_ngram=0).check()
    with pytest.raises(BenchbuildError, match="^--sample must be at least 1; got -1$"):
        ReactParameters(train_src=corpus, train_tgt=corpus, pool_src=[corpus], pool_tgt=[corpus], sample=-1).check()


@pytest.mark.parametrize("arguments, named", [
    (["--sample", "-1"], "'--sample'"),
    (["--sample", "30", "--band", "20"], "--sample 30 is larger than --band 20"),
    (["--max-steps", "-5"], "'--max-steps'"),
    (["--pool-size", "0"], "'--pool-size'"),
    (["--pool-size", "-3"], "'--pool-size'"),
    (["--ensemble-size", "0"], "'--ensemble-size'"),
    (["--drop-top", "-1"], "'--drop-top'"),
    (["--band", "0"], "'--band'"),
    (["--pool-size", "100", "--drop-top", "20", "--band", "90", "--sample", "5"],
     "--drop-top 20 plus --band 90 is more than --pool-size 100"),
], ids=lambda value: " ".join(value) if isinstance(value, list) else None)
def test_build_react_refuses_an_option_out_of_range_before_the_degree_stage(tmp_path, corpus, arguments, named):
    out, cache = tmp_path / "react", tmp_path / "cache"
    code, message = refusal("build-react", "--out", str(out), "--cache-dir", str(cache),
                            "--train-src", str(corpus), "--train-tgt", str(corpus),
                            "--pool-src", str(corpus), "--pool-tgt", str(corpus), *arguments)
    assert code == (2 if named.startswith("'") else 1)
    assert named in message and "\n" not in message
    assert not out.exists() and not cache.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_build_react_refuses_device_cuda_without_a_gpu_before_the_degree_stage(tmp_path, corpus):
    out, cache = tmp_path / "react", tmp_path / "cache"
    code, message = refusal("build-react", "--out", str(out), "--cache-dir", str(cache),
                            "--train-src", str(corpus), "--train-tgt", str(corpus),
                            "--pool-src", str(corpus), "--pool-tgt", str(corpus), "--device", "cuda")
    assert code == 1
    assert message.startswith("--device cuda was asked for but torch sees no CUDA device")
    assert not out.exists() and not cache.exists()


@pytest.fixture(scope="module")
def scan_simple(tmp_path_factory):
    """The SCAN `simple` benchmark, built once in each format the card must describe."""
    parent = tmp_path_factory.mktemp("scan")
    folders = {}
    for format in ("arrow", "parquet"):
        result = runner.invoke(app, ["build-scan", "--out", str(parent / format), "--split", "simple",
                                     "--format", format])
        assert result.exit_code == 0, result.output
        folders[format] = parent / format / "simple"
    return folders


@pytest.mark.parametrize("value, shown", [("2.5", "2.5"), ("abc", "'abc'")])
def test_train_refuses_a_mistyped_set_value_naming_the_option_before_the_run_folder(tmp_path, scan_simple, value,
                                                                                     shown):
    run = tmp_path / "run"
    code, message = refusal("train", "--model", "transformer", "--data", str(scan_simple["arrow"]),
                            "--out", str(run), "--device", "cpu", "--set", f"batch_size={value}")
    assert code == 1
    assert message == f"--set batch_size must be an integer, not {shown}"
    assert not run.exists()


@pytest.mark.parametrize("key_value, named", [
    ("batch_size=0", "batch_size must be positive (at least 1); got 0"),
    ("steps=-5", "steps must be positive (at least 1); got -5"),
    ("learning_rate=0.0", "learning_rate must be positive (greater than 0); got 0.0"),
    ("warmup_steps=-1", "warmup_steps must not be negative (at least 0); got -1"),
    ("label_smoothing=1.5", "label_smoothing must be in [0, 1); got 1.5"),
    ("bpe_vocab_size=3", "bpe_vocab_size must exceed 4 (at least 5); got 3"),
])
def test_train_refuses_a_set_value_out_of_range_naming_the_option_and_the_range_before_the_run_folder(
        tmp_path, scan_simple, key_value, named):
    run = tmp_path / "run"
    code, message = refusal("train", "--model", "transformer", "--data", str(scan_simple["arrow"]),
                            "--out", str(run), "--device", "cpu", "--set", key_value)
    assert code == 1
    assert message == f"--set {named}"  # the option the user typed, not the catalogue file the recipe comes from
    assert not run.exists()


def test_build_react_refuses_an_ensemble_set_value_out_of_range_naming_the_option_before_the_degree_stage(
        tmp_path, corpus):
    out, cache = tmp_path / "react", tmp_path / "cache"
    code, message = refusal("build-react", "--out", str(out), "--cache-dir", str(cache),
                            "--train-src", str(corpus), "--train-tgt", str(corpus),
                            "--pool-src", str(corpus), "--pool-tgt", str(corpus), "--ensemble-set", "batch_size=0")
    assert code == 1
    assert message == "--ensemble-set batch_size must be positive (at least 1); got 0"
    assert not out.exists() and not cache.exists()


def test_a_pipeline_whose_train_step_sets_a_value_out_of_range_runs_no_step(tmp_path):
    pipeline = tmp_path / "pipeline.toml"
    pipeline.write_text(f'[[steps]]\ncommand = "build-scan"\n[steps.options]\nout = "{tmp_path / "scan"}"\n'
                        f'split = "simple"\n[[steps]]\ncommand = "train"\n[steps.options]\nmodel = "transformer"\n'
                        f'data = "{tmp_path / "scan" / "simple"}"\nout = "{tmp_path / "run"}"\nset = ["batch_size=0"]\n',
                        encoding="utf-8")
    code, message = refusal("run", str(pipeline))
    assert code == 1
    assert message == f"{pipeline}: step 2 (train): --set batch_size must be positive (at least 1); got 0"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["pipeline.toml"]


def test_build_react_records_max_length_in_build_json(corpus):
    parameters = ReactParameters(train_src=corpus, train_tgt=corpus, pool_src=[corpus], pool_tgt=[corpus],
                                 max_length=100)
    assert parameters.recorded()["max_length"] == 100


def test_the_command_line_prints_a_refusal_as_one_error_line_after_the_usage(tmp_path, corpus):
    done = subprocess.run([sys.executable, "-m", "benchbuild", "build-react", "--out", str(tmp_path / "react"),
                           "--train-src", str(corpus), "--train-tgt", str(corpus), "--pool-src", str(corpus),
                           "--pool-tgt", str(corpus), "--cache-dir", str(tmp_path / "cache"), "--sample", "-1"],
                          capture_output=True, text=True)
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error")]
    assert errors == ["Error: Invalid value for '--sample': Input should be greater than or equal to 1"]
    assert not (tmp_path / "react").exists() and not (tmp_path / "cache").exists()


@pytest.mark.parametrize("command, shown", [
    ("build-noun-adj", "([[backward]]/[[forward]] with adjective"),
    ("run", "A pipeline TOML: [[steps]] tables"),
])
def test_help_shows_the_toml_brackets_it_names(command, shown):
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "250"})
    assert result.exit_code == 0
    assert shown in result.output


@pytest.mark.parametrize("format", ["arrow", "parquet"])
def test_load_dataset_reads_the_card_metadata_of_a_built_scan_folder_without_a_warning(scan_simple, format, tmp_path,
                                                                                       logged):
    with logged("datasets") as messages:
        loaded = datasets.load_dataset(str(scan_simple[format]), cache_dir=str(tmp_path / "hf-cache"))
    assert not [m for m in messages if "dataset_info from the dataset card" in m], messages
    assert {name: len(split) for name, split in loaded.items()} == {"train": 16728, "test": 4182}


def test_the_same_build_writes_a_byte_identical_card_with_num_bytes(scan_simple, tmp_path):
    again = runner.invoke(app, ["build-scan", "--out", str(tmp_path), "--split", "simple"])
    assert again.exit_code == 0, again.output
    card = (scan_simple["arrow"] / "README.md").read_bytes()
    assert (tmp_path / "simple" / "README.md").read_bytes() == card
    assert b"num_bytes: " in card


def test_num_bytes_depends_on_the_rows_not_on_how_the_table_is_chunked():
    table = pa.table({"source": [f"jump {i} twice" for i in range(70_000)], "target": [f"JUMP {i}" for i in range(70_000)]})
    rechunked = pa.concat_tables([table.slice(0, 777), table.slice(777, 40_000), table.slice(40_777)])
    assert arrow_num_bytes(datasets.Dataset(rechunked)) == arrow_num_bytes(datasets.Dataset(table)) > 0
