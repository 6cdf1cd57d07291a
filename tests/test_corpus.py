"""Corpus readers: alignment, UTF-8 validation, empty-line dropping, TSV columns, local HF datasets, streaming."""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchbuild.corpus import (CorpusStats, ParallelInput, check_aligned, count_lines, line_shards, read_hf,
                               read_lines, read_parallel, read_tsv)
from benchbuild.errors import BenchbuildError


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_count_lines_counts_a_last_line_without_newline(tmp_path):
    assert count_lines(write(tmp_path / "a", b"one\ntwo\nthree")) == 3
    assert count_lines(write(tmp_path / "b", b"one\ntwo\n")) == 2
    assert count_lines(write(tmp_path / "c", b"")) == 0


def test_count_lines_does_not_split_on_unicode_line_separators(tmp_path):
    path = write(tmp_path / "a", "a\u2028b\rc\nd\n".encode())
    assert count_lines(path) == 2
    assert [text for _, text in read_lines(path)] == ["a\u2028b\rc", "d"]


def test_misaligned_files_name_both_files_and_counts(tmp_path):
    en = write(tmp_path / "train.en", b"a\nb\nc\n")
    fr = write(tmp_path / "train.fr", b"a\nb\n")
    with pytest.raises(BenchbuildError) as error:
        check_aligned(en, fr)
    message = str(error.value)
    assert "train.fr` has 2 lines but" in message and "train.en` has 3" in message
    assert "not aligned" in message


def test_read_parallel_checks_alignment_when_called_not_when_iterated(tmp_path):
    en = write(tmp_path / "x.en", b"a\nb\n")
    fr = write(tmp_path / "x.fr", b"a\n")
    with pytest.raises(BenchbuildError, match="not aligned"):
        read_parallel(en, fr)


def test_read_parallel_streams_numbered_pairs_and_drops_empty_sides(tmp_path):
    en = write(tmp_path / "x.en", b"Hello .\n\nGood day\r\n   \nBye\n")
    fr = write(tmp_path / "x.fr", b"Bonjour .\nVide\n\nQuelque chose\nAu revoir\n")
    stats = CorpusStats()
    rows = list(read_parallel(en, fr, stats=stats))
    assert rows == [(1, "Hello .", "Bonjour ."), (5, "Bye", "Au revoir")]
    assert (stats.pairs_read, stats.empty_dropped, stats.pairs_kept) == (5, 3, 2)


def test_invalid_utf8_names_file_and_line(tmp_path):
    en = write(tmp_path / "x.en", b"fine\nalso fine\n")
    fr = write(tmp_path / "x.fr", b"bien\nmal \xff form\xe9\n")
    with pytest.raises(BenchbuildError) as error:
        list(read_parallel(en, fr))
    assert "x.fr` line 2 is not valid UTF-8" in str(error.value)
    assert "0xff" in str(error.value)


def test_replace_mode_replaces_and_counts_lines(tmp_path):
    en = write(tmp_path / "x.en", b"fine\nalso \xfe fine\n")
    fr = write(tmp_path / "x.fr", b"bien\nmal \xff form\xe9\n")
    stats = CorpusStats()
    rows = list(read_parallel(en, fr, encoding_errors="replace", stats=stats))
    assert rows[1] == (2, "also \ufffd fine", "mal \ufffd form\ufffd")
    assert stats.replaced_characters_lines == 1


def test_read_tsv_two_columns(tmp_path):
    path = write(tmp_path / "c.tsv", "a house\tune maison\n\n\tvide\ngreen\tvert\n".encode())
    stats = CorpusStats()
    assert list(read_tsv(path, stats=stats)) == [(1, "a house", "une maison"), (4, "green", "vert")]
    assert (stats.pairs_read, stats.empty_dropped) == (4, 2)


def test_read_tsv_wrong_column_count_names_file_and_line(tmp_path):
    path = write(tmp_path / "c.tsv", b"a\tb\nthree\tcolumns\there\n")
    with pytest.raises(BenchbuildError, match=r"c\.tsv` line 2 has 3 tab-separated columns"):
        list(read_tsv(path))


def test_read_lines_monolingual(tmp_path):
    path = write(tmp_path / "m.txt", b"one\n \ntwo")
    stats = CorpusStats()
    assert list(read_lines(path, stats=stats)) == [(1, "one"), (3, "two")]
    assert stats.empty_dropped == 1


def test_missing_file_is_named(tmp_path):
    with pytest.raises(BenchbuildError, match="nope.txt` does not exist"):
        read_lines(tmp_path / "nope.txt")


@pytest.fixture
def local_hf(tmp_path) -> Path:
    rows = {"translation": [{"en": "a cat", "fr": "un chat"}, {"en": " ", "fr": "rien"},
                            {"en": "two dogs", "fr": "deux chiens"}]}
    folder = tmp_path / "hf"
    datasets.DatasetDict({"train": datasets.Dataset.from_dict(rows),
                          "test": datasets.Dataset.from_dict({"translation": [{"en": "x", "fr": "y"}]})}
                         ).save_to_disk(str(folder))
    return folder


def test_read_hf_from_save_to_disk_folder(local_hf):
    stats = CorpusStats()
    assert list(read_hf(local_hf, "en", "fr", stats=stats)) == [(1, "a cat", "un chat"), (3, "two dogs", "deux chiens")]
    assert stats.empty_dropped == 1
    assert list(read_hf(local_hf, "fr", "en", split="test")) == [(1, "y", "x")]


def test_read_hf_from_a_folder_of_data_files(tmp_path):
    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "train.jsonl").write_text('{"translation": {"en": "hi", "fr": "salut"}}\n', encoding="utf-8")
    assert list(read_hf(folder, "en", "fr")) == [(1, "hi", "salut")]


def test_read_hf_unknown_split_language_and_hub_names_are_errors(local_hf):
    with pytest.raises(BenchbuildError, match="no split 'validation'"):
        read_hf(local_hf, "en", "fr", split="validation")
    with pytest.raises(BenchbuildError, match="no 'de' text"):
        list(read_hf(local_hf, "en", "de"))
    with pytest.raises(BenchbuildError, match="not a local folder"):
        read_hf("wmt14", "en", "fr")


def test_parallel_input_needs_exactly_one_corpus(tmp_path):
    with pytest.raises(BenchbuildError, match="exactly one corpus"):
        ParallelInput()
    with pytest.raises(BenchbuildError, match="exactly one corpus"):
        ParallelInput(tsv=tmp_path / "a.tsv", hf="x")
    with pytest.raises(BenchbuildError, match="both the source and the target"):
        ParallelInput(source=tmp_path / "a.en")


def test_parallel_input_validates_and_streams_each_kind(tmp_path, local_hf):
    en = write(tmp_path / "p.en", b"a\nb\n")
    fr = write(tmp_path / "p.fr", b"x\ny\n")
    files = ParallelInput(source=en, target=fr)
    assert files.validate() == 2
    assert list(files.rows()) == [(1, "a", "x"), (2, "b", "y")]
    assert set(files.files()) == {"p.en", "p.fr"}
    hf = ParallelInput(hf=str(local_hf))
    assert hf.validate() == 3
    assert len(list(hf.rows())) == 2


LINE_TEXTS = st.sampled_from(["a b", "", "  ", "c\rd", "x\u2028y", "é", "\tt", "z"])


@settings(max_examples=150, deadline=None)
@given(sources=st.lists(LINE_TEXTS, max_size=30), targets=st.lists(LINE_TEXTS, min_size=30, max_size=30),
       final_newline=st.booleans(), rows=st.integers(1, 7))
def test_shards_read_alone_give_the_rows_numbers_and_counts_of_one_read(tmp_path_factory, sources, targets,
                                                                        final_newline, rows):
    """Aligned files and a TSV, any length (empty included), with or without a last newline, cut every `rows` rows."""
    folder = tmp_path_factory.mktemp("shards")
    targets = targets[:len(sources)]

    def joined(lines: list[str]) -> bytes:  # an empty last line exists only with its newline
        return ("\n".join(lines) + ("\n" if lines and (final_newline or not lines[-1]) else "")).encode()

    source, target = write(folder / "a.de", joined(sources)), write(folder / "a.en", joined(targets))
    tsv = write(folder / "a.tsv", joined([f"{s.replace(chr(9), '')}\t{t.replace(chr(9), '')}"
                                          for s, t in zip(sources, targets)]))
    for corpus in (ParallelInput(source=source, target=target), ParallelInput(tsv=tsv)):
        whole, sharded = CorpusStats(), CorpusStats()
        expected = list(corpus.rows(stats=whole))
        shards = list(corpus.shards(rows))
        assert [row for shard in shards for row in shard.rows(stats=sharded)] == expected
        assert sharded == whole
        assert sum(shard.count for shard in shards) == count_lines(source)
    texts = [text for shard in line_shards(source, rows) for text in shard.texts()]
    assert len(texts) == count_lines(source)
    assert [(number, text) for number, text in enumerate(texts, start=1) if text.strip()] == list(read_lines(source))


def test_parquet_and_local_hf_inputs_are_read_whole_or_by_shards(tmp_path, local_hf):
    import pyarrow as pa
    import pyarrow.parquet as pq

    translations = [{"en": f"e{i}", "fr": f"f{i}" if i % 7 else ""} for i in range(300)]
    pq.write_table(pa.table({"translation": translations}), tmp_path / "a.parquet", row_group_size=64)
    pq.write_table(pa.table({"en": ["a", "b"], "fr": ["c", ""]}), tmp_path / "b.parquet")
    for corpus in (ParallelInput(parquet=tmp_path / "a.parquet"), ParallelInput(parquet=tmp_path / "b.parquet"),
                   ParallelInput(hf=str(local_hf))):
        whole, sharded = CorpusStats(), CorpusStats()
        expected = list(corpus.rows(stats=whole))
        assert [row for shard in corpus.shards(100) for row in shard.rows(stats=sharded)] == expected
        assert sharded == whole and whole.pairs_read == corpus.validate()
    assert list(ParallelInput(parquet=tmp_path / "b.parquet").rows()) == [(1, "a", "c")]
    assert [shard.count for shard in ParallelInput(parquet=tmp_path / "a.parquet").shards(100)] == [128, 128, 44]
    pq.write_table(pa.table({"de": ["a"]}), tmp_path / "c.parquet")
    with pytest.raises(BenchbuildError, match="has neither a `translation` column nor the columns 'en' and 'fr'"):
        ParallelInput(parquet=tmp_path / "c.parquet").validate()
