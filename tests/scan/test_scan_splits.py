"""Split rules: the deterministic ones equal the canonical files as multisets; the sampled ones obey their rule."""

from collections import Counter

import numpy as np
import pytest
from scan_counts import (
    ADDPRIM_JUMP_BARE_REPEATS,
    ADDPRIM_JUMP_TEST,
    CANONICAL_FILES,
    COMMANDS,
    LENGTH_CUTOFF_26,
    SIMPLE,
    TEMPLATE_JUMP_AROUND_RIGHT_TEST,
)

from benchbuild.scan.grammar import generate
from benchbuild.scan.splits import SPLITTINGS, contains, rng_for, simple


@pytest.fixture(scope="module")
def examples():
    return generate()


def multiset(examples):
    return Counter((e.command, e.actions) for e in examples)


def canonical(path):
    return Counter(tuple(line[len("IN: "):].split(" OUT: ")) for line in path.read_text().splitlines())


CANONICAL = {
    "length": "length_split/tasks_{}_length.txt",
    "addprim_jump": "add_prim_split/tasks_{}_addprim_jump.txt",
    "addprim_turn_left": "add_prim_split/tasks_{}_addprim_turn_left.txt",
    "template_jump_around_right": "template_split/tasks_{}_template_jump_around_right.txt",
    "template_right": "template_split/tasks_{}_template_right.txt",
    "template_opposite_right": "template_split/tasks_{}_template_opposite_right.txt",
    "template_around_right": "template_split/tasks_{}_template_around_right.txt",
}


@pytest.mark.shared
@pytest.mark.parametrize("name", sorted(CANONICAL))
def test_deterministic_split_equals_canonical_files_as_multisets(name, examples, shared_data):
    splitting = SPLITTINGS[name](examples, 0)
    for split in ("train", "test"):
        expected = canonical(shared_data / "scan" / CANONICAL[name].format(split))
        assert multiset(splitting.splits[split]) == expected, f"{name}/{split}"


@pytest.mark.shared
def test_simple_train_and_test_together_are_tasks_txt(examples, shared_data):
    splitting = SPLITTINGS["simple"](examples, 0)
    together = multiset(splitting.splits["train"]) + multiset(splitting.splits["test"])
    assert together == canonical(shared_data / "scan" / "tasks.txt")
    assert {name: len(rows) for name, rows in splitting.splits.items()} == SIMPLE


def test_simple_depends_on_the_seed_and_only_on_it(examples):
    first = simple(examples, rng_for(0, "simple"))
    again = simple(examples, rng_for(0, "simple"))
    other = simple(examples, rng_for(1, "simple"))
    assert first.splits == again.splits
    assert first.splits["train"] != other.splits["train"]


@pytest.mark.parametrize("percent", [1, 8, 64])
def test_simple_percent_variations(percent, examples):
    splitting = SPLITTINGS[f"simple_p{percent}"](examples, 0)
    assert len(splitting.splits["train"]) == round(COMMANDS * percent / 100)  # 209, 1,673 and 13,382 commands
    assert len(splitting.splits["train"]) + len(splitting.splits["test"]) == COMMANDS


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 32])
@pytest.mark.parametrize("rep", [1, 5])
def test_addprim_jump_with_examples_holds_n_plus_one_jump_commands(n, rep, examples):
    splitting = SPLITTINGS[f"addprim_jump_num{n}_rep{rep}"](examples, 0)
    train, test = splitting.splits["train"], splitting.splits["test"]
    jump_in_train = [e for e in train if contains(e.command, "jump")]
    assert len({e.command for e in jump_in_train}) == n + 1
    assert len(test) == ADDPRIM_JUMP_TEST - n
    assert not {e.command for e in jump_in_train} & {e.command for e in test}
    copies = Counter(e.command for e in jump_in_train)
    assert len(set(copies.values())) == 1, "every jump command in train is repeated the same number of times"
    assert 0.09 < len(jump_in_train) / len(train) < 0.11


def test_addprim_jump_reps_draw_different_commands(examples):
    picked = [{e.command for e in SPLITTINGS[f"addprim_jump_num4_rep{r}"](examples, 0).splits["train"]
               if contains(e.command, "jump") and e.command != "jump"} for r in (1, 2)]
    assert picked[0] != picked[1]


def test_length_cutoff_26_matches_the_counts_of_003_table_10(examples):
    splitting = SPLITTINGS["length_cutoff_26"](examples, 0)
    sizes = {name: len(rows) for name, rows in splitting.splits.items()}
    assert sizes == LENGTH_CUTOFF_26
    assert max(e.length for e in splitting.splits["train"] + splitting.splits["validation"]) == 26
    assert min(e.length for e in splitting.splits["test"]) == 27


def test_filler_levels_nest_and_never_see_jump_around_right(examples):
    trains = [{e.command for e in SPLITTINGS[f"filler_num{k}"](examples, 0).splits["train"]} for k in range(4)]
    assert trains[0] < trains[1] < trains[2] < trains[3]
    assert not any(contains(c, "jump around right") or contains(c, "turn around right") for c in trains[3])
    assert not any(contains(c, "(?:look|walk|run) around right") for c in trains[0])
    assert all(contains(c, "look around right") for c in trains[1] - trains[0])
    test = SPLITTINGS["filler_num0"](examples, 0).splits["test"]
    assert len(test) == TEMPLATE_JUMP_AROUND_RIGHT_TEST and all(contains(e.command, "jump around right") for e in test)


@pytest.mark.shared
def test_filler_num3_train_is_the_canonical_jump_around_right_train(examples, shared_data):
    splitting = SPLITTINGS["filler_num3"](examples, 0)
    path = shared_data / "scan" / "template_split" / "tasks_train_template_jump_around_right.txt"
    assert multiset(splitting.splits["train"]) == canonical(path)


@pytest.mark.parametrize("n", [1, 64, 1024])
def test_fewshot_adds_n_look_around_right_commands_to_num0(n, examples):
    num0 = {e.command for e in SPLITTINGS["filler_num0"](examples, 0).splits["train"]}
    num1 = {e.command for e in SPLITTINGS["filler_num1"](examples, 0).splits["train"]}
    train = [e.command for e in SPLITTINGS[f"fewshot_num{n}_rep1"](examples, 0).splits["train"]]
    added = set(train) - num0
    assert len(train) == len(set(train)) == len(num0) + n
    assert added <= num1 - num0


def test_rng_streams_are_independent_of_which_splits_are_built():
    assert np.array_equal(rng_for(3, "simple").permutation(10), rng_for(3, "simple").permutation(10))
    assert not np.array_equal(rng_for(3, "simple").permutation(50), rng_for(3, "simple_p1").permutation(50))


@pytest.mark.shared
def test_the_counts_the_tests_use_are_those_of_the_canonical_files(shared_data):
    scan = shared_data / "scan"
    assert {name: len((scan / name).read_text().splitlines()) for name in CANONICAL_FILES} == CANONICAL_FILES
    addprim_train = (scan / "add_prim_split" / "tasks_train_addprim_jump.txt").read_text().splitlines()
    assert addprim_train.count("IN: jump OUT: I_JUMP") == ADDPRIM_JUMP_BARE_REPEATS
