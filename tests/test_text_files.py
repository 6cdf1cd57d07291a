"""A UTF-8 byte-order mark (what Windows' Notepad and Excel's "CSV UTF-8" put first) is not text: no reader makes it
part of the first row (issue #45), whatever it reads: corpora (parallel files, TSV, one sentence a line), SCAN's
canonical files, TOML pipelines and sweeps, predictions to score, CTER lexicons. And bytes that are not UTF-8 are one
line naming the file and the line."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest

from benchbuild.corpus import read_lines, read_parallel, read_tsv
from benchbuild.evaluation.cter import read_lexicon
from benchbuild.scan.official import read_scan_file
from benchbuild.toml_schema import read_toml

BOM = codecs.BOM_UTF8


def _file(path: Path, text: str) -> Path:
    path.write_bytes(BOM + text.encode("utf-8"))
    return path


def test_corpus_readers_drop_the_mark_from_the_first_line(tmp_path):
    source = _file(tmp_path / "source.txt", "ein Haus\nzwei Häuser\n")
    target = _file(tmp_path / "target.txt", "a house\ntwo houses\n")
    assert [row[1:] for row in read_parallel(source, target)] == [("ein Haus", "a house"),
                                                                   ("zwei Häuser", "two houses")]
    pairs = _file(tmp_path / "pairs.tsv", "ein Haus\ta house\n")
    assert [row[1:] for row in read_tsv(pairs)] == [("ein Haus", "a house")]
    assert [text for _, text in read_lines(source)] == ["ein Haus", "zwei Häuser"]


def test_scan_files_tomls_and_lexicons_read_their_first_line_whole(tmp_path):
    scan = _file(tmp_path / "tasks.txt", "IN: jump OUT: I_JUMP\n")
    assert [example.command for example in read_scan_file(scan)] == ["jump"]
    pipeline = _file(tmp_path / "pipeline.toml", 'name = "quick"\n')
    assert read_toml(pipeline, "pipeline") == {"name": "quick"}
    lexicon = _file(tmp_path / "lexicon.tsv", "house\tmaison\n")
    assert list(read_lexicon(lexicon).translations) == ["house"]


def test_bytes_that_are_not_utf8_are_one_line_naming_the_file_and_line(tiny_scan, tmp_path):
    from commands import benchbuild_in_process

    from benchbuild.errors import BenchbuildError
    from benchbuild.text_files import read_text

    predictions = tmp_path / "predictions.txt"
    predictions.write_bytes(BOM + b"I_JUMP\nI_WALK caf\xe9\nI_RUN\n")
    with pytest.raises(BenchbuildError, match=r"predictions.txt, line 2: not valid UTF-8 \(byte 0xe9 at column 11\)"):
        read_text(predictions)
    done = benchbuild_in_process("score", "--data", tiny_scan, "--split", "test", "--predictions", predictions)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1
    assert f"{predictions}, line 2: not valid UTF-8" in lines[0]
