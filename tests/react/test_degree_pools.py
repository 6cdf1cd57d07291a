"""`benchbuild degree` over several `--pool` files and globs: scored in order as if concatenated, with either engine."""

from __future__ import annotations

import re

import pytest
from commands import benchbuild
from small_inputs import write_lines
from typer.testing import CliRunner

from benchbuild.cli import app
from benchbuild.errors import BenchbuildError
from benchbuild.react.degree import CHUNK_LINES, DegreeParameters, write_degree_table

TRAIN = ["a b c", "a b", "b c d", "c d a"] * 4


def _degree(*argv: str) -> str:
    """`benchbuild degree ARGV` through the CLI: its console output (it must succeed)."""
    result = CliRunner().invoke(app, ["degree", *argv])
    assert result.exit_code == 0, result.output
    return result.output


def _cycled(count: int, start: int) -> list[str]:
    """`count` pool lines of varied degree (some dropped by the OOV filter, some empty)."""
    shapes = ["a b c", "c b a", "a b c d a", "", "a z", "d c", "b c d a b"]
    return [shapes[(start + number) % len(shapes)] for number in range(count)]


def test_two_pool_files_give_the_table_of_their_concatenation(tmp_path):
    train = write_lines(tmp_path / "train.txt", TRAIN)
    first = write_lines(tmp_path / "first.txt", ["a b c", "", "a z"])
    second = write_lines(tmp_path / "second.txt", ["c b a", "b c d a", "z z"])
    joined = write_lines(tmp_path / "joined.txt", ["a b c", "", "a z", "c b a", "b c d a", "z z"])
    summary = _degree("--train-src", str(train), "--pool", str(first), "--pool", str(second),
                      "--out", str(tmp_path / "two.tsv"))
    _degree("--train-src", str(train), "--pool", str(joined), "--out", str(tmp_path / "one.tsv"))
    assert (tmp_path / "two.tsv").read_bytes() == (tmp_path / "one.tsv").read_bytes()
    assert (tmp_path / "two.tsv").read_text(encoding="utf-8").splitlines()[4:] == ["4\t1.000000", "5\t0.500000", "6\t"]
    assert "scored 3 of 6 lines (3 dropped by the OOV filter or empty)" in summary


def test_a_pool_glob_scores_its_files_in_name_order_among_the_other_pools(tmp_path):
    train = write_lines(tmp_path / "train.txt", TRAIN)
    for name, line in [("shards/b.txt", "c b a"), ("shards/c.txt", "d c"), ("shards/a.txt", "a b c")]:
        write_lines(tmp_path / name, [line])
    last = write_lines(tmp_path / "last.txt", ["a b"])
    joined = write_lines(tmp_path / "joined.txt", ["a b c", "c b a", "d c", "a b"])
    _degree("--train-src", str(train), "--pool", str(tmp_path / "shards" / "*.txt"), "--pool", str(last),
            "--out", str(tmp_path / "glob.tsv"))
    _degree("--train-src", str(train), "--pool", str(joined), "--out", str(tmp_path / "joined.tsv"))
    assert (tmp_path / "glob.tsv").read_bytes() == (tmp_path / "joined.tsv").read_bytes()


def test_a_pool_glob_matching_nothing_is_one_error_line_before_the_training_corpus_is_read(tmp_path):
    pool = write_lines(tmp_path / "pool.txt", ["a b c"])
    done = benchbuild("degree", "--train-src", str(tmp_path / "no-such-train.txt"), "--pool", str(pool), "--pool",
                      str(tmp_path / "shards" / "*.de"), "--out", str(tmp_path / "degree.tsv"))
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1 and "--pool" in done.stderr and "matches no file" in done.stderr
    assert "no-such-train" not in done.stderr
    assert not (tmp_path / "degree.tsv").exists() and not (tmp_path / "degree.tsv.partial").exists()


def test_a_missing_pool_file_among_several_is_named_before_anything_is_written(tmp_path):
    train, pool = write_lines(tmp_path / "train.txt", TRAIN), write_lines(tmp_path / "pool.txt", ["a b c"])
    done = benchbuild("degree", "--train-src", str(train), "--pool", str(pool), "--pool", str(tmp_path / "missing.txt"),
                      "--out", str(tmp_path / "out.tsv"))
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "missing.txt` does not exist" in done.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["pool.txt", "train.txt"]


def test_write_degree_table_takes_one_pool_path_or_several(tmp_path):
    train = write_lines(tmp_path / "train.txt", TRAIN)
    first, second = write_lines(tmp_path / "first.txt", ["a b c", "a z"]), write_lines(tmp_path / "second.txt", ["d c"])
    joined = write_lines(tmp_path / "joined.txt", ["a b c", "a z", "d c"])
    parameters = DegreeParameters(min_word_count=1)
    several = write_degree_table(train, [first, str(second)], tmp_path / "several.tsv", parameters)
    one = write_degree_table(str(train), joined, tmp_path / "one.tsv", parameters)
    assert several == one == {"lines": 3, "scored": 2, "dropped": 1}
    assert (tmp_path / "several.tsv").read_bytes() == (tmp_path / "one.tsv").read_bytes()


def test_write_degree_table_writes_its_header_and_rows_to_stdout_without_an_out(tmp_path, capsys):
    train, pool = write_lines(tmp_path / "train.txt", TRAIN), write_lines(tmp_path / "pool.txt", ["a b c", "", "z"])
    counts = write_degree_table(train, pool, None, DegreeParameters(min_word_count=1))
    assert capsys.readouterr().out == "line\tdegree\n1\t0.333333\n2\t\n3\t\n"
    assert counts == {"lines": 3, "scored": 1, "dropped": 2}
    rare = write_degree_table(train, pool, None, DegreeParameters(min_word_count=100))  # every word is too rare
    assert rare == {"lines": 3, "scored": 0, "dropped": 3}


def test_an_empty_pool_file_between_others_takes_no_row_number(tmp_path):
    train = write_lines(tmp_path / "train.txt", TRAIN)
    first, empty, last = (write_lines(tmp_path / name, lines) for name, lines in
                          [("first.txt", ["a b c"]), ("empty.txt", []), ("last.txt", ["d c"])])
    write_degree_table(train, [first, empty, last], tmp_path / "out.tsv", DegreeParameters(min_word_count=1))
    assert (tmp_path / "out.tsv").read_text(encoding="utf-8").splitlines() == ["line\tdegree", "1\t0.333333",
                                                                               "2\t1.000000"]


def test_write_degree_table_replaces_a_table_only_when_told_and_needs_a_pool(tmp_path):
    train, pool = write_lines(tmp_path / "train.txt", TRAIN), write_lines(tmp_path / "pool.txt", ["a b c"])
    out = write_lines(tmp_path / "out.tsv", ["an earlier table"])
    with pytest.raises(FileExistsError):
        write_degree_table(train, pool, out)
    assert out.read_text(encoding="utf-8") == "an earlier table\n"
    write_degree_table(train, pool, out, overwrite=True)
    assert out.read_text(encoding="utf-8").startswith("line\tdegree\n1\t")
    with pytest.raises(BenchbuildError) as error:
        write_degree_table(train, [], tmp_path / "none.tsv")
    assert str(error.value) == "give at least one pool file"


def test_the_training_corpus_is_read_with_the_encoding_errors_asked_for_and_named_by_its_option(tmp_path):
    train = tmp_path / "train.txt"
    train.write_bytes(b"a b c\n" * 4 + b"a \xff b\n")
    pool = write_lines(tmp_path / "pool.txt", ["a b c"])
    with pytest.raises(BenchbuildError, match="line 5 is not valid UTF-8"):
        write_degree_table(train, pool, tmp_path / "strict.tsv")
    assert write_degree_table(train, pool, tmp_path / "replaced.tsv", encoding_errors="replace")["scored"] == 1
    blank = write_lines(tmp_path / "blank.txt", ["  ", ""])
    with pytest.raises(BenchbuildError, match=r"^--train-src `.*blank.txt` holds no sentence"):
        write_degree_table(blank, pool, tmp_path / "blank.tsv")


def test_a_shown_progress_bar_names_the_stage_and_counts_every_pool_line(tmp_path, capsys):
    train, pool = write_lines(tmp_path / "train.txt", TRAIN), write_lines(tmp_path / "pool.txt", ["a b c"] * 7)
    write_degree_table(train, pool, tmp_path / "out.tsv", progress=True)
    shown = capsys.readouterr().err
    assert re.search(r"^compositional degree .* 7/7 ", shown, re.M), shown
    write_degree_table(train, pool, tmp_path / "quiet.tsv", overwrite=True)
    assert capsys.readouterr().err == "", "no bar unless asked"


@pytest.mark.distributed
def test_dask_scores_several_pool_files_of_several_shards_to_the_local_bytes(dask_scheduler, tmp_path):
    train = write_lines(tmp_path / "train.txt", TRAIN)
    # Each file spans two shards, so the second file's shards start at rows that only the files before it give.
    first = _cycled(CHUNK_LINES + 1_000, start=0)
    second = _cycled(CHUNK_LINES + 7, start=3)
    pools = [str(write_lines(tmp_path / "first.txt", first)), str(write_lines(tmp_path / "second.txt", second))]
    joined = write_lines(tmp_path / "joined.txt", first + second)
    arguments = ["--train-src", str(train), "--pool", pools[0], "--pool", pools[1]]
    _degree(*arguments, "--out", str(tmp_path / "local.tsv"))
    _degree(*arguments, "--out", str(tmp_path / "dask.tsv"), "--engine", "dask", "--scheduler", dask_scheduler)
    _degree("--train-src", str(train), "--pool", str(joined), "--out", str(tmp_path / "joined.tsv"))
    table = (tmp_path / "dask.tsv").read_bytes()
    assert table == (tmp_path / "local.tsv").read_bytes() == (tmp_path / "joined.tsv").read_bytes()
    assert table.count(b"\n") == 1 + len(first) + len(second)
