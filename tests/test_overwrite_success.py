"""A successful `--overwrite` replaces a folder or table benchbuild wrote with the new build and nothing else: the
second build's rows, parameters and layout, no split, file or work folder of the first left over (build-noun-adj,
build-react and degree run for real on tiny inputs; the refusals are in test_outputs_safety.py)."""

from __future__ import annotations

from pathlib import Path

from commands import benchbuild_in_process as benchbuild
from small_inputs import build_react, word_lines, write_lines

from benchbuild.benchmark import load_splits, read_build_info


def _files(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file())


def _arrow_layout(splits: list[str]) -> list[str]:
    """The files `save_to_disk` and the card write for `splits`, one shard each."""
    per_split = ["data-00000-of-00001.arrow", "dataset_info.json", "state.json"]
    return sorted(["README.md", "build.json", "dataset_dict.json"]
                  + [f"{split}/{name}" for split in splits for name in per_split])


# (English, French): the first build's corpus and the second's; every line's place is known (tests/nounadj/conftest.py
# checks these sentences against en_core_web_sm 3.8.0 parses).
FIRST_CORPUS = [
    ("We need a permanent solution to this problem.", "Nous avons besoin d'une solution permanente à ce problème."),
    ("The Commission found a new solution for the farmers.",
     "La Commission a trouvé une nouvelle solution pour les agriculteurs."),       # test: new solution
    ("This is a good decision.", "C'est une bonne décision."),
    ("The report is about energy.", "Le rapport porte sur l'énergie."),
]
SECOND_CORPUS = [
    ("Parliament took a specific decision yesterday.", "Le Parlement a pris une décision spécifique hier."),  # test
    ("The institutions are open.", "Les institutions sont ouvertes."),
    ("The company sources its energy abroad.", "L'entreprise achète son énergie à l'étranger."),
]


def _noun_adj(folder: Path, name: str, corpus: list[tuple[str, str]], *extra: str):
    english = write_lines(folder / f"{name}.en", [en for en, _ in corpus])
    french = write_lines(folder / f"{name}.fr", [fr for _, fr in corpus])
    return benchbuild("build-noun-adj", "--en", english, "--fr", french, "--out", folder / "out", *extra)


def test_build_noun_adj_overwrite_holds_only_the_second_build(tmp_path):
    first = _noun_adj(tmp_path, "first", FIRST_CORPUS, "--format", "jsonl", "--valid-fraction", "0.5", "--seed", "1")
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "out" / "data" / "train.jsonl").is_file()

    second = _noun_adj(tmp_path, "second", SECOND_CORPUS, "--valid-fraction", "0", "--overwrite")
    assert second.returncode == 0, second.stderr
    out = tmp_path / "out"
    assert _files(out) == _arrow_layout(["train", "validation", "test"])  # no data/*.jsonl of the first build
    splits = load_splits(out)
    assert [(row["source"], row["noun"], row["adjective"]) for row in splits["test"]] == [
        (SECOND_CORPUS[0][0], "decision", "specific")]
    assert splits["train"]["source"] == [SECOND_CORPUS[1][0], SECOND_CORPUS[2][0]] and len(splits["validation"]) == 0
    info = read_build_info(out)
    assert (info.format, info.seed, info.parameters["valid_fraction"]) == ("arrow", 0, 0.0)
    assert sorted(info.inputs) == ["second.en", "second.fr"]
    assert "first.en" not in (out / "README.md").read_text(encoding="utf-8")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["first.en", "first.fr", "out", "second.en",
                                                                "second.fr"]  # no partial or work folder beside it


REACT_POOL = ["a b c d e f", "j i h g", "c a e"]
REACT_SMALL = ["--allow-small", "--pool-size", "10", "--drop-top", "0", "--band", "5"]


def test_build_react_overwrite_holds_only_the_second_build(tmp_path):
    test_side = write_lines(tmp_path / "in-domain.de", ["b d f h", "g e c a"])
    first = build_react(tmp_path, REACT_POOL, *REACT_SMALL, "--sample", "2", "--test-src", test_side, "--test-tgt",
                        test_side, "--format", "parquet")
    assert first.returncode == 0, first.stderr
    assert set(load_splits(tmp_path / "out")) == {"train", "test", "cg_test"}

    second = build_react(tmp_path, REACT_POOL, *REACT_SMALL, "--sample", "3", "--overwrite")
    assert second.returncode == 0, second.stderr
    out = tmp_path / "out"
    assert _files(out) == _arrow_layout(["train", "cg_test"])  # no test split, no data/*.parquet
    splits = load_splits(out)
    assert sorted(splits["cg_test"]["source"]) == sorted(REACT_POOL) and len(splits["train"]) == len(word_lines())
    info = read_build_info(out)
    assert (info.format, info.parameters["sample"]) == ("arrow", 3)
    assert set(info.splits) == {"train", "cg_test"} and not [name for name in info.inputs if name.startswith("test")]
    assert "in-domain.de" not in (out / "README.md").read_text(encoding="utf-8")
    assert not list(tmp_path.glob(".out.*"))  # no partial or work folder beside it


def test_degree_overwrite_replaces_its_table_with_the_second_pools_rows(tmp_path):
    train = write_lines(tmp_path / "train.de", word_lines())
    long_pool = write_lines(tmp_path / "long.de", word_lines(12, 3))
    short_pool = write_lines(tmp_path / "short.de", ["a b c", "j j j", "c a"])
    table = tmp_path / "degree.tsv"
    assert benchbuild("degree", "--train-src", train, "--pool", long_pool, "--out", table).returncode == 0
    assert len(table.read_text().splitlines()) == 13

    done = benchbuild("degree", "--train-src", train, "--pool", short_pool, "--out", table, "--overwrite",
                      "--min-word-count", "1")
    assert done.returncode == 0, done.stderr
    fresh = tmp_path / "fresh.tsv"
    assert benchbuild("degree", "--train-src", train, "--pool", short_pool, "--out", fresh, "--min-word-count",
                      "1").returncode == 0
    assert table.read_bytes() == fresh.read_bytes()
    assert [line.split("\t")[0] for line in table.read_text().splitlines()] == ["line", "1", "2", "3"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["degree.tsv", "fresh.tsv", "long.de", "short.de",
                                                                "train.de"]
