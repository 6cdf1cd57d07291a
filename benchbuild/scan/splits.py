"""SCAN split rules: pure functions of the generated examples and an explicit random generator.

Each rule returns a `Splitting`: named splits of examples plus one sentence per split saying how it was made.
The deterministic rules reproduce the canonical files of the SCAN repository as multisets of rows; where a
canonical file disagrees with a naive reading of the papers, the rule below is the one that reproduces the file
(and its sentence says so). Two splittings come from random draws no rule re-creates and take them as inputs:
`simple` the SCAN repository's own 80/20 draw, `length_cutoff_N` 003's validation draw over the order of
`tasks.txt` (both shipped in `scan/canonical/`, read by `canonical_index`).
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

import numpy as np

from benchbuild.scan.canonical_index import simple_test_mask, tasks_order
from benchbuild.scan.grammar import PRIMITIVES, Example

SIMPLE_PERCENTS = (1, 2, 4, 8, 16, 32, 64)
LENGTH_CUTOFFS = (22, 24, 25, 26, 27, 28, 30, 32, 33, 36, 40)
ADDPRIM_JUMP_NUMS = (1, 2, 4, 8, 16, 32)
FEWSHOT_NUMS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
REPS = (1, 2, 3, 4, 5)
TEMPLATES = ("jump_around_right", "right", "opposite_right", "around_right")
FILLER_ORDER = ("look", "walk", "run")
PRIMITIVE_SHARE = 0.10
# 003's code (dataset/scan_length_resplit.py) draws the IID validation rows with numpy.random.RandomState(1234) and
# keeps a share of 0.9 for training.
CUTOFF_VALIDATION_SEED = 1234
CUTOFF_TRAIN_SHARE = 0.9


@dataclass
class Splitting:
    """A named splitting of SCAN: its splits (lists of examples, repeats included) and how each was made."""

    name: str
    splits: dict[str, list[Example]]
    rules: dict[str, str]
    sampled: bool = False
    counts: dict[str, int] = field(default_factory=dict)


def contains(command: str, phrase: str) -> bool:
    """Whether `phrase` (a regular expression over words) occurs in `command` as whole words."""
    return re.search(rf"(?:^| ){phrase}(?: |$)", command) is not None


def rng_for(seed: int, name: str) -> np.random.Generator:
    """The generator of one splitting: depends on the seed and the name only, so building a subset is reproducible."""
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def simple(examples: list[Example], rng: np.random.Generator, percent: float = 80, name: str = "simple") -> Splitting:
    order = rng.permutation(len(examples))
    n_train = round(len(examples) * percent / 100)
    return Splitting(
        name=name,
        splits={"train": [examples[i] for i in sorted(order[:n_train])],
                "test": [examples[i] for i in sorted(order[n_train:])]},
        rules={"train": f"a seeded random {percent:g}% of all {len(examples):,} commands ({n_train:,})",
               "test": f"the other {len(examples) - n_train:,} commands"},
        sampled=True,
    )


def length(examples: list[Example], max_actions: int = 22) -> Splitting:
    return Splitting(
        name="length",
        splits={"train": [e for e in examples if e.length <= max_actions],
                "test": [e for e in examples if e.length > max_actions]},
        rules={"train": f"commands whose action sequence has at most {max_actions} actions",
               "test": f"commands whose action sequence has more than {max_actions} actions"},
    )


def canonical_simple(examples: list[Example], in_test: np.ndarray) -> Splitting:
    """The canonical `simple` split: Lake & Baroni's random 80/20 draw, given as a test flag per example."""
    if len(in_test) != len(examples):
        raise ValueError(f"{len(in_test):,} test flags for {len(examples):,} examples")
    test = [e for e, flag in zip(examples, in_test) if flag]
    train = [e for e, flag in zip(examples, in_test) if not flag]
    return Splitting(
        name="simple",
        splits={"train": train, "test": test},
        rules={"train": f"the {len(train):,} commands of the SCAN repository's simple_split/tasks_train_simple.txt "
                        f"(Lake & Baroni's random 80%, shipped with benchbuild as an index), in the grammar's order",
               "test": f"the other {len(test):,} commands: those of simple_split/tasks_test_simple.txt"},
    )


def length_cutoff(examples: list[Example], cutoff: int, order: list[int] | np.ndarray,
                  rng: np.random.RandomState) -> Splitting:
    """003's length cutoff: `rng` draws the validation rows among the short commands taken in `order` (positions
    in `examples`: the order of SCAN's tasks.txt), as 003's code draws them with RandomState(1234)."""
    candidates = [i for i in map(int, order) if examples[i].length <= cutoff]
    n_valid = int(len(candidates) * (1 - CUTOFF_TRAIN_SHARE))
    validation = {candidates[i] for i in rng.choice(len(candidates), n_valid, replace=False).tolist()}
    short = [i for i, e in enumerate(examples) if e.length <= cutoff]
    return Splitting(
        name=f"length_cutoff_{cutoff}",
        splits={"train": [examples[i] for i in short if i not in validation],
                "validation": [examples[i] for i in short if i in validation],
                "test": [e for e in examples if e.length > cutoff]},
        rules={"train": f"commands with at most {cutoff} actions, minus the validation rows (003 §3.1)",
               "validation": f"{n_valid:,} of the {len(candidates):,} commands with at most {cutoff} actions "
                             f"(int(n × (1 − 0.9)) in floating point, as 003's code computes it), drawn as that code "
                             f"draws them: numpy.random.RandomState({CUTOFF_VALIDATION_SEED}).choice without "
                             f"replacement over these commands in the order of SCAN's tasks.txt",
               "test": f"commands with more than {cutoff} actions"},
    )


def _primitive_repeats(n_other: int, n_primitive_commands: int) -> int:
    """Copies of each primitive command so that they are ~10% of training: k·m / (n + k·m) ≈ 0.1."""
    return max(1, round(n_other * PRIMITIVE_SHARE / (1 - PRIMITIVE_SHARE) / n_primitive_commands))


def add_primitive(examples: list[Example], primitive: str, name: str | None = None) -> Splitting:
    with_primitive = [e for e in examples if contains(e.command, primitive) and e.command != primitive]
    bare = next(e for e in examples if e.command == primitive)
    other = [e for e in examples if not contains(e.command, primitive)]
    repeats = _primitive_repeats(len(other), 1)
    return Splitting(
        name=name or f"addprim_{primitive.replace(' ', '_')}",
        splits={"train": other + [bare] * repeats, "test": with_primitive},
        rules={"train": f"the {len(other):,} commands without \"{primitive}\", plus the bare command \"{primitive}\" "
                        f"repeated {repeats:,} times so that it is about 10% of the training rows (as in the "
                        f"canonical files: round(n/9) copies for n other commands)",
               "test": f"every command containing \"{primitive}\" except \"{primitive}\" itself"},
        counts={"copies of the bare primitive in train": repeats},
    )


def add_jump_with_examples(examples: list[Example], n: int, rep: int, rng: np.random.Generator) -> Splitting:
    base = add_primitive(examples, "jump")
    compositional = base.splits["test"]
    chosen = set(rng.choice(len(compositional), size=n, replace=False).tolist())
    moved = [e for i, e in enumerate(compositional) if i in chosen]
    other = [e for e in examples if not contains(e.command, "jump")]
    bare = next(e for e in examples if e.command == "jump")
    repeats = _primitive_repeats(len(other), n + 1)
    return Splitting(
        name=f"addprim_jump_num{n}_rep{rep}",
        splits={"train": other + [bare] * repeats + [e for e in moved for _ in range(repeats)],
                "test": [e for i, e in enumerate(compositional) if i not in chosen]},
        rules={"train": f"the {len(other):,} commands without \"jump\", plus \"jump\" and {n} randomly chosen "
                        f"compositional jump commands (seeded, replication {rep}), each of these {n + 1} repeated "
                        f"{repeats:,} times so that jump commands stay about 10% of training",
               "test": f"the other {len(compositional) - n:,} commands containing \"jump\""},
        sampled=True,
        counts={"copies of each jump command in train": repeats},
    )


TEMPLATE_TEST = {
    "jump_around_right": "jump around right",
    "right": f"(?:{'|'.join(PRIMITIVES)}) right",
    "opposite_right": f"(?:{'|'.join(PRIMITIVES)}) opposite right",
    "around_right": f"(?:{'|'.join(PRIMITIVES)}) around right",
}
TEMPLATE_EXCLUDED = {
    "jump_around_right": "turn around right",
    "right": "turn right",
    "opposite_right": "turn opposite right",
    "around_right": "turn around right",
}


def template(examples: list[Example], which: str) -> Splitting:
    """Loula et al. (2018) template splits, as in the canonical `template_split` files.

    The canonical files also leave out every command with the template's "turn" form ("turn right", "turn
    opposite right", "turn around right"): 1,209 commands are in neither split.
    """
    test_phrase, excluded_phrase = TEMPLATE_TEST[which], TEMPLATE_EXCLUDED[which]
    kept = [e for e in examples if not contains(e.command, excluded_phrase)]
    test = [e for e in kept if contains(e.command, test_phrase)]
    readable = test_phrase.replace("(?:", "(").replace("|", " | ")
    return Splitting(
        name=f"template_{which}",
        splits={"train": [e for e in kept if not contains(e.command, test_phrase)], "test": test},
        rules={"train": f"every command without \"{readable}\" and without \"{excluded_phrase}\"",
               "test": f"every command containing \"{readable}\" and not \"{excluded_phrase}\""},
        counts={f"commands with \"{excluded_phrase}\" in neither split (as in the canonical files)":
                len(examples) - len(kept)},
    )


def _around_right_fillers(command: str) -> set[str]:
    return set(re.findall(r"(?:^| )(\w+) around right", command))


def _filler_sets(examples: list[Example]) -> tuple[list[Example], list[list[Example]], list[Example], int]:
    """Commands without "turn around right", split by which "P around right" fillers they use."""
    return _filler_sets_of(tuple(examples))


@lru_cache(maxsize=4)
def _filler_sets_of(examples: tuple[Example, ...]) -> tuple[list[Example], list[list[Example]], list[Example], int]:
    kept = [e for e in examples if not contains(e.command, "turn around right")]
    test = [e for e in kept if "jump" in _around_right_fillers(e.command)]
    allowed = [set(FILLER_ORDER[:k]) for k in range(len(FILLER_ORDER) + 1)]
    by_level: list[list[Example]] = [[] for _ in allowed]
    for e in kept:
        fillers = _around_right_fillers(e.command)
        if "jump" in fillers:
            continue
        level = next(k for k, permitted in enumerate(allowed) if fillers <= permitted)
        by_level[level].append(e)
    return test, by_level, kept, len(examples) - len(kept)


def filler(examples: list[Example], num: int) -> Splitting:
    test, by_level, _, left_out = _filler_sets(examples)
    position = {e.command: i for i, e in enumerate(examples)}
    train = sorted((e for level in by_level[: num + 1] for e in level), key=lambda e: position[e.command])
    fillers = ", ".join(FILLER_ORDER[:num]) or "none"
    return Splitting(
        name=f"filler_num{num}",
        splits={"train": train, "test": test},
        rules={"train": f"commands without \"jump around right\" whose \"P around right\" fillers are all among "
                        f"({fillers}) — the first {num} of (look, walk, run)",
               "test": "every command containing \"jump around right\""},
        counts={"commands with \"turn around right\" left out": left_out},
    )


def fewshot(examples: list[Example], n: int, rep: int, rng: np.random.Generator) -> Splitting:
    test, by_level, _, left_out = _filler_sets(examples)
    pool = by_level[1]
    chosen = sorted(rng.choice(len(pool), size=n, replace=False).tolist())
    return Splitting(
        name=f"fewshot_num{n}_rep{rep}",
        splits={"train": by_level[0] + [pool[i] for i in chosen], "test": test},
        rules={"train": f"the filler_num0 training set plus {n} commands sampled (seeded, replication {rep}) from the "
                        f"{len(pool):,} commands that filler_num1 adds (\"look around right\" as the only filler)",
               "test": "every command containing \"jump around right\""},
        sampled=True,
        counts={"commands with \"turn around right\" left out": left_out},
    )


Rule = Callable[[list[Example], int], Splitting]


def _registry() -> dict[str, Rule]:
    rules: dict[str, Rule] = {"simple": lambda ex, seed: canonical_simple(ex, simple_test_mask())}
    for p in SIMPLE_PERCENTS:
        rules[f"simple_p{p}"] = lambda ex, seed, p=p: simple(ex, rng_for(seed, f"simple_p{p}"), p, f"simple_p{p}")
    rules["length"] = lambda ex, seed: length(ex)
    for c in LENGTH_CUTOFFS:
        rules[f"length_cutoff_{c}"] = lambda ex, seed, c=c: length_cutoff(
            ex, c, tasks_order(), np.random.RandomState(CUTOFF_VALIDATION_SEED))
    rules["addprim_jump"] = lambda ex, seed: add_primitive(ex, "jump")
    rules["addprim_turn_left"] = lambda ex, seed: add_primitive(ex, "turn left")
    for n in ADDPRIM_JUMP_NUMS:
        for r in REPS:
            name = f"addprim_jump_num{n}_rep{r}"
            rules[name] = lambda ex, seed, n=n, r=r, name=name: add_jump_with_examples(ex, n, r, rng_for(seed, name))
    for t in TEMPLATES:
        rules[f"template_{t}"] = lambda ex, seed, t=t: template(ex, t)
    for k in range(len(FILLER_ORDER) + 1):
        rules[f"filler_num{k}"] = lambda ex, seed, k=k: filler(ex, k)
    for n in FEWSHOT_NUMS:
        for r in REPS:
            name = f"fewshot_num{n}_rep{r}"
            rules[name] = lambda ex, seed, n=n, r=r, name=name: fewshot(ex, n, r, rng_for(seed, name))
    return rules


def splittings() -> dict[str, Rule]:
    """Every splitting's rule by name, in canonical order. Built on each call (115 closures, well under a
    millisecond) rather than once at import, so a mutation test that switches on a changed `_registry` sees it."""
    return _registry()


def __getattr__(name: str) -> dict[str, Rule]:
    """`SPLITTINGS`: the registry under the constant's name it had when it was built at import (benchmarks/ reads it)."""
    if name == "SPLITTINGS":
        return splittings()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
