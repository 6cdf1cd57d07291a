"""`benchbuild import --split ...`: split files made elsewhere (a COGS-shaped TSV, JSON Lines, parquet, a local
Hugging Face dataset, aligned text files) become benchmark folders that `train` and `eval` take like built ones, and
every bad input is refused in one line before anything is written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from small_inputs import write_lines

from benchbuild.benchmark import load_splits, read_build_info

NOUNS = ["cat", "dog", "girl", "boy", "cake", "ball", "teacher", "baby"]
VERBS = ["saw", "liked", "helped", "found"]



def cogs_rows(nouns: list[str], kind: str) -> list[str]:
    """COGS-shaped lines: sentence<TAB>logical form<TAB>generalization type."""
    rows = []
    for number, subject in enumerate(nouns):
        verb, obj = VERBS[number % len(VERBS)], nouns[(number + 1) % len(nouns)]
        rows.append(f"The {subject} {verb} a {obj} .\t* {subject} ( x _ 1 ) ; {verb} . agent ( x _ 2 , x _ 1 ) AND "
                    f"{verb} . theme ( x _ 2 , x _ 4 ) AND {obj} ( x _ 4 )\t{kind}")
    return rows


@pytest.fixture
def cogs(tmp_path) -> Path:
    """A COGS-shaped release: train.tsv, dev.tsv and gen.tsv (a noun never seen as subject in train)."""
    folder = tmp_path / "cogs"
    folder.mkdir()
    write_lines(folder / "train.tsv", cogs_rows(NOUNS[:6] * 5, "in_distribution"))
    write_lines(folder / "dev.tsv", cogs_rows(NOUNS[:6], "in_distribution"))
    write_lines(folder / "gen.tsv", cogs_rows(["baby", "teacher"] * 3, "obj_to_subj_common"))
    return folder


def import_cogs(benchbuild, cogs: Path, out: Path, *more: str):
    return benchbuild("import", "--split", f"train={cogs / 'train.tsv'}", "--split", f"validation={cogs / 'dev.tsv'}",
                      "--split", f"gen={cogs / 'gen.tsv'}", "--columns", "source,target,type",
                      "--metric", "exact_match", "--out", out, *more)


def test_a_cogs_tsv_becomes_a_benchmark_with_its_named_columns_card_and_command_line(benchbuild, cogs, tmp_path):
    code, stdout, stderr = import_cogs(benchbuild, cogs, tmp_path / "cogs-bench")
    assert code == 0, stderr
    splits = load_splits(tmp_path / "cogs-bench")
    assert {name: len(split) for name, split in splits.items()} == {"train": 30, "validation": 6, "gen": 6}
    first = splits["gen"][0]
    assert first == {"id": "gen-00000001", "source": "The baby saw a teacher .",
                     "target": "* baby ( x _ 1 ) ; saw . agent ( x _ 2 , x _ 1 ) AND saw . theme ( x _ 2 , x _ 4 ) "
                               "AND teacher ( x _ 4 )", "type": "obj_to_subj_common"}
    info = read_build_info(tmp_path / "cogs-bench")
    assert (info.family, info.name) == ("imported", "cogs-bench")
    assert info.command_line.startswith("benchbuild import --split train=")
    assert info.parameters["metrics"] == ["exact_match"]
    assert info.parameters["tsv_columns"] == ["source", "target", "type"]
    assert set(info.inputs) == {"train:train.tsv", "validation:dev.tsv", "gen:gen.tsv"}
    card = (tmp_path / "cogs-bench" / "README.md").read_text(encoding="utf-8")
    assert card.startswith("---\npretty_name: cogs-bench (imported)\n")
    assert "**exact match**" in card and "- **gen**: `gen.tsv`, given with --split" in card
    assert "wrote" in stdout and "imported/cogs-bench" in stdout


def test_the_same_files_import_to_the_same_fingerprints(benchbuild, cogs, tmp_path):
    for out in ("first", "second"):
        assert import_cogs(benchbuild, cogs, tmp_path / out)[0] == 0
    first, second = read_build_info(tmp_path / "first"), read_build_info(tmp_path / "second")
    assert first.splits == second.splits and first.inputs == second.inputs


def test_an_imported_cogs_benchmark_trains_and_evaluates_end_to_end(benchbuild, cogs, reporting_model, tmp_path):
    bench, run = tmp_path / "cogs-bench", tmp_path / "run"
    assert import_cogs(benchbuild, cogs, bench)[0] == 0
    code, stdout, stderr = benchbuild("train", "--model", reporting_model, "--data", bench, "--out", run,
                                      "--max-steps", "5", "--device", "cpu")
    assert code == 0, stderr
    assert "trained 5 steps" in stdout
    code, stdout, stderr = benchbuild("eval", "--run", run, "--data", bench, "--split", "gen", "--device", "cpu")
    assert code == 0, stderr
    metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
    assert (metrics["benchmark"], metrics["split"], metrics["rows"]) == ("imported/cogs-bench", "gen", 6)
    assert 0.0 <= metrics["exact_match"] <= 100.0
    predictions = [json.loads(line) for line in (run / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [row["id"] for row in predictions] == [f"gen-{number:08d}" for number in range(1, 7)]


ROWS = [{"question": "what is two plus two", "answer": "4", "level": 1},
        {"question": "what is one plus one", "answer": "2", "level": 1}]


def write_jsonl(folder: Path) -> Path:
    return write_lines(folder / "test.jsonl", [json.dumps(row) for row in ROWS])


def write_parquet(folder: Path) -> Path:
    pq.write_table(pa.Table.from_pylist(ROWS), folder / "test.parquet")
    return folder / "test.parquet"


def write_dataset_folder(folder: Path) -> Path:
    datasets.DatasetDict({"test": datasets.Dataset.from_list(ROWS)}).save_to_disk(str(folder / "hf"))
    return folder / "hf"


@pytest.mark.parametrize("write", [write_jsonl, write_parquet, write_dataset_folder], ids=["jsonl", "parquet", "hf"])
def test_json_lines_parquet_and_a_dataset_folder_give_the_same_rows(benchbuild, tmp_path, write):
    path = write(tmp_path)
    code, _, stderr = benchbuild("import", "--split", f"test={path}", "--source", "question", "--target", "answer",
                                 "--metric", "exact_match", "--out", tmp_path / "out")
    assert code == 0, stderr
    assert list(load_splits(tmp_path / "out")["test"]) == [
        {"id": "test-00000001", "source": "what is two plus two", "target": "4", "level": 1},
        {"id": "test-00000002", "source": "what is one plus one", "target": "2", "level": 1}]


def test_hf_imports_every_split_of_a_dataset_folder_and_reads_a_translation_column_by_language(benchbuild, tmp_path):
    pairs = {"train": [{"translation": {"de": "guten tag", "en": "good day"}}],
             "test": [{"translation": {"de": "danke", "en": "thanks"}}]}
    datasets.DatasetDict({name: datasets.Dataset.from_list(rows) for name, rows in pairs.items()}).save_to_disk(
        str(tmp_path / "hf"))
    code, _, stderr = benchbuild("import", "--hf", tmp_path / "hf", "--source", "de", "--target", "en",
                                 "--source-lang", "de", "--target-lang", "en", "--metric", "bleu",
                                 "--out", tmp_path / "out", "--format", "parquet")
    assert code == 0, stderr
    splits = load_splits(tmp_path / "out")
    assert {name: list(split) for name, split in splits.items()} == {
        "train": [{"id": "train-00000001", "source": "guten tag", "target": "good day"}],
        "test": [{"id": "test-00000001", "source": "danke", "target": "thanks"}]}
    assert "language:\n- de\n- en\n" in (tmp_path / "out" / "README.md").read_text(encoding="utf-8")


def test_train_drops_pairs_with_an_empty_side_and_evaluation_splits_keep_every_line(benchbuild, tmp_path):
    write_lines(tmp_path / "train.de", ["ein haus", "", "eine katze"])
    write_lines(tmp_path / "train.en", ["a house", "a dog", "a cat"])
    write_lines(tmp_path / "test.de", ["ein hund", "", "ein baum"])
    write_lines(tmp_path / "test.en", ["a dog", "nothing", "a tree"])
    code, _, stderr = benchbuild("import", "--split", f"train={tmp_path / 'train.de'},{tmp_path / 'train.en'}",
                                 "--split", f"test={tmp_path / 'test.de'},{tmp_path / 'test.en'}",
                                 "--metric", "bleu", "--out", tmp_path / "out")
    assert code == 0, stderr
    splits = load_splits(tmp_path / "out")
    assert splits["train"]["id"] == ["train-00000001", "train-00000003"]
    assert splits["test"]["source"] == ["ein hund", "", "ein baum"]
    info = read_build_info(tmp_path / "out")
    assert info.splits["test"].rows == 3
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert "pairs with an empty side dropped: 1" in card
    assert "every row kept, in file order (1 with an empty side)" in card
    assert "language:\n- de\n- en\n" in card


def _refusals(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    """name -> (import arguments after `import`, a phrase the one-line error must hold)."""
    data = tmp_path / "data"
    data.mkdir()
    write_lines(data / "a.de", ["eins", "zwei", "drei"])
    write_lines(data / "a.en", ["one", "two"])
    write_lines(data / "b.de", ["eins", "zwei"])
    write_lines(data / "b.en", ["one", "two"])
    write_lines(data / "cogs.tsv", ["A cat smiled .\t* cat ( x _ 1 )\tin_distribution"])
    write_lines(data / "cut.tsv", ["A cat smiled .\t* cat ( x _ 1 )\tin_distribution", "A dog"])
    write_lines(data / "cut.jsonl", ['{"source": "a", "target": "b"}', '{"source": "c", "tar'])
    write_lines(data / "train.txt", ["A cat smiled ."])
    (data / "lexicon").write_text("cat\t猫\n", encoding="utf-8")
    aligned = f"train={data / 'b.de'},{data / 'b.en'}"
    return {
        "misaligned": ([f"--split=train={data / 'a.de'},{data / 'a.en'}", "--metric", "bleu"], "not aligned"),
        "truncated tsv line": ([f"--split=gen={data / 'cut.tsv'}", "--columns", "source,target,type", "--metric",
                                "exact_match"], "line 2 has 1 tab-separated columns, expected 3"),
        "truncated jsonl line": ([f"--split=test={data / 'cut.jsonl'}", "--metric", "bleu"], "line 2 is not JSON"),
        "unnamed tsv columns": ([f"--split=gen={data / 'cogs.tsv'}", "--metric", "exact_match"], "--columns"),
        "one plain text file": ([f"--split=train={data / 'train.txt'}", "--metric", "bleu"],
                                "not a .tsv, .jsonl or .parquet file"),
        "wrongly named file": ([f"--split=train={data / 'b.de'},{data / 'b.english'}", "--metric", "bleu"],
                               "does not exist"),
        "no split name": ([f"--split={data / 'b.de'},{data / 'b.en'}", "--metric", "bleu"], "expected NAME=FILE"),
        "unknown column": ([f"--split=test={data / 'cogs.tsv'}", "--columns", "sentence,form,type", "--metric",
                            "bleu"], "no column 'source'"),
        "no metric": ([f"--split={aligned}"], "declare the metric"),
        "cter without lexicon": ([f"--split={aligned}", "--metric", "cter"], "needs the lexicon"),
        "cter without compounds": ([f"--split={aligned}", "--metric", "cter", "--lexicon", str(data / "lexicon")],
                                   "no split has a 'compound' column"),
        "nothing to import": (["--metric", "bleu"], "nothing to import"),
    }


@pytest.mark.parametrize("case", ["misaligned", "truncated tsv line", "truncated jsonl line", "unnamed tsv columns",
                                  "one plain text file", "wrongly named file", "no split name", "unknown column",
                                  "no metric", "cter without lexicon", "cter without compounds", "nothing to import"])
def test_a_bad_input_is_refused_in_one_line_before_anything_is_written(refused, tmp_path, case):
    arguments, phrase = _refusals(tmp_path)[case]
    before = sorted(tmp_path.rglob("*"))
    message = refused("import", *arguments, "--out", tmp_path / "out")
    assert phrase in message
    assert sorted(tmp_path.rglob("*")) == before


def test_a_folder_without_a_layout_is_a_usage_error(benchbuild, tmp_path):
    code, _, stderr = benchbuild("import", str(tmp_path), "--metric", "bleu", "--out", tmp_path / "out")
    assert code == 2 and "is not one of" in stderr
    assert not (tmp_path / "out").exists()


def test_the_output_is_never_an_input_nor_an_existing_folder_without_overwrite(refused, benchbuild, cogs, tmp_path):
    before = sorted(cogs.rglob("*"))
    assert "holds the command's input" in refused("import", "--split", f"gen={cogs / 'gen.tsv'}", "--columns",
                                                  "source,target,type", "--metric", "exact_match", "--out", cogs)
    assert "lies inside the command's input" in refused("import", "--hf", cogs, "--metric", "bleu", "--out",
                                                        cogs / "bench")
    assert sorted(cogs.rglob("*")) == before
    assert import_cogs(benchbuild, cogs, tmp_path / "bench")[0] == 0
    assert "already exists: pass --overwrite" in refused("import", "--split", f"gen={cogs / 'gen.tsv'}", "--columns",
                                                         "source,target,type", "--metric", "exact_match",
                                                         "--out", tmp_path / "bench")
    assert import_cogs(benchbuild, cogs, tmp_path / "bench", "--overwrite")[0] == 0


def test_importing_loads_no_model_code():
    code = ("import sys, benchbuild.importing.build\n"
            "print(*[name for name in ('torch', 'transformers', 'numba', 'matplotlib') if name in sys.modules])")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split() == []
