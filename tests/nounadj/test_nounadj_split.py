"""The split rules as pure functions: every decision on hand-made noun occurrences, and the validation sample."""

from __future__ import annotations

import numpy as np
import pytest

from benchbuild.nounadj.amod import NounOccurrence
from benchbuild.nounadj.pairs import TABLE_2
from benchbuild.nounadj.split import decide_sentence, validation_mask


def occ(noun: str, *adjectives: str) -> NounOccurrence:
    return NounOccurrence(noun=noun, position=0, adjectives=adjectives)


def test_no_target_noun_is_train():
    assert decide_sentence([], TABLE_2).kind == "train"


def test_bare_nouns_and_own_adjectives_are_train():
    assert decide_sentence([occ("response"), occ("solution", "permanent"), occ("decision", "good", "good")],
                           TABLE_2).kind == "train"


def test_backward_noun_with_forward_adjective_is_test():
    decision = decide_sentence([occ("solution", "new")], TABLE_2)
    assert decision.kind == "test"
    pairing = decision.pairing
    assert (pairing.noun, pairing.adjective, pairing.fr_noun, pairing.fr_adjective, pairing.order) == (
        "solution", "new", "solution", "nouveau", "forward")


def test_forward_noun_with_backward_adjective_is_test_with_backward_order():
    decision = decide_sentence([occ("responsibility", "particular")], TABLE_2)
    assert decision.kind == "test"
    assert (decision.pairing.fr_noun, decision.pairing.fr_adjective, decision.pairing.order) == (
        "responsabilité", "particulier", "backward")


def test_only_other_column_adjectives_several_of_them_is_test_naming_the_first():
    decision = decide_sentence([occ("institution", "good", "new"), occ("response", "specific")], TABLE_2)
    assert decision.kind == "test"
    assert decision.pairing.adjective == "good"
    assert decision.pairing.pairings == 2


def test_an_adjective_outside_the_table_excludes_the_sentence():
    assert decide_sentence([occ("decision", "important")], TABLE_2).kind == "other_adjective"
    assert decide_sentence([occ("solution", "new"), occ("source", "renewable")], TABLE_2).kind == "other_adjective"


@pytest.mark.parametrize("adjectives", [("effective",), ("new", "permanent"), ("permanent", "specific")])
def test_table_adjectives_outside_own_pair_and_other_column_exclude(adjectives):
    assert decide_sentence([occ("solution", *adjectives)], TABLE_2).kind == "table_adjective"


def test_validation_mask_takes_exactly_the_fraction_and_depends_only_on_the_seed():
    first = validation_mask(1000, 0.1, np.random.default_rng(7))
    again = validation_mask(1000, 0.1, np.random.default_rng(7))
    other = validation_mask(1000, 0.1, np.random.default_rng(8))
    assert first.sum() == 100
    assert np.array_equal(first, again)
    assert not np.array_equal(first, other)
    assert validation_mask(5, 0.0, np.random.default_rng(0)).sum() == 0
    assert first.dtype == np.bool_  # a mask: it indexes the rows (a float array would not)
    with pytest.raises(ValueError, match=r"the validation fraction must be in \[0, 1\), got 1.0"):
        validation_mask(5, 1.0, np.random.default_rng(0))


def test_an_own_adjective_on_one_noun_does_not_stop_the_next_noun_from_making_the_sentence_test():
    decision = decide_sentence([occ("solution", "permanent"), occ("response", "good")], TABLE_2)
    assert decision.kind == "test" and decision.pairing.noun == "response"


def test_every_adjective_of_the_other_column_at_once_is_still_test():
    # The column check is "all of the noun's adjectives are in the other column", equality included.
    forward = ("new", "good", "big", "first")
    assert set(forward) == TABLE_2.adjectives("forward")
    decision = decide_sentence([occ("solution", *forward)], TABLE_2)
    assert decision.kind == "test" and decision.pairing.pairings == 4


def test_every_adjective_of_the_table_at_once_is_a_table_adjective_sentence():
    everything = tuple(pair.adjective for pair in TABLE_2.pairs)
    assert set(everything) == TABLE_2.table_adjectives()
    assert decide_sentence([occ("solution", *everything)], TABLE_2).kind == "table_adjective"
