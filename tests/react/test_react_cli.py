"""`benchbuild degree` and `benchbuild stats` through the real CLI; bad input through the console entry point."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from commands import benchbuild
from small_inputs import write_lines
from typer.testing import CliRunner

from benchbuild.benchmark import Benchmark, BuildInfo, CardFacts
from benchbuild.cli import app
from benchbuild.errors import BenchbuildError
from benchbuild.react.degree import DegreeParameters, DegreeScorer
from benchbuild.react.parameters import ReactParameters
from benchbuild.react.stats import novel_ngram_counts, table2



def _tsv(path: Path) -> list[list[str]]:
    return [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.shared
def test_degree_writes_one_row_per_pool_line_matching_the_library(shared_data, tmp_path):
    train, pool = shared_data / "react" / "valid.de", shared_data / "react" / "cg_test.de"
    result = CliRunner().invoke(app, ["degree", "--train-src", str(train), "--pool", str(pool), "--out",
                                      str(tmp_path / "degree.tsv"), "--lowercase", "--min-word-count", "1"])
    assert result.exit_code == 0, result.output
    rows = _tsv(tmp_path / "degree.tsv")
    pool_lines = pool.read_text(encoding="utf-8").splitlines()
    assert rows[0] == ["line", "degree"]
    assert [int(row[0]) for row in rows[1:]] == list(range(1, len(pool_lines) + 1))
    scorer = DegreeScorer(train.read_text(encoding="utf-8").splitlines(),
                          DegreeParameters(lowercase=True, min_word_count=1))
    expected = scorer.score(pool_lines).degree
    written = np.array([float(row[1]) if row[1] else np.nan for row in rows[1:]])
    assert np.allclose(written, expected, atol=1e-6, equal_nan=True)
    assert 0 < np.isnan(written).sum() < len(written)


def test_degree_keeps_empty_and_dropped_lines_as_empty_cells(tmp_path):
    train = write_lines(tmp_path / "train.txt", ["a b c"] * 4)
    pool = write_lines(tmp_path / "pool.txt", ["a b c", "", "a z", "c b a"])
    result = CliRunner().invoke(app, ["degree", "--train-src", str(train), "--pool", str(pool),
                                      "--out", str(tmp_path / "out.tsv")])
    assert result.exit_code == 0, result.output
    assert _tsv(tmp_path / "out.tsv") == [["line", "degree"], ["1", "0.333333"], ["2", ""], ["3", ""],
                                          ["4", "1.000000"]]
    again = CliRunner().invoke(app, ["degree", "--train-src", str(train), "--pool", str(pool),
                                     "--out", str(tmp_path / "out.tsv")])
    assert again.exit_code != 0 and "--overwrite" in str(again.exception)


def test_misaligned_training_files_end_in_one_error_line_and_no_output(tmp_path):
    src = write_lines(tmp_path / "train.de", ["a b", "c d"])
    tgt = write_lines(tmp_path / "train.en", ["a b"])
    done = benchbuild("build-react", "--out", str(tmp_path / "out"), "--train-src", str(src), "--train-tgt", str(tgt),
                      "--pool-src", str(src), "--pool-tgt", str(src), "--cache-dir", str(tmp_path / "cache"))
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "not aligned" in done.stderr and "train.en" in done.stderr
    assert not (tmp_path / "out").exists()


def test_build_react_parameters_are_checked_before_any_work(tmp_path):
    src, tgt = write_lines(tmp_path / "a.de", ["a b"]), write_lines(tmp_path / "a.en", ["a b"])
    corpus = {"train_src": src, "train_tgt": tgt}
    with pytest.raises(BenchbuildError, match="give the training corpus"):
        ReactParameters(pool_src=[src], pool_tgt=[tgt]).check()
    with pytest.raises(BenchbuildError, match="2 --pool-src but 1 --pool-tgt: give them in pairs"):
        ReactParameters(**corpus, pool_src=[src, src], pool_tgt=[tgt]).check()
    with pytest.raises(BenchbuildError, match="--ensemble-set 'eval_every': expected KEY=VALUE"):
        ReactParameters(**corpus, pool_src=[src], pool_tgt=[tgt], ensemble_set=["eval_every"]).check()
    with pytest.raises(BenchbuildError, match="give at least one candidate pool"):
        ReactParameters(**corpus).check()


def test_build_react_records_the_options_that_shape_the_benchmark_not_where_it_ran():
    parameters = ReactParameters(ensemble_architecture=["d_model=32"], ensemble_set=["eval_every=500"],
                                 cache_dir=Path("elsewhere"), device="cpu", seed=4)
    recorded = parameters.recorded()
    assert recorded["architecture_overrides"] == {"d_model": 32} and recorded["recipe_overrides"] == {"eval_every": 500}
    assert list(recorded)[:4] == ["lowercase", "tokenize", "source_lang", "target_lang"]
    assert not {"cache_dir", "device", "ensemble_dir", "seed", "train_src", "pool_src"} & set(recorded)


def test_bad_utf8_in_the_pool_names_file_and_line(tmp_path):
    train = write_lines(tmp_path / "train.txt", ["a b"] * 4)
    pool = tmp_path / "pool.txt"
    pool.write_bytes(b"a b\n\xff\xfe\n")
    done = benchbuild("degree", "--train-src", str(train), "--pool", str(pool))
    assert done.returncode == 1 and "pool.txt` line 2 is not valid UTF-8" in done.stderr
    replaced = CliRunner().invoke(app, ["degree", "--train-src", str(train), "--pool", str(pool),
                                        "--encoding-errors", "replace", "--min-word-count", "1"])
    assert replaced.exit_code == 0, replaced.output
    assert replaced.stdout.splitlines()[:3] == ["line\tdegree", "1\t0.500000", "2\t"]


def test_novel_ngrams_are_unique_test_ngrams_absent_from_training():
    train = [["a", "b", "c"], ["b", "c", "d"]]
    test = [["a", "b", "d"], ["a", "b", "d"], ["c", "d"]]
    assert novel_ngram_counts(test, train) == {2: 1, 3: 1}  # (b, d); (a, b, d)


def test_table2_skips_pos_rows_for_german_and_says_why():
    statistics = table2(["a b d", "c d"], ["a b c"] * 4 + ["b c d"] * 4, lang="de")
    assert statistics.examples == 2 and statistics.novel_pos_ngrams is None
    assert statistics.mean_degree == pytest.approx((2 / 3 + 1 / 2) / 2)  # "a b"+"d"; "c d"
    assert "no spaCy model for language 'de'" in statistics.skipped[0]


def test_table2_counts_novel_pos_ngrams_with_the_english_model():
    statistics = table2(["the cat sleeps .", "dogs bark loudly ."], ["the dog sleeps ."] * 4, lang="en")
    assert statistics.novel_pos_ngrams is not None and statistics.novel_pos_ngrams[2] >= 1
    assert statistics.skipped == []


def test_stats_command_prints_table2_for_a_benchmark_split(tmp_path):
    rows = lambda sources: [{"id": str(i), "source": s, "target": s, "degree": 0.5}  # noqa: E731
                            for i, s in enumerate(sources)]
    info = BuildInfo(family="generic", name="react", parameters={"source_lang": "de", "min_word_count": 3,
                                                                 "min_ngram_count": 4, "max_ngram": None})
    card = CardFacts(pretty_name="t", summary="t", rules={}, languages=["de", "en"], license="other", citation="-")
    Benchmark.from_splits({"train": rows(["a b c"] * 4), "cg_test": rows(["a b c a", "c b"])}, info, card).save(
        tmp_path / "bench")
    result = CliRunner().invoke(app, ["stats", str(tmp_path / "bench")])
    assert result.exit_code == 0, result.output
    assert "# examples\t2" in result.output
    assert "unique novel word 2-grams\t2" in result.output  # (c, a) and (c, b)
    assert "unique novel POS 2-grams\tskipped" in result.output
    assert "no spaCy model for language 'de'" in " ".join(result.output.split())


@pytest.mark.parametrize("step, message", [
    ('command = "degree"\n[steps.options]\ntrain-src = "{a}"\npool = "{a}"\nout = "{out}"\nengine = "dask"\n'
     'workers = 0\n', "step 2 (degree): Invalid value for '--workers': Input should be greater than or equal to 1"),
    ('command = "build-react"\n[steps.options]\nout = "{out}"\ntrain-src = "{a}"\ntrain-tgt = "{a}"\n'
     'pool-src = "{a}"\npool-tgt = "{a}"\nscheduler = "tcp://127.0.0.1:8786"\n',
     "step 2 (build-react): --scheduler only apply to --engine dask: add --engine dask or leave them out"),
])
def test_a_pipeline_step_with_bad_engine_options_fails_before_any_step_runs(tmp_path, step, message):
    a = write_lines(tmp_path / "a.de", ["a b"] * 4)
    pipeline = tmp_path / "pipeline.toml"
    pipeline.write_text(f'[[steps]]\ncommand = "degree"\n[steps.options]\ntrain-src = "{a}"\npool = "{a}"\n'
                        f'out = "{tmp_path / "first.tsv"}"\n[[steps]]\n'
                        + step.format(a=a, out=tmp_path / "second"), encoding="utf-8")
    result = CliRunner().invoke(app, ["run", str(pipeline)])
    assert isinstance(result.exception, BenchbuildError)
    assert str(result.exception) == f"{pipeline}: {message}"
    assert not (tmp_path / "first.tsv").exists()


def test_build_react_on_dask_refuses_a_numbered_gpu_before_any_work(tmp_path):
    src = write_lines(tmp_path / "a.de", ["a b"])
    parameters = ReactParameters(train_src=src, train_tgt=src, pool_src=[src], pool_tgt=[src], device="cuda:1")
    from benchbuild.engine import EngineParameters

    with pytest.raises(BenchbuildError, match="--device cuda:1 names one GPU of this machine"):
        parameters.check_engine(EngineParameters(engine="dask", workers=1))
