"""The on-disk benchmark contract: formats, build.json, the card, atomic writes, determinism."""

import json
import os
from pathlib import Path

import datasets
import pytest
import yaml

from benchbuild.atomic import OutputExistsError, atomic_directory
from benchbuild.benchmark import Benchmark, BuildInfo, CardFacts, load_splits, read_build_info
from benchbuild.fingerprint import sha256_file, table_fingerprint

ROWS = {
    "train": [{"id": "r0", "source": "jump twice", "target": "I_JUMP I_JUMP"},
              {"id": "r1", "source": "walk", "target": "I_WALK"}],
    "test": [{"id": "r2", "source": "jump", "target": "I_JUMP"}],
}


def make(tmp_path: Path, rows=ROWS, seed=7) -> Benchmark:
    source = tmp_path / "input.txt"
    source.write_text("some input\n")
    info = BuildInfo.with_inputs("generic", "toy", {"splitting": "toy"}, seed, {"input.txt": source})
    card = CardFacts(pretty_name="Toy", summary="A toy benchmark.", rules={"train": "two rows", "test": "one row"},
                     languages=["en"], license="mit", citation="@misc{toy}", counts={"dropped lines": 3})
    return Benchmark.from_splits(rows, info, card)


@pytest.mark.parametrize("format", ["arrow", "parquet", "jsonl"])
def test_every_format_loads_back_the_same_rows(tmp_path, format):
    out = make(tmp_path).save(tmp_path / "bench", format=format)
    loaded = load_splits(out)
    assert sorted(loaded) == ["test", "train"]
    assert loaded["train"].to_list() == ROWS["train"]
    assert loaded["test"].to_list() == ROWS["test"]


def test_arrow_format_loads_with_datasets_load_from_disk(tmp_path):
    out = make(tmp_path).save(tmp_path / "bench")
    assert datasets.load_from_disk(str(out))["train"]["source"][:] == ["jump twice", "walk"]


def test_parquet_format_is_hub_ready(tmp_path):
    out = make(tmp_path).save(tmp_path / "bench", format="parquet")
    assert (out / "data" / "train-00000-of-00001.parquet").is_file()
    loaded = datasets.load_dataset("parquet", data_dir=str(out / "data"))
    assert loaded["test"][0]["source"] == "jump"


def test_build_json_records_version_parameters_seed_inputs_and_fingerprints(tmp_path):
    out = make(tmp_path).save(tmp_path / "bench")
    info = read_build_info(out)
    assert info.parameters == {"splitting": "toy"} and info.seed == 7
    assert info.inputs == {"input.txt": sha256_file(tmp_path / "input.txt")}
    assert info.splits["train"].rows == 2 and info.splits["test"].rows == 1
    assert info.splits["train"].fingerprint == table_fingerprint(datasets.load_from_disk(str(out))["train"].data.table)
    assert info.benchbuild_version and info.command_line.startswith("benchbuild")


def test_card_starts_with_front_matter_and_states_rules_counts_and_provenance(tmp_path):
    out = make(tmp_path).save(tmp_path / "bench")
    text = (out / "README.md").read_text()
    assert text.startswith("---\n")
    header = yaml.safe_load(text.split("---\n")[1])
    assert header["pretty_name"] == "Toy" and header["license"] == "mit"
    splits = header["dataset_info"]["splits"]
    assert [(s["name"], s["num_examples"]) for s in splits] == [("train", 2), ("test", 1)]
    assert all(s["num_bytes"] > 0 for s in splits)
    assert header["dataset_info"]["dataset_size"] == sum(s["num_bytes"] for s in splits)
    assert {"split": "train", "path": "train/data-*.arrow"} in header["configs"][0]["data_files"]
    for section in ("## Summary", "## How it was built", "## Statistics", "## Provenance", "## Citation"):
        assert section in text
    assert "two rows" in text and "| dropped lines | 3 |" in text
    assert sha256_file(tmp_path / "input.txt") in text


def test_fingerprint_is_content_not_layout(tmp_path):
    a = make(tmp_path).info.splits["train"].fingerprint
    reordered = {"train": list(reversed(ROWS["train"])), "test": ROWS["test"]}
    b = make(tmp_path, reordered).info.splits["train"].fingerprint
    changed = {"train": [dict(ROWS["train"][0], target="I_JUMP"), ROWS["train"][1]], "test": ROWS["test"]}
    c = make(tmp_path, changed).info.splits["train"].fingerprint
    assert a != b and a != c
    assert make(tmp_path).info.splits["train"].fingerprint == a


@pytest.mark.parametrize("format", ["arrow", "parquet", "jsonl"])
def test_two_builds_write_identical_files(tmp_path, format):
    first = make(tmp_path).save(tmp_path / "one", format=format)
    second = make(tmp_path).save(tmp_path / "two", format=format)
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    for relative in files:
        if relative.name != "build.json":  # build.json also records the command line
            assert (first / relative).read_bytes() == (second / relative).read_bytes(), relative
    assert json.loads((first / "build.json").read_text())["splits"] == json.loads((second / "build.json").read_text())["splits"]


def test_existing_output_is_refused_without_overwrite(tmp_path):
    make(tmp_path).save(tmp_path / "bench")
    with pytest.raises(OutputExistsError, match="--overwrite"):
        make(tmp_path).save(tmp_path / "bench")
    make(tmp_path, seed=8).save(tmp_path / "bench", overwrite=True)
    assert read_build_info(tmp_path / "bench").seed == 8


def test_a_failed_write_leaves_no_folder_and_no_temporary_files(tmp_path):
    with pytest.raises(RuntimeError):
        with atomic_directory(tmp_path / "bench") as tmp:
            (tmp / "half.txt").write_text("half")
            raise RuntimeError("killed")
    assert list(tmp_path.iterdir()) == []


def test_a_ctrl_c_just_after_the_temporary_file_is_created_leaves_no_temporary_file(tmp_path, monkeypatch):
    """A Ctrl-C lands between bytecodes: one right after `os.open` has created the temporary file (the moment an
    interrupted `train` once left `.run.json.partial-*` in its run folder) still has it removed, and the old file
    stays whole. The interruption is a KeyboardInterrupt raised as the real `os.open` returns."""
    from benchbuild import atomic

    real_open = os.open

    def open_then_ctrl_c(*arguments, **keywords):
        real_open(*arguments, **keywords)
        raise KeyboardInterrupt

    atomic.write_file(tmp_path / "run.json", "old\n")
    monkeypatch.setattr(atomic.os, "open", open_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        atomic.write_file(tmp_path / "run.json", "new\n")
    monkeypatch.undo()
    assert [path.name for path in tmp_path.iterdir()] == ["run.json"]
    assert (tmp_path / "run.json").read_text() == "old\n"


def test_a_failed_overwrite_keeps_the_old_complete_folder(tmp_path):
    make(tmp_path).save(tmp_path / "bench")
    with pytest.raises(RuntimeError):
        with atomic_directory(tmp_path / "bench", overwrite=True):
            raise RuntimeError("killed")
    assert read_build_info(tmp_path / "bench").seed == 7
