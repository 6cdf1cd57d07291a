"""`build-lake-baroni-fr` (Lake & Baroni 2018, §5; 002 Table 3) on a small pairs file in Tatoeba's format: the
tutorial's normalisation and filter, the seeded split, the added "daxy" pairs and the eight daxy test sentences, and a
tiny model trained and evaluated on the result (real commands)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sacrebleu
from commands import benchbuild_in_process as benchbuild
from commands import file_hashes, refused
from small_inputs import tiny_transformer_entry, write_lines

from benchbuild.benchmark import load_splits, read_build_info
from benchbuild.lake_baroni.build import normalise

FRENCH_SUBJECTS = {"I am": "Je suis", "I'm": "Je suis", "You are": "Tu es", "You're": "Vous êtes", "He is": "Il est",
                   "He's": "Il est", "She is": "Elle est", "We are": "Nous sommes", "They're": "Ils sont"}
ADJECTIVES = {"tall": "grand", "sad": "triste", "tired": "fatigué", "ready": "prêt", "late": "en retard"}
# 45 pairs that pass the filter, in this order, then two more that do and three that do not.
PAIRS = [f"{english} {adjective}.\t{french} {french_adjective}." for english, french in FRENCH_SUBJECTS.items()
         for adjective, french_adjective in ADJECTIVES.items()]
PAIRS += ["She smiled.\tElle a souri.\tCC-BY 2.0 (France) Attribution: tatoeba.org #1 (x) & #2 (y)",
          "I'm 17, too.\tJ'ai également 17 ans.",
          "It's raining.\tIl pleut.",  # no listed English prefix
          "I am going to the market to buy bread.\tJe vais au marché acheter du pain.",  # 10 English tokens
          "\t"]  # an empty pair
# The daxy split as 002's authors released it (jlrussin/syntactic_attention, data/MT/test.daxy), line by line.
RELEASED_DAXY = [("you are daxy .", "tu es daxiste ."), ("he is daxy .", "il est daxiste ."),
                 ("i am not daxy .", "je ne suis pas daxiste ."), ("you are not daxy .", "tu n es pas daxiste ."),
                 ("he is not daxy .", "il n est pas daxiste ."), ("i am very daxy .", "je suis tres daxiste ."),
                 ("you are very daxy .", "tu es tres daxiste ."), ("he is very daxy .", "il est tres daxiste .")]


@pytest.fixture
def pairs(tmp_path) -> Path:
    return write_lines(tmp_path / "eng-fra.txt", PAIRS)


def _build(pairs: Path, out: Path, *extra: str):
    return benchbuild("build-lake-baroni-fr", "--pairs", pairs, "--out", out, "--train-size", "30",
                      "--dax-repetitions", "5", *extra)


@pytest.mark.parametrize("text, expected", [
    ("I'm 17, too.", "i m too ."), ("Je suis désolée!", "je suis desolee !"), ("  Vous êtes prêts ? ", "vous etes prets ?"),
    ("He's   \"fine\".", "he s fine ."), ("Ça va...", "ca va . . ."),
])
def test_sentences_are_normalised_as_the_tutorial_does(text, expected):
    assert normalise(text) == expected


def test_the_build_filters_splits_and_adds_the_daxy_pairs_by_the_rules(pairs, tmp_path):
    done = _build(pairs, tmp_path / "lb")
    assert done.returncode == 0, done.stderr
    splits = load_splits(tmp_path / "lb")
    train, test, daxy = (list(splits[name]) for name in ("train", "test", "daxy"))
    # 47 pairs pass: the 45 subject × adjective pairs, "she smiled ." ("she s" has no trailing space in the tutorial's
    # list) and "i m too ."; 30 are drawn into train, 17 left for test, each in the file's order.
    corpus = [row for row in train if row["id"].startswith("line-")]
    assert (len(corpus), len(test)) == (30, 17)
    numbers = [int(row["id"].removeprefix("line-")) for row in corpus + test]
    assert sorted(numbers) == list(range(1, 48))
    assert [int(row["id"][5:]) for row in corpus] == sorted(int(row["id"][5:]) for row in corpus)
    by_line = {int(row["id"][5:]): (row["source"], row["target"]) for row in corpus + test}
    assert by_line[46] == ("she smiled .", "elle a souri .")
    assert by_line[47] == ("i m too .", "j ai egalement ans .")
    assert by_line[24] == ("he is ready .", "il est pret .")
    assert by_line[28] == ("he s tired .", "il est fatigue .")
    assert [(row["source"], row["target"]) for row in train[30:]] == [("i am daxy .", "je suis daxiste .")] * 5
    assert [(row["source"], row["target"]) for row in daxy] == RELEASED_DAXY
    card = (tmp_path / "lb" / "README.md").read_text(encoding="utf-8")
    assert "| pairs dropped: English prefix not in the list | 1 |" in card
    assert "| pairs dropped: a side over 9 tokens | 1 |" in card
    assert "| pairs dropped: an empty side | 1 |" in card
    info = read_build_info(tmp_path / "lb")
    assert (info.family, info.name, info.seed) == ("lake_baroni_en_fr", "lake_baroni_en_fr", 0)


def test_the_same_seed_gives_the_same_benchmark_and_another_seed_another_train(pairs, tmp_path):
    for name, seed in (("a", "0"), ("b", "0"), ("c", "1")):
        assert _build(pairs, tmp_path / name, "--seed", seed).returncode == 0
    fingerprints = {name: read_build_info(tmp_path / name).splits for name in "abc"}
    assert fingerprints["a"] == fingerprints["b"]
    assert fingerprints["a"]["train"] != fingerprints["c"]["train"]
    assert fingerprints["a"]["daxy"] == fingerprints["c"]["daxy"]


def test_a_longer_limit_keeps_the_long_sentence(pairs, tmp_path):
    assert _build(pairs, tmp_path / "lb", "--max-tokens", "10").returncode == 0
    splits = load_splits(tmp_path / "lb")
    assert len(splits["test"]) == 18


@pytest.mark.parametrize("lines, extra, phrase", [
    (["I am tall. Je suis grand."], (), "line 1 has no tab"),
    (PAIRS[:10], (), "only 10 pairs of"),
    (PAIRS, ("--train-size", "47"), "--train-size 47 leaves no test pair"),
])
def test_a_wrong_pairs_file_is_refused_in_one_line_and_nothing_is_written(tmp_path, lines, extra, phrase):
    pairs = write_lines(tmp_path / "eng-fra.txt", lines)
    done = benchbuild("build-lake-baroni-fr", "--pairs", pairs, "--out", tmp_path / "lb", *extra)
    refused(done, phrase)
    assert not (tmp_path / "lb").exists()


def test_the_output_is_never_the_pairs_file_nor_a_folder_of_the_users(pairs, tmp_path):
    before = file_hashes(pairs)
    refused(_build(pairs, pairs, "--overwrite"), "--out")
    mine = write_lines(tmp_path / "mine" / "notes.txt", ["keep"]).parent
    refused(_build(pairs, mine, "--overwrite"), str(mine))
    assert file_hashes(pairs) == before and (mine / "notes.txt").read_text() == "keep\n"


def test_the_benchmark_trains_and_evaluates_bleu_on_test_and_exact_match_on_daxy(pairs, tmp_path):
    model = tmp_path / "tiny.toml"
    model.write_text(tiny_transformer_entry("tiny", "mt", steps=3, batch_size=8, learning_rate=1e-3, eval_every=3,
                                            bpe_vocab_size=200), encoding="utf-8")
    assert _build(pairs, tmp_path / "lb").returncode == 0
    done = benchbuild("train", "--model", model, "--data", tmp_path / "lb", "--out", tmp_path / "run", "--device", "cpu")
    assert done.returncode == 0, done.stderr
    for split, rows in (("daxy", 8), ("test", 17)):
        done = benchbuild("eval", "--run", tmp_path / "run", "--data", tmp_path / "lb", "--split", split,
                          "--device", "cpu", "--out", tmp_path / split)
        assert done.returncode == 0, done.stderr
        metrics = json.loads((tmp_path / split / "metrics.json").read_text(encoding="utf-8"))
        assert (metrics["benchmark"], metrics["split"], metrics["rows"]) == ("lake_baroni_en_fr/lake_baroni_en_fr",
                                                                              split, rows)
        lines = (tmp_path / split / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
        predicted = [json.loads(line) for line in lines]
        assert [row["id"] for row in predicted] == [row["id"] for row in load_splits(tmp_path / "lb")[split]]
        hypotheses, references = [row["prediction"] for row in predicted], [row["target"] for row in predicted]
        assert metrics["bleu"]["score"] == pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references]).score)
        assert metrics["exact_match"] == pytest.approx(
            100.0 * sum(h == r for h, r in zip(hypotheses, references)) / rows)
