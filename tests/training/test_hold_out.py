"""002's hold-out as its authors' code takes it, and the guard against a hold-out that hides a word from training.

train_test.py (jlrussin/syntactic_attention L92-95) validates on the rows after int(0.8 x len) of the published,
shuffled train file: a random fifth (273 of addprim_jump's 1,467 bare "jump" rows). A grammar-built split stores the
bare-primitive repeats last, so its last fifth would be every "jump" row; `held_out_from = "file_end"` takes the last
fifth only where train keeps a file's order, and `train` refuses any hold-out that hides a word."""

from __future__ import annotations

import json

import pytest
from commands import benchbuild_in_process

from benchbuild.benchmark import load_splits, read_build_info
from benchbuild.training.validation import keeps_file_order, split_validation, word_coverage

pytestmark = pytest.mark.shared

JUMP_ROWS, HELD = 1_467, 2_934  # addprim_jump's train rows with "jump"; round(0.2 x 14,670) held out


@pytest.fixture(scope="module")
def builds(shared_data, tmp_path_factory):
    """addprim_jump built from the grammar, and from the published files (`--official`), as benchmark folders."""
    out = tmp_path_factory.mktemp("holdout")
    for folder, extra in (("grammar", []), ("official", ["--official", shared_data / "scan"])):
        result = benchbuild_in_process("build-scan", "--out", out / folder, "--split", "addprim_jump", *extra)
        assert result.returncode == 0, result.stderr
    return {name: out / name / "addprim_jump" for name in ("grammar", "official")}


def jump_rows(rows) -> int:
    return sum("jump" in row["source"].split() for row in rows)


def test_the_official_build_keeps_the_file_order_and_file_end_takes_its_last_fifth(builds, shared_data):
    assert keeps_file_order(read_build_info(builds["official"]))
    assert not keeps_file_order(read_build_info(builds["grammar"]))
    splits = load_splits(builds["official"])
    kept, held, name = split_validation(splits, None, seed=3, held_out=0.2, held_out_from="file_end", file_order=True)
    published = (shared_data / "scan" / "add_prim_split" / "tasks_train_addprim_jump.txt").read_text().splitlines()
    split_id = int(0.8 * len(published))  # train_test.py L93
    assert [f"IN: {row['source']} OUT: {row['target']}" for row in held] == published[split_id:]
    assert name == "train-last-20%" and len(held) == HELD
    assert (jump_rows(kept), jump_rows(held)) == (JUMP_ROWS - 273, 273)  # the authors' random fifth


def test_on_a_grammar_built_split_file_end_draws_a_seeded_random_fifth_where_the_last_fifth_hides_jump(builds):
    splits = load_splits(builds["grammar"])
    train = list(splits["train"])
    last = train[-HELD:]
    assert jump_rows(last) == jump_rows(train) == JUMP_ROWS  # the bare repeats close the grammar-ordered split
    kept, held, name = split_validation(splits, None, seed=0, held_out=0.2, held_out_from="file_end",
                                        file_order=False)
    assert name == "train-heldout-20%-seed-0" and len(held) == HELD and held != last
    assert 1_050 < jump_rows(kept) < 1_300  # binomial(1,467, 0.8): 1,174 +- 3 sd
    assert split_validation(splits, None, seed=1, held_out=0.2, held_out_from="file_end")[1] != held

    least, hidden = word_coverage(kept, held)
    assert hidden == [] and least[0].word == "jump"
    assert (least[0].train_rows, least[0].kept) == (JUMP_ROWS, jump_rows(kept))
    _, hidden = word_coverage(*split_validation(splits, None, seed=0, held_out=0.2, held_out_from="end")[:2])
    assert [(c.word, c.train_rows, c.kept) for c in hidden] == [("jump", JUMP_ROWS, 0)]


# One update, no train scoring, and validation by loss (a greedy decoding of the 2,934 held-out rows by the full-size
# model costs seconds and is not what these checks read).
ONE_STEP = ("--max-steps", "1", "--device", "cpu", "--set", "score_train=false", "--set", "validate_by=loss")


def test_train_records_the_jump_rows_it_keeps_and_refuses_a_hold_out_that_hides_jump(builds, tmp_path):
    data = builds["grammar"]
    run = tmp_path / "run"
    result = benchbuild_in_process("train", "--model", "syntactic_attention", "--data", data, "--out", run, *ONE_STEP)
    assert result.returncode == 0, result.stderr
    record = json.loads((run / "run.json").read_text(encoding="utf-8"))
    kept, _, _ = split_validation(load_splits(data), None, seed=0, held_out=0.2, held_out_from="random")
    assert record["validation"] == "train-heldout-20%-seed-0" and record["train_rows"] == 14_670 - HELD
    assert record["held_out_words"][0] == {"word": "jump", "train_rows": JUMP_ROWS, "kept": jump_rows(kept)}

    refused = tmp_path / "refused"
    result = benchbuild_in_process("train", "--model", "syntactic_attention", "--data", data, "--out", refused,
                                   *ONE_STEP, "--set", "held_out_from=end")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "take all 1,467 training rows with 'jump'" in lines[0], result.stderr
    assert "allow_hidden_words=true" in lines[0] and not refused.exists()

    allowed = benchbuild_in_process("train", "--model", "syntactic_attention", "--data", data, "--out", refused,
                                    *ONE_STEP, "--set", "held_out_from=end", "--set", "allow_hidden_words=true")
    assert allowed.returncode == 0, allowed.stderr
    record = json.loads((refused / "run.json").read_text(encoding="utf-8"))
    assert record["held_out_words"][0] == {"word": "jump", "train_rows": JUMP_ROWS, "kept": 0}


def test_a_split_drawn_with_a_canonical_index_is_in_grammar_order_so_file_end_draws_a_random_fifth(tmp_path):
    """`build-scan --split simple` reads the canonical index but writes its rows in the grammar's order: its last fifth
    was a block of the grammar ("turn opposite left after ...", "jump opposite left twice after ..."), which 002's
    Syntactic Attention never saw and failed on (validation 33% where the test gave 86%), so no run settled. It now
    holds out a seeded random fifth, as on the other grammar-built splits."""
    result = benchbuild_in_process("build-scan", "--out", tmp_path, "--split", "simple")
    assert result.returncode == 0, result.stderr
    info = read_build_info(tmp_path / "simple")
    assert info.inputs and info.seed is None and not keeps_file_order(info)
    splits = load_splits(tmp_path / "simple")
    _, held, name = split_validation(splits, None, seed=3, held_out=0.2, held_out_from="file_end",
                                     file_order=keeps_file_order(info))
    assert name == "train-heldout-20%-seed-3"
    # A random fifth spreads over the grammar: its rows start with each of the source words that begin commands.
    assert {row["source"].split()[0] for row in held} >= {"walk", "look", "run", "jump", "turn"}
