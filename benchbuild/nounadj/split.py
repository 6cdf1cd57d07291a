"""The split rules of the noun–adjective benchmark (000 §4.2), as pure functions of parses and a random Generator.

A parsed sentence is decided from its target-noun occurrences:
- **train**: every occurrence has no adjective or only its own paired adjective;
- **test**: at least one occurrence of a backward-column noun is modified only by forward-column adjectives (or a
  forward-column noun only by backward-column adjectives), and every other occurrence is train-like or such a
  swap;
- otherwise the sentence is in neither split, because a target noun carries an adjective outside the table
  (`other_adjective`) or a table adjective that is neither its own nor only from the other column
  (`table_adjective`, e.g. "effective response", "new and permanent solution").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np

from benchbuild.nounadj.amod import NounOccurrence
from benchbuild.nounadj.pairs import NounAdjectivePair, PairsConfig

Decision = Literal["train", "test", "other_adjective", "table_adjective"]
DECISIONS: tuple[Decision, ...] = ("train", "test", "other_adjective", "table_adjective")


@dataclass(frozen=True)
class HeldOutPairing:
    """The first unseen (adjective, noun) pairing of a test sentence, with the target-language facts of its row."""

    noun: str
    adjective: str
    fr_noun: str
    fr_adjective: str
    order: str
    pairings: int


@dataclass(frozen=True)
class SentenceDecision:
    kind: Decision
    pairing: HeldOutPairing | None = None


def decide_sentence(occurrences: Sequence[NounOccurrence], pairs: PairsConfig) -> SentenceDecision:
    """Place one parsed sentence by the rules of the module docstring."""
    by_noun = pairs.by_noun()
    other_column = {"backward": pairs.adjectives("forward"), "forward": pairs.adjectives("backward")}
    table = pairs.table_adjectives()
    swaps: list[tuple[NounAdjectivePair, str]] = []
    kind: Decision = "train"
    for occurrence in occurrences:
        pair = by_noun[occurrence.noun]
        adjectives = set(occurrence.adjectives)
        if adjectives <= {pair.adjective.lower()}:
            continue
        if adjectives <= other_column[pair.order]:
            swaps.extend((pair, adjective) for adjective in occurrence.adjectives)
            continue
        if not adjectives <= table:
            return SentenceDecision("other_adjective")
        kind = "table_adjective"
    if kind != "train":
        return SentenceDecision(kind)
    if not swaps:
        return SentenceDecision("train")
    noun_pair, adjective = swaps[0]
    adjective_pair = next(p for p in pairs.pairs if p.adjective.lower() == adjective)
    return SentenceDecision("test", HeldOutPairing(
        noun=noun_pair.noun, adjective=adjective_pair.adjective, fr_noun=noun_pair.fr_noun,
        fr_adjective=adjective_pair.fr_adjective, order=adjective_pair.order,
        pairings=len(dict.fromkeys((p.noun, a) for p, a in swaps))))


def validation_mask(rows: int, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """A boolean mask choosing exactly round(rows × fraction) of `rows` train-eligible rows for validation."""
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"the validation fraction must be in [0, 1), got {fraction}")
    mask = np.zeros(rows, dtype=bool)
    mask[rng.permutation(rows)[: int(round(rows * fraction))]] = True
    return mask
