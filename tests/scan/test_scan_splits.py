"""Split rules: the deterministic ones equal the canonical files as multisets, `simple` and the length cutoffs the
published random draws; the sampled ones obey their rule."""

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

from benchbuild.scan import splits as split_rules
from benchbuild.scan.canonical_index import simple_test_mask, tasks_order
from benchbuild.scan.grammar import Example, generate
from benchbuild.scan.splits import (
    _primitive_repeats,
    canonical_simple,
    contains,
    length,
    length_cutoff,
    rng_for,
    simple,
    splittings,
)


@pytest.fixture(scope="module")
def examples():
    return generate()


@pytest.fixture(autouse=True)
def fresh_filler_sets():
    """The filler and few-shot rules share one cached pass over the commands (`_filler_sets_of`); each test starts
    without it, so none passes on a pass another test (or a mutation run's first, unmutated run) made."""
    split_rules._filler_sets_of.cache_clear()
    yield
    split_rules._filler_sets_of.cache_clear()


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
    splitting = splittings()[name](examples, 0)
    for split in ("train", "test"):
        expected = canonical(shared_data / "scan" / CANONICAL[name].format(split))
        assert multiset(splitting.splits[split]) == expected, f"{name}/{split}"


def pairs(path):
    return [tuple(line[len("IN: "):].split(" OUT: ")) for line in path.read_text().splitlines()]


@pytest.mark.shared
def test_simple_equals_the_canonical_files_in_the_grammars_order(examples, shared_data):
    splitting = splittings()["simple"](examples, 0)
    position = {e.command: i for i, e in enumerate(examples)}
    for split in ("train", "test"):
        canonical_rows = pairs(shared_data / "scan" / "simple_split" / f"tasks_{split}_simple.txt")
        expected = sorted(canonical_rows, key=lambda row: position[row[0]])
        assert [(e.command, e.actions) for e in splitting.splits[split]] == expected, split


def test_simple_is_the_shipped_draw_whatever_the_seed(examples):
    first, other = (splittings()["simple"](examples, seed) for seed in (0, 7))
    assert {name: len(rows) for name, rows in first.splits.items()} == SIMPLE
    assert first.splits == other.splits and not first.sampled
    assert [e.command for e in first.splits["test"]] == [e.command for e, flag in zip(examples, simple_test_mask())
                                                         if flag]


def test_canonical_simple_puts_the_flagged_examples_in_test_in_their_order():
    examples = [Example(command, "I_JUMP") for command in "abcdef"]
    splitting = canonical_simple(examples, np.array([0, 1, 0, 0, 1, 1], dtype=bool))
    assert [e.command for e in splitting.splits["train"]] == ["a", "c", "d"]
    assert [e.command for e in splitting.splits["test"]] == ["b", "e", "f"]
    assert splitting.rules["train"].startswith("the 3 commands") and splitting.rules["test"].startswith("the other 3")
    with pytest.raises(ValueError, match="5 test flags for 6 examples"):
        canonical_simple(examples, np.zeros(5, dtype=bool))


@pytest.mark.shared
@pytest.mark.parametrize("cutoff", [22, 26, 40])
def test_cutoff_validation_equals_official_draw(cutoff, examples, shared_data):
    # 003's dataset/scan_length_resplit.py: the commands of tasks.txt with at most `cutoff` actions, in the file's
    # order; RandomState(1234).choice of int(n * (1 - 0.9)) of them, without replacement, is the IID validation set.
    candidates = [row for row in pairs(shared_data / "scan" / "tasks.txt") if len(row[1].split()) <= cutoff]
    drawn = np.random.RandomState(1234).choice(len(candidates), int(len(candidates) * (1 - 0.9)), replace=False)
    validation = Counter(candidates[i] for i in drawn)
    splitting = splittings()[f"length_cutoff_{cutoff}"](examples, 0)
    assert multiset(splitting.splits["validation"]) == validation
    assert multiset(splitting.splits["train"]) == Counter(candidates) - validation
    if cutoff == 22:  # 16,990 × 0.1 is 1,699, but 16,990 × (1 − 0.9) in floating point rounds down to 1,698
        assert len(splitting.splits["validation"]) == 1_698


def test_cutoff_validation_does_not_depend_on_the_seed_but_on_the_order_of_the_draw(examples):
    built = [splittings()["length_cutoff_30"](examples, seed).splits for seed in (0, 5)]
    assert built[0] == built[1]
    reversed_order = length_cutoff(examples, 30, tasks_order()[::-1], np.random.RandomState(1234)).splits
    assert len(reversed_order["validation"]) == len(built[0]["validation"])
    assert reversed_order["validation"] != built[0]["validation"]
    assert reversed_order["test"] == built[0]["test"]


def test_cutoff_draws_among_the_short_commands_only_and_keeps_the_grammars_order():
    examples = [Example(f"c{i}", " ".join(["I_JUMP"] * (1 + i % 3))) for i in range(30)]  # 1, 2, 3 actions
    splitting = length_cutoff(examples, 2, list(range(29, -1, -1)), np.random.RandomState(1234))
    short = [e for e in examples if e.length <= 2]
    assert len(splitting.splits["validation"]) == int(20 * (1 - 0.9)) == 1
    assert sorted(splitting.splits["train"] + splitting.splits["validation"], key=examples.index) == short
    assert splitting.splits["test"] == [e for e in examples if e.length == 3]
    assert splitting.splits["train"] == sorted(splitting.splits["train"], key=examples.index)
    # RandomState(1234).choice(20, 1, replace=False) is [3]: the 4th short command in the order given (c28, c27, c25,
    # c24), where in the examples' own order it would be c4.
    assert [e.command for e in splitting.splits["validation"]] == ["c24"]


def test_simple_depends_on_the_seed_and_only_on_it(examples):
    first = simple(examples, rng_for(0, "simple"))
    again = simple(examples, rng_for(0, "simple"))
    other = simple(examples, rng_for(1, "simple"))
    assert first.splits == again.splits
    assert first.splits["train"] != other.splits["train"]
    # By default SCAN's own proportion, 80% / 20% (Lake & Baroni 2018, §3), under its own name.
    assert first.name == "simple" and len(first.splits["train"]) == round(COMMANDS * 0.8) == SIMPLE["train"]


@pytest.mark.parametrize("percent", [1, 8, 64])
def test_simple_percent_variations(percent, examples):
    splitting = splittings()[f"simple_p{percent}"](examples, 0)
    assert len(splitting.splits["train"]) == round(COMMANDS * percent / 100)  # 209, 1,673 and 13,382 commands
    assert len(splitting.splits["train"]) + len(splitting.splits["test"]) == COMMANDS


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 32])
@pytest.mark.parametrize("rep", [1, 5])
def test_addprim_jump_with_examples_holds_n_plus_one_jump_commands(n, rep, examples):
    splitting = splittings()[f"addprim_jump_num{n}_rep{rep}"](examples, 0)
    train, test = splitting.splits["train"], splitting.splits["test"]
    jump_in_train = [e for e in train if contains(e.command, "jump")]
    assert len({e.command for e in jump_in_train}) == n + 1
    assert len(test) == ADDPRIM_JUMP_TEST - n
    assert not {e.command for e in jump_in_train} & {e.command for e in test}
    copies = Counter(e.command for e in jump_in_train)
    assert len(set(copies.values())) == 1, "every jump command in train is repeated the same number of times"
    assert 0.09 < len(jump_in_train) / len(train) < 0.11


def test_addprim_jump_reps_draw_different_commands(examples):
    picked = [{e.command for e in splittings()[f"addprim_jump_num4_rep{r}"](examples, 0).splits["train"]
               if contains(e.command, "jump") and e.command != "jump"} for r in (1, 2)]
    assert picked[0] != picked[1]


def test_length_cutoff_26_matches_the_counts_of_003_table_10(examples):
    splitting = splittings()["length_cutoff_26"](examples, 0)
    sizes = {name: len(rows) for name, rows in splitting.splits.items()}
    assert sizes == LENGTH_CUTOFF_26
    assert max(e.length for e in splitting.splits["train"] + splitting.splits["validation"]) == 26
    assert min(e.length for e in splitting.splits["test"]) == 27


def test_filler_levels_nest_and_never_see_jump_around_right(examples):
    trains = [{e.command for e in splittings()[f"filler_num{k}"](examples, 0).splits["train"]} for k in range(4)]
    assert trains[0] < trains[1] < trains[2] < trains[3]
    assert not any(contains(c, "jump around right") or contains(c, "turn around right") for c in trains[3])
    assert not any(contains(c, "(?:look|walk|run) around right") for c in trains[0])
    assert all(contains(c, "look around right") for c in trains[1] - trains[0])
    test = splittings()["filler_num0"](examples, 0).splits["test"]
    assert len(test) == TEMPLATE_JUMP_AROUND_RIGHT_TEST and all(contains(e.command, "jump around right") for e in test)


@pytest.mark.shared
def test_filler_num3_train_is_the_canonical_jump_around_right_train(examples, shared_data):
    splitting = splittings()["filler_num3"](examples, 0)
    path = shared_data / "scan" / "template_split" / "tasks_train_template_jump_around_right.txt"
    assert multiset(splitting.splits["train"]) == canonical(path)


@pytest.mark.parametrize("n", [1, 64, 1024])
def test_fewshot_adds_n_look_around_right_commands_to_num0(n, examples):
    num0 = {e.command for e in splittings()["filler_num0"](examples, 0).splits["train"]}
    num1 = {e.command for e in splittings()["filler_num1"](examples, 0).splits["train"]}
    train = [e.command for e in splittings()[f"fewshot_num{n}_rep1"](examples, 0).splits["train"]]
    added = set(train) - num0
    assert len(train) == len(set(train)) == len(num0) + n
    assert added <= num1 - num0


@pytest.mark.parametrize("name", ["simple", "simple_p8", "length", "length_cutoff_22", "addprim_turn_left",
                                  "addprim_jump_num2_rep3", "template_right", "filler_num2", "fewshot_num4_rep2"])
def test_each_splitting_carries_its_registry_name_and_a_sentence_per_split(name, examples):
    splitting = splittings()[name](examples, 0)
    assert splitting.name == name
    assert list(splitting.rules) == list(splitting.splits) and all(splitting.rules.values())


def test_the_registry_is_built_on_each_call_and_still_read_as_SPLITTINGS():
    from benchbuild.scan import splits

    assert splittings() is not splittings(), "a new registry each call: a mutated `_registry` is seen by the tests"
    assert list(splits.SPLITTINGS) == list(splittings()) and len(splits.SPLITTINGS) == 115
    with pytest.raises(AttributeError, match="module 'benchbuild.scan.splits' has no attribute 'SPLITTING'"):
        splits.SPLITTING  # noqa: B018 - any other name is an AttributeError naming it


def test_rng_streams_are_independent_of_which_splits_are_built():
    assert np.array_equal(rng_for(3, "simple").permutation(10), rng_for(3, "simple").permutation(10))
    assert not np.array_equal(rng_for(3, "simple").permutation(50), rng_for(3, "simple_p1").permutation(50))


@pytest.mark.shared
def test_the_counts_the_tests_use_are_those_of_the_canonical_files(shared_data):
    scan = shared_data / "scan"
    assert {name: len((scan / name).read_text().splitlines()) for name in CANONICAL_FILES} == CANONICAL_FILES
    addprim_train = (scan / "add_prim_split" / "tasks_train_addprim_jump.txt").read_text().splitlines()
    assert addprim_train.count("IN: jump OUT: I_JUMP") == ADDPRIM_JUMP_BARE_REPEATS


def test_length_keeps_22_actions_in_train_and_sends_23_to_test():
    # SCAN's grammar makes no command of exactly 23 actions, so the canonical files cannot tell a cutoff of 22 from
    # one of 23; Lake & Baroni (2018, §3) train on "at most 22 actions". These made-up rows can.
    rows = [Example(f"c{n}", " ".join(["I_JUMP"] * n)) for n in (21, 22, 23, 24)]
    splitting = length(rows)
    assert [e.length for e in splitting.splits["train"]] == [21, 22]
    assert [e.length for e in splitting.splits["test"]] == [23, 24]


def test_the_bare_primitive_is_repeated_at_least_once():
    # round(n/9) copies for n other commands (the canonical files: 1,467 for 13,203), but never none.
    assert _primitive_repeats(13_203, 1) == ADDPRIM_JUMP_BARE_REPEATS
    assert _primitive_repeats(4, 1) == 1 and _primitive_repeats(13, 1) == 1 and _primitive_repeats(14, 1) == 2


# What the data card and build.json say of each splitting (Splitting.rules, .counts, .sampled), one of each rule.
# The numbers are counts of the canonical files: 13,203 commands without "jump" (tasks.txt minus the 7,707 with it);
# 1,209 with "turn right" and as many with "turn around right" (the commands the template files leave out of both);
# 1,065 commands that filler_num1 adds to filler_num0.
CARD_SENTENCES = {
    "simple_p8": (True, {}, {
        "train": "a seeded random 8% of all 20,910 commands (1,673)", "test": "the other 19,237 commands"}),
    "length": (False, {}, {
        "train": "commands whose action sequence has at most 22 actions",
        "test": "commands whose action sequence has more than 22 actions"}),
    "addprim_jump": (False, {"copies of the bare primitive in train": 1467}, {
        "train": 'the 13,203 commands without "jump", plus the bare command "jump" repeated 1,467 times so that it is '
                 "about 10% of the training rows (as in the canonical files: round(n/9) copies for n other commands)",
        "test": 'every command containing "jump" except "jump" itself'}),
    "addprim_jump_num2_rep3": (True, {"copies of each jump command in train": 489}, {
        "train": 'the 13,203 commands without "jump", plus "jump" and 2 randomly chosen compositional jump commands '
                 "(seeded, replication 3), each of these 3 repeated 489 times so that jump commands stay about 10% "
                 "of training",
        "test": 'the other 7,704 commands containing "jump"'}),
    "template_right": (False, {'commands with "turn right" in neither split (as in the canonical files)': 1209}, {
        "train": 'every command without "(walk | look | run | jump) right" and without "turn right"',
        "test": 'every command containing "(walk | look | run | jump) right" and not "turn right"'}),
    "filler_num0": (False, {'commands with "turn around right" left out': 1209}, {
        "train": 'commands without "jump around right" whose "P around right" fillers are all among (none) — the '
                 "first 0 of (look, walk, run)",
        "test": 'every command containing "jump around right"'}),
    "filler_num2": (False, {'commands with "turn around right" left out': 1209}, {
        "train": 'commands without "jump around right" whose "P around right" fillers are all among (look, walk) — '
                 "the first 2 of (look, walk, run)",
        "test": 'every command containing "jump around right"'}),
    "fewshot_num4_rep2": (True, {'commands with "turn around right" left out': 1209}, {
        "train": "the filler_num0 training set plus 4 commands sampled (seeded, replication 2) from the 1,065 "
                 'commands that filler_num1 adds ("look around right" as the only filler)',
        "test": 'every command containing "jump around right"'}),
}


@pytest.mark.parametrize("name", sorted(CARD_SENTENCES))
def test_each_rule_says_how_its_splits_were_made_and_whether_they_were_drawn(name, examples):
    splitting = splittings()[name](examples, 0)
    assert (splitting.sampled, splitting.counts, splitting.rules) == CARD_SENTENCES[name]


# The seeded draws at seed 0 as every build since they were introduced holds them (and so every published benchmark
# made with benchbuild): a change here makes earlier builds irreproducible from their recorded seed.
DRAWN_AT_SEED_0 = {
    "addprim_jump_num2_rep3": ["jump left thrice after jump opposite left twice",
                               "jump opposite left thrice after jump opposite left twice"],
    "fewshot_num4_rep2": ["look around right and look opposite left thrice",
                          "look around right thrice after turn left twice", "look around right twice and look left",
                          "look around right twice and turn around left thrice"],
}


def test_the_seeded_draws_are_those_earlier_builds_made(examples):
    built = {name: splittings()[name](examples, 0).splits["train"] for name in DRAWN_AT_SEED_0}
    jump = {e.command for e in built["addprim_jump_num2_rep3"] if contains(e.command, "jump") and e.command != "jump"}
    assert sorted(jump) == DRAWN_AT_SEED_0["addprim_jump_num2_rep3"]
    num0 = {e.command for e in splittings()["filler_num0"](examples, 0).splits["train"]}
    added = {e.command for e in built["fewshot_num4_rep2"]} - num0
    assert sorted(added) == DRAWN_AT_SEED_0["fewshot_num4_rep2"]
