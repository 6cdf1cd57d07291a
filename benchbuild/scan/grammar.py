"""The SCAN grammar (002 App. A, Figure 4) and its interpretation into actions (Figure 5).

Every command the grammar generates is produced exactly once, in a fixed order, so a command's position in
`generate_commands()` is a stable id across rebuilds.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import product

PRIMITIVES = ("walk", "look", "run", "jump")
DIRECTIONS = ("left", "right")
ACTION = {"walk": "I_WALK", "look": "I_LOOK", "run": "I_RUN", "jump": "I_JUMP",
          "left": "I_TURN_LEFT", "right": "I_TURN_RIGHT"}
ACTIONS = ("I_WALK", "I_LOOK", "I_RUN", "I_JUMP", "I_TURN_LEFT", "I_TURN_RIGHT")


@dataclass(frozen=True)
class Example:
    """One SCAN pair: a command and the action sequence it denotes."""

    command: str
    actions: str

    @property
    def length(self) -> int:
        """Number of actions (the length split's measure)."""
        return len(self.actions.split())


def verb_phrases() -> list[str]:
    """V: U | D | D[1] opposite D[2] | D[1] around D[2], where D is `U direction` or `turn direction`."""
    phrases = list(PRIMITIVES)
    for verb, direction in product((*PRIMITIVES, "turn"), DIRECTIONS):
        phrases.append(f"{verb} {direction}")
    for modifier in ("opposite", "around"):
        for verb, direction in product((*PRIMITIVES, "turn"), DIRECTIONS):
            phrases.append(f"{verb} {modifier} {direction}")
    return phrases


def sentences() -> list[str]:
    """S: V | V twice | V thrice."""
    return [f"{v}{suffix}" for v in verb_phrases() for suffix in ("", " twice", " thrice")]


def generate_commands() -> list[str]:
    """C: S | S and S | S after S — all 20,910 commands in a fixed order."""
    singles = sentences()
    commands = list(singles)
    for conjunction in ("and", "after"):
        commands += [f"{first} {conjunction} {second}" for first in singles for second in singles]
    return commands


@lru_cache(maxsize=None)
def _verb_phrase(phrase: str) -> tuple[str, ...]:
    words = phrase.split()
    verb, rest = words[0], words[1:]
    base = () if verb == "turn" else (ACTION[verb],)
    if not rest:
        return base
    if len(rest) == 1:
        return (ACTION[rest[0]], *base)
    modifier, direction = rest
    turn = ACTION[direction]
    if modifier == "opposite":
        return (turn, turn, *base)
    if modifier == "around":
        return (turn, *base) * 4
    raise ValueError(f"not a SCAN verb phrase: {phrase!r}")


def _sentence(sentence: str) -> tuple[str, ...]:
    words = sentence.split()
    if words[-1] == "twice":
        return _verb_phrase(" ".join(words[:-1])) * 2
    if words[-1] == "thrice":
        return _verb_phrase(" ".join(words[:-1])) * 3
    return _verb_phrase(sentence)


def interpret(command: str) -> str:
    """The action sequence of a command (Figure 5); `x1 after x2` runs x2 first."""
    words = command.split()
    for conjunction in ("and", "after"):
        if conjunction in words:
            at = words.index(conjunction)
            first, second = _sentence(" ".join(words[:at])), _sentence(" ".join(words[at + 1:]))
            return " ".join(first + second if conjunction == "and" else second + first)
    return " ".join(_sentence(command))


def generate() -> list[Example]:
    """Every SCAN example, in the grammar's fixed order."""
    return [Example(command, interpret(command)) for command in generate_commands()]
