"""Outputs never overwrite inputs or users' files (`benchbuild.outputs`): the build commands, `degree` and `score`
with an output that is, holds or lies inside an input, an existing folder where a file goes, and `--overwrite` over
something benchbuild did not write; each refused in one line before any work, every input byte kept."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from benchbuild.errors import BenchbuildError
from benchbuild.outputs import check_name, check_output, check_relative

BENCHBUILD = str(Path(sys.executable).parent / "benchbuild")
WORDS = "a b c d e f g h i j".split()


def _benchbuild(*arguments, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([BENCHBUILD, *map(str, arguments)], capture_output=True, text=True, cwd=cwd,
                          stdin=subprocess.DEVNULL)


def _refused(done: subprocess.CompletedProcess, *phrases: str) -> None:
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("benchbuild: error:")]
    assert len(errors) == 1 and done.stderr.rstrip().endswith(errors[0]), done.stderr
    for phrase in phrases:
        assert phrase in errors[0], done.stderr


def _snapshot(folder: Path) -> dict[str, str]:
    paths = [folder] if folder.is_file() else sorted(p for p in folder.rglob("*") if p.is_file())
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def _lines(path: Path, count: int = 40) -> Path:
    path.write_text("".join(" ".join(WORDS[(row * 7 + col * 3) % 10] for col in range(5)) + "\n"
                            for row in range(count)), encoding="utf-8")
    return path


def test_degree_with_its_pool_as_out_and_overwrite_keeps_the_pool(tmp_path):
    train, pool = _lines(tmp_path / "train.de"), _lines(tmp_path / "pool.de", 12)
    before = _snapshot(pool)
    _refused(_benchbuild("degree", "--train-src", train, "--pool", pool, "--out", pool, "--overwrite"),
             "is the command's input --pool")
    assert _snapshot(pool) == before


def test_degree_overwrite_replaces_its_own_table_but_not_another_file(tmp_path):
    train, pool = _lines(tmp_path / "train.de"), _lines(tmp_path / "pool.de", 12)
    table = tmp_path / "degree.tsv"
    assert _benchbuild("degree", "--train-src", train, "--pool", pool, "--out", table).returncode == 0
    again = _benchbuild("degree", "--train-src", train, "--pool", pool, "--out", table, "--overwrite")
    assert again.returncode == 0, again.stderr
    assert table.read_text().startswith("line\tdegree\n")
    mine = _lines(tmp_path / "mine.tsv", 3)
    _refused(_benchbuild("degree", "--train-src", train, "--pool", pool, "--out", mine, "--overwrite"),
             "is not a degree table benchbuild wrote")
    assert mine.read_text().count("\n") == 3


def test_degree_and_score_to_an_existing_folder_are_refused_without_debris(tmp_path):
    train, pool = _lines(tmp_path / "train.de"), _lines(tmp_path / "pool.de", 12)
    folder = tmp_path / "results"
    folder.mkdir()
    for _ in range(2):  # the rerun meets nothing the first one left
        _refused(_benchbuild("degree", "--train-src", train, "--pool", pool, "--out", folder, "--overwrite"),
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
    _refused(_benchbuild("score", "--data", data, "--predictions", predictions, "--out", predictions),
             "is the command's input --predictions")
    assert predictions.read_text() == "JUMP 0\nJUMP 1\nJUMP 9\n"
    (tmp_path / "scores").mkdir()
    _refused(_benchbuild("score", "--data", data, "--predictions", predictions, "--out", tmp_path / "scores"),
             "is not a metrics file")
    _refused(_benchbuild("score", "--data", data, "--predictions", predictions, "--out", tmp_path),
             "holds the command's input")
    metrics = tmp_path / "metrics.json"
    for _ in range(2):  # its own metrics file is replaced
        done = _benchbuild("score", "--data", data, "--predictions", predictions, "--out", metrics)
        assert done.returncode == 0, done.stderr


def test_build_noun_adj_overwrite_over_the_corpus_folder_keeps_the_corpus(tmp_path):
    corpus = tmp_path / "europarl"
    corpus.mkdir()
    (corpus / "c.en").write_text("the big house .\n")
    (corpus / "c.fr").write_text("la grande maison .\n")
    before = _snapshot(corpus)
    _refused(_benchbuild("build-noun-adj", "--en", corpus / "c.en", "--fr", corpus / "c.fr", "--out", corpus,
                         "--overwrite"), "holds the command's input --en")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "x.txt").write_text("x")
    _refused(_benchbuild("build-noun-adj", "--en", corpus / "c.en", "--fr", corpus / "c.fr", "--out",
                         tmp_path / "mine", "--overwrite"), "is not a benchmark folder benchbuild wrote", "x.txt")
    assert _snapshot(corpus) == before and (tmp_path / "mine" / "x.txt").read_text() == "x"


def test_build_scan_overwrite_replaces_only_its_own_splittings(tmp_path):
    out = tmp_path / "scan"
    (out / "simple").mkdir(parents=True)
    (out / "simple" / "notes.txt").write_text("mine")
    _refused(_benchbuild("build-scan", "--out", out, "--split", "simple", "--overwrite"),
             "is not a benchmark folder benchbuild wrote")
    assert (out / "simple" / "notes.txt").read_text() == "mine"


def test_build_react_cache_that_is_its_out_is_refused_before_any_stage(tmp_path):
    train = _lines(tmp_path / "train.de")
    done = _benchbuild("build-react", "--out", tmp_path / "out", "--train-src", train, "--train-tgt", train,
                       "--pool-src", train, "--pool-tgt", train, "--cache-dir", tmp_path / "out")
    assert done.returncode == 1 and "--cache-dir" in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()


def test_an_empty_path_is_refused_for_every_command_that_writes(tmp_path):
    train = _lines(tmp_path / "train.de")
    commands = [["build-scan", "--out", ""], ["degree", "--train-src", train, "--pool", train, "--out", ""],
                ["report", ""], ["eval", "--run", "", "--data", tmp_path], ["sweep", ""]]
    for command in commands:
        done = _benchbuild(*command, cwd=tmp_path)
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
