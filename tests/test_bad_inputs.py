"""Bad input is refused in one line naming what to fix, before any expensive stage; a damaged benchmark folder is
named with how to rebuild it; nothing reaches the user as a library's class name or message alone (real commands
on tiny inputs)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import datasets
import pytest
from commands import benchbuild_in_process as benchbuild
from commands import refused
from small_inputs import WORDS, build_react, write_lines

from benchbuild.benchmark import Benchmark, BuildInfo, CardFacts, load_splits
from benchbuild.errors import BenchbuildError
from benchbuild.zoo import load_entry

SMALL_BUILD = ["--allow-small", "--pool-size", "10", "--drop-top", "0", "--band", "5", "--sample", "2"]
TEXT = datasets.Features({"id": datasets.Value("string"), "source": datasets.Value("string"),
                          "target": datasets.Value("string")})


def _benchmark(out: Path, rows: int = 40, format: str = "arrow", columns: tuple[str, ...] = ("source", "target"),
               train: list[dict] | None = None) -> Path:
    """A small generic benchmark folder written by `Benchmark.save` (train and test splits)."""
    made = [{"id": str(row), **{column: " ".join(WORDS[(row * 7 + k * 3) % len(WORDS)] for k in range(6))
                                for column in columns}} for row in range(rows)]
    info = BuildInfo(family="generic", name="toy", parameters={"source_lang": "de"}, command_line="benchbuild build-x")
    card = CardFacts(pretty_name="toy", languages=["de", "en"], license="other", summary="toy")
    splits = {"train": made if train is None else train, "test": made[:5]}
    features = TEXT if columns == ("source", "target") else None
    return Benchmark.from_splits(splits, info, card, features).save(out, format=format)


# --- build-react: every option checked before the first stage ---------------------------------------------------

def _react_with(tmp_path: Path, *extra: str | Path) -> subprocess.CompletedProcess:
    return build_react(tmp_path, ["a b c d e f", "j i h g", "c a e"], *SMALL_BUILD, *map(str, extra))


@pytest.mark.parametrize("option, value, phrase", [
    ("--ensemble-architecture", "d_model=abc", "--ensemble-architecture d_model must be an integer, not 'abc'"),
    ("--ensemble-architecture", "dropout=1.5", "--ensemble-architecture dropout must be in [0, 1)"),
    ("--ensemble-architecture", "position=sideways", "position = 'sideways' is not one of"),
    ("--ensemble-set", "adam_beta1=1.5", "--ensemble-set adam_beta1 must be in [0, 1)"),
    ("--ensemble-set", "learning_rate=inf", "--ensemble-set learning_rate must be a finite number"),
])
def test_build_react_refuses_a_member_option_the_model_or_recipe_cannot_take_before_the_first_stage(
        tmp_path, option, value, phrase):
    done = _react_with(tmp_path, option, value)
    refused(done, phrase)
    assert "normalizing" not in done.stderr and "compositional degree" not in done.stderr  # no stage started
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()


def test_build_react_refuses_a_cache_dir_that_is_a_file_before_the_first_stage(tmp_path):
    cache = write_lines(tmp_path / "notes.txt", ["keep me"])
    done = _react_with(tmp_path, "--cache-dir", cache)
    refused(done, f"--cache-dir {cache} is a file, not a folder")
    assert "normalizing" not in done.stderr
    assert cache.read_text(encoding="utf-8") == "keep me\n" and not (tmp_path / "out").exists()


@pytest.mark.parametrize("cache", ["out", "out/cache", "."])
def test_build_react_refuses_a_cache_dir_in_or_around_the_output_before_the_first_stage(tmp_path, cache):
    done = _react_with(tmp_path, "--cache-dir", tmp_path / cache)
    refused(done, f"--cache-dir {tmp_path / cache}")
    assert "normalizing" not in done.stderr and not (tmp_path / "out").exists()


def test_architecture_overrides_are_checked_against_the_models_types_and_ranges():
    from benchbuild.zoo.catalogue import checked_architecture_overrides

    transformer = load_entry("transformer")
    assert checked_architecture_overrides(transformer, "mt", {"d_model": 64, "dropout": 0}, "--x") == {
        "d_model": 64, "dropout": 0.0}
    assert checked_architecture_overrides(transformer, "mt", {"encoder_layers": 0}, "--x") == {"encoder_layers": 0}
    for overrides, message in [({"d_model": 0}, "--x d_model must be positive"),
                               ({"attention_dropout": -0.1}, "--x attention_dropout must be in [0, 1)"),
                               ({"encoder_self_attention_gate": float("nan")}, "must be a finite number"),
                               ({"d_model": 30}, "d_model = 30 is not divisible by num_heads"),
                               ({"heads": 4}, "--x: unknown architecture key 'heads'")]:
        with pytest.raises(BenchbuildError, match=re.escape(message)):
            checked_architecture_overrides(transformer, "mt", overrides, "--x")


# --- train: a recipe or architecture value that cannot train is refused before the run folder is made ------------

@pytest.mark.parametrize("setting, phrase", [
    ("learning_rate=inf", "--set learning_rate must be a finite number; got inf"),
    ("weight_decay=inf", "--set weight_decay must be a finite number"),
    ("adam_beta2=1.0", "--set adam_beta2 must be in [0, 1)"),
])
def test_train_refuses_a_recipe_value_that_cannot_train_before_the_run_folder_exists(tmp_path, setting, phrase):
    done = benchbuild("train", "--model", "transformer", "--data", _benchmark(tmp_path / "data"), "--out",
                      tmp_path / "run", "--device", "cpu", "--max-steps", "1", "--set", setting)
    refused(done, phrase)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("line, phrase", [
    ("dropout = 1.5", "[architecture] dropout must be in [0, 1)"),
    ('d_model = "abc"', "[architecture] d_model must be an integer, not 'abc'"),
])
def test_train_refuses_a_model_file_whose_architecture_cannot_build_naming_the_file(tmp_path, line, phrase):
    model = tmp_path / "mine.toml"
    model.write_text(f'name = "mine"\npaper = "-"\nsummary = "x"\nextends = "transformer"\n[architecture]\n{line}\n',
                     encoding="utf-8")
    done = benchbuild("train", "--model", model, "--data", _benchmark(tmp_path / "data"), "--out", tmp_path / "run",
                      "--device", "cpu", "--max-steps", "1")
    refused(done, f"{model}: ", phrase)
    assert not (tmp_path / "run").exists()


# --- stats: compared with an empty training corpus, the numbers would mean nothing -------------------------------

def test_stats_refuses_an_empty_against_file(tmp_path):
    empty = tmp_path / "empty.de"
    empty.write_bytes(b"")
    refused(benchbuild("stats", _benchmark(tmp_path / "data"), "--split", "test", "--against", empty),
            f"--against `{empty}` holds no sentence")


def test_stats_refuses_a_benchmark_whose_train_split_is_empty(tmp_path):
    folder = _benchmark(tmp_path / "data", train=[])
    refused(benchbuild("stats", folder, "--split", "test"), f"the train split of {folder} holds no sentence")
    refused(benchbuild("stats", _benchmark(tmp_path / "other"), "--split", "test", "--against", folder),
            f"the train split of --against {folder} holds no sentence")


def test_stats_refuses_an_against_folder_without_a_train_split(tmp_path):
    folder = tmp_path / "test_only"
    datasets.DatasetDict({"test": datasets.Dataset.from_list([{"source": "a b", "target": "a b"}])}).save_to_disk(
        str(folder))
    refused(benchbuild("stats", _benchmark(tmp_path / "data"), "--split", "test", "--against", folder),
            f"--against {folder} has no train split (splits: test)")


# --- a 0-byte training corpus --------------------------------------------------------------------------------------

def test_degree_refuses_a_zero_byte_training_corpus_naming_it(tmp_path):
    """Needs `degree` to read its training corpus with `corpus.read_sentences(train_source, "--train-src", ...)`."""
    train = tmp_path / "train.de"
    train.write_bytes(b"")
    done = benchbuild("degree", "--train-src", train, "--pool", write_lines(tmp_path / "pool.de", ["a b"]), "--out",
                      tmp_path / "degree.tsv")
    refused(done, f"--train-src `{train}` holds no sentence")
    assert not (tmp_path / "degree.tsv").exists()


# --- a damaged benchmark folder: named, with how to rebuild it ---------------------------------------------------

def _truncate(path: Path, keep: float) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * keep)])


def _cut_last_line(path: Path) -> None:
    """As a copy or a write killed 10 bytes before the end leaves it."""
    path.write_bytes(path.read_bytes()[:-10])


def _drop_lines(path: Path, count: int) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:-count]), encoding="utf-8")


def _edit_build_json(folder: Path, edit) -> None:
    info = json.loads((folder / "build.json").read_text(encoding="utf-8"))
    edit(info)
    (folder / "build.json").write_text(json.dumps(info), encoding="utf-8")


DAMAGES = {
    "arrow file truncated": ("arrow", lambda f: _truncate(next((f / "train").glob("*.arrow")), 0.5),
                             ["/train cannot be read", "the file is truncated or corrupt"]),
    "jsonl line cut": ("jsonl", lambda f: _cut_last_line(f / "data" / "train.jsonl"),
                       ["train.jsonl cannot be read (line 40 is not a complete JSON object)"]),
    "jsonl lines lost": ("jsonl", lambda f: _drop_lines(f / "data" / "train.jsonl", 3),
                         ["train.jsonl holds 37 rows but", "build.json records 40"]),
    "parquet truncated": ("parquet", lambda f: _truncate(next((f / "data").glob("train-*.parquet")), 0.5),
                          ["train-00000-of-00001.parquet cannot be read"]),
    "build.json missing a key": ("arrow", lambda f: _edit_build_json(f, lambda info: info.pop("family")),
                                 ["build.json: missing key 'family'", "build record is damaged"]),
    "build.json cut": ("arrow", lambda f: _truncate(f / "build.json", 0.5),
                       ["build.json is not valid JSON", "build record is damaged"]),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_benchmark_folder_is_one_line_naming_the_file_and_how_to_rebuild_it(tmp_path, damage):
    format, spoil, phrases = DAMAGES[damage]
    folder = _benchmark(tmp_path / "data", format=format)
    spoil(folder)
    done = benchbuild("stats", folder, "--split", "test")
    refused(done, str(folder), *phrases)
    line = done.stderr.splitlines()[-1]
    assert "rebuild it with --overwrite (build.json records the command that wrote it: benchbuild build-x)" in line \
        or f"delete {folder} (its build.json is unreadable) and rebuild it" in line
    assert "Error:" not in line and "Exception" not in line  # no library class name


def test_train_on_a_damaged_benchmark_is_refused_before_the_run_folder_exists(tmp_path):
    folder = _benchmark(tmp_path / "data", format="jsonl")
    _cut_last_line(folder / "data" / "train.jsonl")
    done = benchbuild("train", "--model", "transformer", "--data", folder, "--out", tmp_path / "run", "--device",
                      "cpu", "--max-steps", "1")
    refused(done, "train.jsonl cannot be read (line 40 is not a complete JSON object)", "rebuild it")
    assert not (tmp_path / "run").exists()


def test_a_split_without_a_source_column_is_named_with_its_columns(tmp_path):
    folder = _benchmark(tmp_path / "data", columns=("input", "target"))
    refused(benchbuild("stats", folder, "--split", "test"),
            f"{folder / 'train'} has no 'source' column (columns: id, input, target)")


@pytest.mark.parametrize("format", ["arrow", "parquet", "jsonl"])
def test_an_empty_split_saves_and_loads_back_empty_in_every_format(tmp_path, format):
    folder = _benchmark(tmp_path / "data", format=format, train=[])
    loaded = load_splits(folder)
    assert len(loaded["train"]) == 0 and {"source", "target"} <= set(loaded["train"].column_names)
    assert len(loaded["test"]) == 5


# --- build-noun-adj: a "sentence" longer than the parser's limit ---------------------------------------------------

def test_noun_adj_sets_aside_a_pair_longer_than_the_parser_takes_and_counts_it_in_the_card(tmp_path):
    corpus = [("We need a permanent solution to this problem.",
               "Nous avons besoin d'une solution permanente à ce problème."),
              ("This is a good decision.", "C'est une bonne décision."),
              ("The solution is good and " + "very " * 240_000 + "clear.", "La solution est bonne."),
              ("Parliament took a specific decision yesterday.", "Le Parlement a pris une décision spécifique hier."),
              ("The report is about energy.", "Le rapport porte sur l'énergie.")]
    english = write_lines(tmp_path / "corpus.en", [english for english, _ in corpus])
    french = write_lines(tmp_path / "corpus.fr", [french for _, french in corpus])
    done = benchbuild("build-noun-adj", "--en", english, "--fr", french, "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert ("| neither split: holds a target-noun form but a side is longer than 1,000,000 characters (not parsed) "
            "| 1 |") in card
    rows = load_splits(tmp_path / "out")
    assert "nounadj-3" not in [*rows["train"]["id"], *rows["validation"]["id"], *rows["test"]["id"]]
    assert "nounadj-4" in rows["test"]["id"]  # the corpus around it is still built


def test_a_folder_of_benchmarks_given_as_one_names_the_benchmarks_inside_it(tmp_path):
    """`--data out/scan` (build-scan's parent folder) instead of `out/scan/simple`: say what the folder is and name the
    benchmarks in it, not only that build.json is missing."""
    parent = tmp_path / "scan"
    for name in ("alpha", "beta", "gamma", "delta"):
        _benchmark(parent / name)
    (parent / "notes").mkdir()  # not a benchmark: not named
    result = benchbuild("train", "--model", "transformer", "--data", parent, "--out", tmp_path / "run")
    refused(result, f"{parent} is a folder of 4 benchmarks, not one benchmark: give one of them, e.g. "
                    f"{parent / 'alpha'}, {parent / 'beta'}, {parent / 'delta'} and 1 more")
    assert not (tmp_path / "run").exists()
