"""`benchbuild import iwslt14 DIR`: the folder fairseq's prepare-iwslt14.sh writes (train/valid/test .de/.en with
subword-nmt joiners) becomes the `iwslt14_de_en` benchmark the catalogue's 000 Table 4 row names, joiners removed;
a folder whose files do not have the script's line counts is refused in one line before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchbuild.benchmark import load_splits, read_build_info
from benchbuild.papers import reported_on

COUNTS = {"train": 160_239, "valid": 7_283, "test": 6_750}


def write_release(folder: Path, counts: dict[str, int]) -> Path:
    """Files shaped like prepare-iwslt14.sh's output: one BPE-split pair repeated to each file's line count."""
    folder.mkdir()
    for stem, lines in counts.items():
        (folder / f"{stem}.de").write_text("wir sehen die kat@@ ze .\n" * lines, encoding="utf-8")
        (folder / f"{stem}.en").write_text("we see the c@@ at@@\n" * lines, encoding="utf-8")
    (folder / "code").write_text("k a\n", encoding="utf-8")  # the BPE codes the script leaves beside them
    return folder


def test_a_fairseq_iwslt14_folder_imports_with_bpe_joiners_removed(benchbuild, tmp_path):
    release = write_release(tmp_path / "iwslt14.tokenized.de-en", COUNTS)
    code, stdout, stderr = benchbuild("import", "iwslt14", release, "--out", tmp_path / "iwslt14")
    assert code == 0, stderr
    splits = load_splits(tmp_path / "iwslt14")
    assert {name: len(split) for name, split in splits.items()} == {"train": 160_239, "validation": 7_283,
                                                                      "test": 6_750}
    assert splits["test"][6_749] == {"id": "test-00006750", "source": "wir sehen die katze .",
                                     "target": "we see the cat"}
    info = read_build_info(tmp_path / "iwslt14")
    assert (info.family, info.name, info.parameters["remove_bpe"]) == ("iwslt14_de_en", "iwslt14_de_en/fairseq", "@@ ")
    assert reported_on("iwslt14_de_en", info.family, info.name, info.splits)
    assert "iwslt14_de_en/fairseq" in stdout


@pytest.mark.parametrize("stem, lines, phrase", [
    ("train", 1_000, "have 1,000 lines, fewer than the 160,239 of prepare-iwslt14.sh's train set"),
    ("test", 6_751, "have 6,751 lines, more than the 6,750 of prepare-iwslt14.sh's test set"),
])
def test_a_folder_without_the_scripts_line_counts_is_refused_in_one_line(refused, tmp_path, stem, lines, phrase):
    release = write_release(tmp_path / "release", {**COUNTS, stem: lines})
    message = refused("import", "iwslt14", release, "--out", tmp_path / "out")
    assert phrase in message and "--split NAME=FILES" in message
    assert not (tmp_path / "out").exists()


def test_a_layout_needs_its_folder(refused, tmp_path):
    assert "needs the folder of the release" in refused("import", "iwslt14", "--out", tmp_path / "out")
