"""What `benchbuild publish` refuses, in one line with exit 1 and nothing written: a folder that is not a benchmark, an
output that is the input or inside it, an existing folder publish did not write (with or without --overwrite), a
benchmark with an empty split or with splits whose columns disagree, and any publication without mlcroissant."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from commands import benchbuild_in_process as benchbuild
from commands import file_hashes, refused

from benchbuild.benchmark import read_build_info


def nothing_beside(out: Path) -> bool:
    """Neither `out` nor a staged folder of it exists."""
    return not out.exists() and not list(out.parent.glob(f".{out.name}.*"))


def test_a_folder_that_is_not_a_benchmark_is_refused(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "README.md").write_text("# notes\n", encoding="utf-8")
    refused(benchbuild("publish", folder, "--out", tmp_path / "out"), f"{folder} is not a benchbuild benchmark",
            "build.json is missing")
    assert nothing_beside(tmp_path / "out")


def test_a_missing_benchmark_folder_is_refused(tmp_path):
    refused(benchbuild("publish", tmp_path / "absent", "--out", tmp_path / "out"),
            f"{tmp_path / 'absent'} is missing: no such benchmark folder")
    assert nothing_beside(tmp_path / "out")


@pytest.mark.parametrize("where, phrase", [("inside", "lies inside the command's input BENCH"),
                                           ("equal", "is the command's input BENCH")])
def test_an_output_inside_or_equal_to_the_benchmark_is_refused(scan_benchmark, where, phrase):
    before = file_hashes(scan_benchmark)
    out = scan_benchmark / "published" if where == "inside" else scan_benchmark
    refused(benchbuild("publish", scan_benchmark, "--out", out), phrase)
    assert file_hashes(scan_benchmark) == before
    assert not (scan_benchmark / "published").exists()


@pytest.mark.parametrize("overwrite, phrase", [
    ((), "already exists: pass --overwrite to replace it"),
    (("--overwrite",), "exists and is not a folder benchbuild publish wrote (croissant.json, README.md and "
                       "build.json): it is a folder holding keep.txt"),
])
def test_an_existing_folder_publish_did_not_write_is_never_replaced(scan_benchmark, tmp_path, overwrite, phrase):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "keep.txt").write_text("mine\n", encoding="utf-8")
    refused(benchbuild("publish", scan_benchmark, "--out", out, *overwrite), phrase)
    assert [path.name for path in out.iterdir()] == ["keep.txt"]
    assert not list(tmp_path.glob(".mine.*"))


def test_overwrite_never_replaces_a_benchmark_folder_a_build_wrote(scan_benchmark, tmp_path):
    other = tmp_path / "scan"
    assert benchbuild("build-scan", "--split", "length", "--out", other).returncode == 0
    before = file_hashes(other / "length")
    refused(benchbuild("publish", scan_benchmark, "--out", other / "length", "--overwrite"),
            "is not a folder benchbuild publish wrote", "it is a folder holding README.md, build.json")
    assert file_hashes(other / "length") == before


@pytest.mark.shared
def test_a_benchmark_with_an_empty_split_is_refused(europarl_corpus, tmp_path):
    english, french = europarl_corpus(tmp_path, 300, [])  # no held-out pairing: an empty test split
    done = benchbuild("build-noun-adj", "--en", english, "--fr", french, "--out", tmp_path / "na", "--allow-small")
    assert done.returncode == 0 and read_build_info(tmp_path / "na").splits["test"].rows == 0, done.stderr
    refused(benchbuild("publish", tmp_path / "na", "--out", tmp_path / "out"),
            "split test of", "is empty: `datasets.load_dataset` cannot load an empty split")
    assert nothing_beside(tmp_path / "out")


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_splits_whose_column_types_disagree_are_refused_naming_the_column(tmp_path):
    train = write_jsonl(tmp_path / "train.jsonl", [{"source": "a b", "target": "b a", "level": 1}])
    test = write_jsonl(tmp_path / "test.jsonl", [{"source": "c d", "target": "d c", "level": "hard"}])
    done = benchbuild("import", "--split", f"train={train}", "--split", f"test={test}", "--metric", "exact_match",
                      "--out", tmp_path / "toy")
    assert done.returncode == 0, done.stderr
    refused(benchbuild("publish", tmp_path / "toy", "--out", tmp_path / "out"),
            "column 'level' is int64 in one split but string in split test")
    assert nothing_beside(tmp_path / "out")


def test_an_import_of_unknown_files_is_published_with_a_placeholder_for_its_paper(tmp_path):
    train = write_jsonl(tmp_path / "train.jsonl", [{"source": "a b", "target": "b a"}])
    test = write_jsonl(tmp_path / "test.jsonl", [{"source": "c d", "target": "d c"}])
    assert benchbuild("import", "--split", f"train={train}", "--split", f"test={test}", "--metric", "exact_match",
                      "--out", tmp_path / "toy").returncode == 0
    done = benchbuild("publish", tmp_path / "toy", "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    citation = (tmp_path / "out" / "CITATION.bib").read_text(encoding="utf-8")
    assert citation.startswith("% TODO (author): the BibTeX of the paper that introduced this dataset\n\n@software{")
    assert "  CITATION.bib and README.md (Citation): TODO (author): the BibTeX of the paper" in done.stderr


# The import of mlcroissant fails as it does where the package is not installed.
WITHOUT_MLCROISSANT = """
import sys
sys.modules["mlcroissant"] = None
from benchbuild.cli import main
sys.argv = ["benchbuild", "publish", *sys.argv[1:]]
main()
"""


def test_without_mlcroissant_publish_names_the_extra_to_install_and_writes_nothing(scan_benchmark, tmp_path):
    done = subprocess.run([sys.executable, "-c", WITHOUT_MLCROISSANT, str(scan_benchmark), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    refused(done, "mlcroissant, which is not installed: pip install 'benchbuild[publish]'")
    assert nothing_beside(tmp_path / "out")
