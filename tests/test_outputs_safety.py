"""Outputs never overwrite inputs or users' files (`benchbuild.outputs`): the build commands, `degree` and `score`
with an output that is, holds or lies inside an input, an existing folder where a file goes, and `--overwrite` over
something benchbuild did not write; each refused in one line before any work, every input byte kept."""

from __future__ import annotations

import pytest
from commands import benchbuild_in_process as benchbuild
from commands import file_hashes, refused
from small_inputs import word_lines, write_lines

from benchbuild.errors import BenchbuildError
from benchbuild.outputs import check_name, check_output, check_relative


def test_degree_with_its_pool_as_out_and_overwrite_keeps_the_pool(tmp_path):
    train, pool = write_lines(tmp_path / "train.de", word_lines()), write_lines(tmp_path / "pool.de", word_lines(12))
    before = file_hashes(pool)
    refused(benchbuild("degree", "--train-src", train, "--pool", pool, "--out", pool, "--overwrite"),
            "is the command's input --pool")
    assert file_hashes(pool) == before


def test_degree_overwrite_replaces_its_own_table_but_not_another_file(tmp_path):
    train, pool = write_lines(tmp_path / "train.de", word_lines()), write_lines(tmp_path / "pool.de", word_lines(12))
    table = tmp_path / "degree.tsv"
    assert benchbuild("degree", "--train-src", train, "--pool", pool, "--out", table).returncode == 0
    again = benchbuild("degree", "--train-src", train, "--pool", pool, "--out", table, "--overwrite")
    assert again.returncode == 0, again.stderr
    assert table.read_text().startswith("line\tdegree\n")
    mine = write_lines(tmp_path / "mine.tsv", word_lines(3))
    refused(benchbuild("degree", "--train-src", train, "--pool", pool, "--out", mine, "--overwrite"),
            "is not a degree table benchbuild wrote")
    assert mine.read_text().count("\n") == 3


def test_degree_and_score_to_an_existing_folder_are_refused_without_debris(tmp_path):
    train, pool = write_lines(tmp_path / "train.de", word_lines()), write_lines(tmp_path / "pool.de", word_lines(12))
    folder = tmp_path / "results"
    folder.mkdir()
    for _ in range(2):  # the rerun meets nothing the first one left
        refused(benchbuild("degree", "--train-src", train, "--pool", pool, "--out", folder, "--overwrite"),
                "is not a degree table", "an empty folder")
    assert list(tmp_path.glob("*partial*")) == [] and list(folder.iterdir()) == []


def test_score_never_replaces_its_predictions(tmp_path):
    import datasets

    from benchbuild.benchmark import Benchmark, BuildInfo, CardFacts

    rows = [{"id": str(i), "source": f"jump {i}", "target": f"JUMP {i}"} for i in range(3)]
    info = BuildInfo(family="scan", name="scan/tiny", parameters={})
    card = CardFacts(pretty_name="t", summary="t", rules={}, languages=["en"], license="BSD", citation="")
    benchmark = Benchmark.from_splits({"train": rows, "test": rows}, info, card)
    data = tmp_path / "bench"
    datasets.DatasetDict(benchmark.splits).save_to_disk(str(data))
    (data / "build.json").write_text(benchmark.info.to_json(), encoding="utf-8")
    predictions = tmp_path / "out.txt"
    predictions.write_text("JUMP 0\nJUMP 1\nJUMP 9\n")
    refused(benchbuild("score", "--data", data, "--predictions", predictions, "--out", predictions),
            "is the command's input --predictions")
    assert predictions.read_text() == "JUMP 0\nJUMP 1\nJUMP 9\n"
    (tmp_path / "scores").mkdir()
    refused(benchbuild("score", "--data", data, "--predictions", predictions, "--out", tmp_path / "scores"),
            "is not a metrics file")
    refused(benchbuild("score", "--data", data, "--predictions", predictions, "--out", tmp_path),
            "holds the command's input")
    metrics = tmp_path / "metrics.json"
    for _ in range(2):  # its own metrics file is replaced
        done = benchbuild("score", "--data", data, "--predictions", predictions, "--out", metrics)
        assert done.returncode == 0, done.stderr


def test_build_noun_adj_overwrite_over_the_corpus_folder_keeps_the_corpus(tmp_path):
    corpus = tmp_path / "europarl"
    corpus.mkdir()
    (corpus / "c.en").write_text("the big house .\n")
    (corpus / "c.fr").write_text("la grande maison .\n")
    before = file_hashes(corpus)
    refused(benchbuild("build-noun-adj", "--en", corpus / "c.en", "--fr", corpus / "c.fr", "--out", corpus,
                       "--overwrite"), "holds the command's input --en")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "x.txt").write_text("x")
    refused(benchbuild("build-noun-adj", "--en", corpus / "c.en", "--fr", corpus / "c.fr", "--out",
                       tmp_path / "mine", "--overwrite"), "is not a benchmark folder benchbuild wrote", "x.txt")
    assert file_hashes(corpus) == before and (tmp_path / "mine" / "x.txt").read_text() == "x"


def test_build_scan_overwrite_replaces_only_its_own_splittings(tmp_path):
    out = tmp_path / "scan"
    (out / "simple").mkdir(parents=True)
    (out / "simple" / "notes.txt").write_text("mine")
    refused(benchbuild("build-scan", "--out", out, "--split", "simple", "--overwrite"),
            "is not a benchmark folder benchbuild wrote")
    assert (out / "simple" / "notes.txt").read_text() == "mine"


def test_build_react_cache_that_is_its_out_is_refused_before_any_stage(tmp_path):
    train = write_lines(tmp_path / "train.de", word_lines())
    done = benchbuild("build-react", "--out", tmp_path / "out", "--train-src", train, "--train-tgt", train,
                      "--pool-src", train, "--pool-tgt", train, "--cache-dir", tmp_path / "out")
    assert done.returncode == 1 and "--cache-dir" in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()


def test_an_empty_path_is_refused_for_every_command_that_writes(tmp_path):
    train = write_lines(tmp_path / "train.de", word_lines())
    commands = [["build-scan", "--out", ""], ["degree", "--train-src", train, "--pool", train, "--out", ""],
                ["report", ""], ["eval", "--run", "", "--data", tmp_path], ["sweep", ""]]
    for command in commands:
        done = benchbuild(*command, cwd=tmp_path)
        assert done.returncode != 0 and "is empty" in done.stderr, (command, done.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.de"]


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../x", "/abs", "a\\b", " x"])
def test_a_name_that_would_leave_its_folder_is_refused(name):
    with pytest.raises(BenchbuildError):
        check_name(name, "name")


@pytest.mark.parametrize("path", ["", "/etc", "../x", "a/../../b"])
def test_a_relative_path_that_would_leave_its_folder_is_refused(path):
    with pytest.raises(BenchbuildError):
        check_relative(path, "out")


def test_a_toml_table_is_not_a_path():
    with pytest.raises(BenchbuildError, match="must be a path"):
        check_name({"path": "x"}, "out")


def test_a_symbolic_link_is_never_an_output(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(BenchbuildError, match="symbolic link"):
        check_output(tmp_path / "link", "--out", "run", exists="continue")
