"""Options that other tests reach through the Python API only, run here through the installed `benchbuild` command,
each with an assertion on what it changed: build-react's `--train-hf`, `--pool-hf` and `--test-src/--test-tgt`,
a build's `--format parquet|jsonl` (the files on disk, and `train` reading them), train's `--recipe`,
`--validation-split` and `--max-minutes` (as run.json records them), and stats' `--against` and `--lang`.
(`eval --lexicon/--compound` runs through the CLI in tests/importing/test_import_layouts.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest
from commands import benchbuild_in_process as benchbuild
from commands import refused
from small_inputs import TINY_REACT, tiny_transformer_entry, word_lines, write_benchmark, write_lines

from benchbuild.benchmark import load_splits, read_build_info

# The entry's own recipe is `mt` (an imported benchmark's default); `[recipe.scan]` differs in learning rate and
# tokenizer, so run.json shows which one a run took.
MT_LEARNING_RATE, SCAN_LEARNING_RATE = 2e-3, 1e-3
TINY_MODEL = (tiny_transformer_entry("tiny", "mt", steps=4, batch_size=8, learning_rate=MT_LEARNING_RATE,
                                     eval_every=2, bpe_vocab_size=60)
              + f"\n[recipe.scan]\nsteps = 4\nbatch_size = 8\nlearning_rate = {SCAN_LEARNING_RATE}\neval_every = 2\n")


@pytest.fixture(scope="module")
def mt_model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("model") / "tiny.toml"
    path.write_text(TINY_MODEL, encoding="utf-8")
    return path


def _run_json(run: Path) -> dict:
    return json.loads((run / "run.json").read_text(encoding="utf-8"))


def _trained(model: Path, data: Path, run: Path, *options: str) -> Path:
    """`run`, the run folder `benchbuild train` wrote on the CPU with `options`."""
    done = benchbuild("train", "--model", model, "--data", data, "--out", run, "--device", "cpu", *options)
    assert done.returncode == 0, done.stderr
    return run


def _files(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file())


# --- import --format jsonl, and train --recipe / --validation-split on it -----------------------------------------

DEV_ROWS = 7


@pytest.fixture(scope="module")
def jsonl_benchmark(tmp_path_factory) -> Path:
    """An imported benchmark (train 40, dev 7, test 5 rows) written as JSON Lines."""
    folder = tmp_path_factory.mktemp("imported")
    lines = word_lines()
    files = {}
    for split, rows in (("train", lines), ("dev", lines[:DEV_ROWS]), ("test", lines[:5])):
        files[split] = (write_lines(folder / f"{split}.src", rows),
                        write_lines(folder / f"{split}.tgt", [row.upper() for row in rows]))
    done = benchbuild("import", *[f"--split={split}={src},{tgt}" for split, (src, tgt) in files.items()],
                      "--metric", "exact_match", "--format", "jsonl", "--out", folder / "bench")
    assert done.returncode == 0, done.stderr
    return folder / "bench"


@pytest.fixture(scope="module")
def scan_recipe_run(jsonl_benchmark, mt_model, tmp_path_factory) -> Path:
    """The tiny model trained on the JSON Lines benchmark with `--recipe scan --validation-split dev`."""
    return _trained(mt_model, jsonl_benchmark, tmp_path_factory.mktemp("runs") / "scan-on-dev",
                    "--recipe", "scan", "--validation-split", "dev")


def test_format_jsonl_writes_one_json_lines_file_per_split_that_train_reads(jsonl_benchmark, scan_recipe_run):
    assert _files(jsonl_benchmark) == ["README.md", "build.json", "data/dev.jsonl", "data/test.jsonl",
                                       "data/train.jsonl"]
    first = json.loads((jsonl_benchmark / "data" / "train.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert (first["source"], first["target"]) == (word_lines()[0], word_lines()[0].upper())
    assert read_build_info(jsonl_benchmark).format == "jsonl"
    record = _run_json(scan_recipe_run)
    assert record["status"] == "complete" and record["steps_done"] == 4
    assert {name: split["rows"] for name, split in record["benchmark"]["splits"].items()} == {
        "train": 40, "dev": DEV_ROWS, "test": 5}


def test_train_recipe_trains_with_the_named_recipe_not_the_default(scan_recipe_run):
    record = _run_json(scan_recipe_run)
    assert record["recipe_family"] == "scan"  # the benchmark's default would be `mt`
    assert record["recipe"]["learning_rate"] == SCAN_LEARNING_RATE and record["recipe"]["bpe_vocab_size"] is None


def test_train_validation_split_selects_on_that_split(scan_recipe_run):
    record = _run_json(scan_recipe_run)
    assert (record["validation"], record["validation_rows"]) == ("dev", DEV_ROWS)  # not a share of train held out


def test_train_validation_split_refuses_a_test_split(jsonl_benchmark, mt_model, tmp_path):
    refused(benchbuild("train", "--model", mt_model, "--data", jsonl_benchmark, "--out", tmp_path / "run",
                       "--device", "cpu", "--validation-split", "test"), "is a test split")
    assert not (tmp_path / "run").exists()


# --- build-react --train-hf / --pool-hf / --test-src --test-tgt / --format parquet, train --max-minutes on it --------

HF_POOL = ["a b c d e f", "j i h g", "c a e", "b d f h"]
TEST_SOURCES, TEST_TARGETS = ["b d f h", "g e c a"], ["B D F H", "G E C A"]  # the pool's last line is a test source


def _hf_dataset(folder: Path, sources: list[str], targets: list[str]) -> Path:
    """A local Hugging Face dataset (save_to_disk) whose train split has a `translation` column {de, en}."""
    rows = [{"translation": {"de": source, "en": target}} for source, target in zip(sources, targets)]
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(str(folder))
    return folder


@pytest.fixture(scope="module")
def hf_react(tmp_path_factory) -> Path:
    """ReaCT built from a training corpus and a pool given as local HF datasets, with an in-domain test corpus, as
    parquet."""
    folder = tmp_path_factory.mktemp("react-hf")
    train = _hf_dataset(folder / "hf-train", word_lines(), [line.upper() for line in word_lines()])
    pool = _hf_dataset(folder / "hf-pool", HF_POOL, [line.upper() for line in HF_POOL])
    test_src, test_tgt = write_lines(folder / "test.de", TEST_SOURCES), write_lines(folder / "test.en", TEST_TARGETS)
    done = benchbuild("build-react", "--out", folder / "out", "--train-hf", train, "--pool-hf", pool,
                      "--test-src", test_src, "--test-tgt", test_tgt, "--cache-dir", folder / "cache", *TINY_REACT,
                      "--allow-small", "--pool-size", "10", "--drop-top", "0", "--band", "5", "--sample", "3",
                      "--format", "parquet")
    assert done.returncode == 0, done.stderr
    return folder / "out"


def test_build_react_train_hf_is_the_training_corpus(hf_react):
    train = load_splits(hf_react)["train"]
    assert train["source"] == word_lines() and train["target"] == [line.upper() for line in word_lines()]
    assert "train:hf-train" in read_build_info(hf_react).inputs


def test_build_react_pool_hf_gives_the_candidates(hf_react):
    cg_test = load_splits(hf_react)["cg_test"]
    assert sorted(cg_test["source"]) == sorted(HF_POOL[:3])
    assert all(row_id.startswith("pool0-") for row_id in cg_test["id"])
    assert "pool0:hf-pool" in read_build_info(hf_react).inputs


def test_build_react_test_src_tgt_is_the_test_split_and_leaves_the_pool(hf_react):
    test = load_splits(hf_react)["test"]
    assert (test["source"], test["target"]) == (TEST_SOURCES, TEST_TARGETS)
    assert TEST_SOURCES[0] not in load_splits(hf_react)["cg_test"]["source"]  # a pool line, but a test source
    card = (hf_react / "README.md").read_text(encoding="utf-8")
    assert "dropped: source in the training/validation/test corpora | 1 |" in card
    assert {"test:test.de", "test:test.en"} <= set(read_build_info(hf_react).inputs)


def test_format_parquet_writes_one_parquet_file_per_split(hf_react):
    assert _files(hf_react) == ["README.md", "build.json", "data/cg_test-00000-of-00001.parquet",
                                "data/test-00000-of-00001.parquet", "data/train-00000-of-00001.parquet"]
    table = pq.read_table(hf_react / "data" / "test-00000-of-00001.parquet")
    assert table.column("source").to_pylist() == TEST_SOURCES
    assert read_build_info(hf_react).format == "parquet"


@pytest.fixture(scope="module")
def time_budget_run(hf_react, mt_model, tmp_path_factory) -> Path:
    """The tiny model on the parquet ReaCT build with a budget of 1,000 steps and 0.0001 minutes (6 ms)."""
    return _trained(mt_model, hf_react, tmp_path_factory.mktemp("runs") / "out-of-time",
                    "--max-steps", "1000", "--max-minutes", "0.0001")


def test_train_reads_a_parquet_benchmark(hf_react, time_budget_run):
    assert not (hf_react / "dataset_dict.json").exists()  # the rows are in data/*.parquet only
    record = _run_json(time_budget_run)
    assert record["benchmark"]["family"] == "react"
    assert {name: split["rows"] for name, split in record["benchmark"]["splits"].items()} == {
        "train": 40, "test": 2, "cg_test": 3}
    assert record["validation_rows"] == 4  # 10% of the 40 train rows held out: the rows were read


def test_train_max_minutes_stops_early_and_says_so(time_budget_run):
    record = _run_json(time_budget_run)
    assert (record["time_budget_minutes"], record["stopped_by"], record["status"]) == (0.0001, "time budget",
                                                                                       "complete")
    assert 1 <= record["steps_done"] < record["step_budget"] == 1000
    log = [json.loads(line) for line in (time_budget_run / "train_log.jsonl").read_text().splitlines()]
    validations = [line["step"] for line in log if "validation_loss" in line]
    assert validations[-1] == record["steps_done"]  # it validated once more at the step it stopped
    assert (time_budget_run / "model.safetensors").is_file()


# --- stats --against / --lang ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def stats_benchmark(tmp_path_factory) -> Path:
    """A benchmark without a card (so no language): train 'the dog runs', 'a cat sleeps'; test 'the cat runs
    fast', 'a dog sleeps' (5 word 2-grams and 3 word 3-grams, none in train)."""
    def rows(prefix: str, sources: list[str]) -> list[dict]:
        return [{"id": f"{prefix}-{i}", "source": source, "target": source} for i, source in enumerate(sources)]

    return write_benchmark(tmp_path_factory.mktemp("stats") / "bench",
                           {"train": rows("train", ["the dog runs", "a cat sleeps"]),
                            "test": rows("test", ["the cat runs fast", "a dog sleeps"])}, "react", "toy")


def _table(done) -> dict[str, str]:
    assert done.returncode == 0, done.stderr
    return dict(line.split("\t") for line in done.stdout.splitlines() if "\t" in line)


def test_stats_against_a_text_file_compares_with_its_lines_instead_of_train(stats_benchmark, tmp_path):
    own = _table(benchbuild("stats", stats_benchmark, "--split", "test", "--lang", "de"))
    assert (own["unique novel word 2-grams"], own["unique novel word 3-grams"]) == ("5", "3")
    against = write_lines(tmp_path / "train.txt", ["the cat runs fast today", "a dog sleeps"])
    other = _table(benchbuild("stats", stats_benchmark, "--split", "test", "--lang", "de", "--against", against))
    assert (other["unique novel word 2-grams"], other["unique novel word 3-grams"]) == ("0", "0")


def test_stats_lang_picks_the_pos_tagger(stats_benchmark):
    refused(benchbuild("stats", stats_benchmark, "--split", "test"), "cannot tell the source language", "--lang")
    english = _table(benchbuild("stats", stats_benchmark, "--split", "test", "--lang", "en"))
    # English tags: only 'runs fast' (VBZ RB) and 'cat runs fast' (NN VBZ RB) are not in train's tag sequences.
    assert (english["unique novel POS 2-grams"], english["unique novel POS 3-grams"]) == ("1", "1")
    german = benchbuild("stats", stats_benchmark, "--split", "test", "--lang", "de")
    assert _table(german)["unique novel POS 2-grams"] == "skipped"
    assert "no spaCy model for language 'de'" in " ".join((german.stdout + german.stderr).split())
