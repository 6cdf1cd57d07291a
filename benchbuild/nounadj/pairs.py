"""The (adjective, noun) pairs of the benchmark: Table 2 of 000 by default, or a `--pairs FILE.toml`, validated once.

A pairs file lists `[[backward]]` pairs (the target-language adjective follows the noun) and `[[forward]]` pairs
(it precedes the noun), each with the source words and their target-language lemmas:

    [[backward]]
    adjective = "specific"
    noun = "response"
    fr_adjective = "spécifique"
    fr_noun = "réponse"
    noun_forms = []          # optional: extra source forms that count as the noun (irregular plurals, spellings)

Top-level `source_lang` / `target_lang` (default "en" / "fr") are optional. The `fr_` prefix is kept for any
target language so the rows' column names stay those of the paper.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from benchbuild.errors import BenchbuildError
from benchbuild.toml_schema import check_table, read_toml

Order = Literal["backward", "forward"]
ORDERS: tuple[Order, ...] = ("backward", "forward")
REQUIRED_PAIR_KEYS = ("adjective", "noun", "fr_adjective", "fr_noun")


@dataclass(frozen=True)
class NounAdjectivePair:
    """A noun that train shows with only this adjective, in the target-language order `order`."""

    adjective: str
    noun: str
    fr_adjective: str
    fr_noun: str
    order: Order
    noun_forms: tuple[str, ...] = ()

    def surface_forms(self) -> tuple[str, ...]:
        """Source forms of the noun that the prefilter looks for: the lemma, its regular plural, extra forms."""
        forms = [self.noun, english_plural(self.noun), *self.noun_forms]
        return tuple(dict.fromkeys(form.lower() for form in forms))


@dataclass(frozen=True)
class PairsConfig:
    """The validated pairs: each noun appears in exactly one pair; no word is in both columns."""

    pairs: tuple[NounAdjectivePair, ...]
    source_lang: str = "en"
    target_lang: str = "fr"
    origin: str = "Table 2 of Chaabouni et al. (2021)"

    def by_noun(self) -> dict[str, NounAdjectivePair]:
        """Each pair keyed by its noun's lemma."""
        return {pair.noun: pair for pair in self.pairs}

    def noun_lemmas(self) -> dict[str, str]:
        """Every lowercased form of every target noun (lemma, plural, extra forms) → the noun's lemma."""
        return {form: pair.noun for pair in self.pairs for form in pair.surface_forms()}

    def adjectives(self, order: Order) -> frozenset[str]:
        return frozenset(pair.adjective.lower() for pair in self.pairs if pair.order == order)

    def table_adjectives(self) -> frozenset[str]:
        return frozenset(pair.adjective.lower() for pair in self.pairs)

    def noun_pattern(self) -> re.Pattern[str]:
        """A case-insensitive whole-word regex for any form of any target noun: the parser prefilter."""
        forms = sorted({form for pair in self.pairs for form in pair.surface_forms()}, key=lambda f: (-len(f), f))
        return re.compile(r"(?<!\w)(?:" + "|".join(re.escape(form) for form in forms) + r")(?!\w)", re.IGNORECASE)

    def as_table(self) -> list[dict[str, str]]:
        """Rows for the data card: order, adjective, noun and their target lemmas."""
        return [{"order": p.order, "adjective": p.adjective, "noun": p.noun, "fr_adjective": p.fr_adjective,
                 "fr_noun": p.fr_noun} for p in self.pairs]


@dataclass(frozen=True)
class PairsFile:
    """The layout of a pairs file; each `[[backward]]` / `[[forward]]` table is a `NounAdjectivePair` less `order`."""

    backward: list[dict[str, Any]] = field(default_factory=list)
    forward: list[dict[str, Any]] = field(default_factory=list)
    source_lang: str = "en"
    target_lang: str = "fr"


def english_plural(noun: str) -> str:
    """The regular English plural (responsibility → responsibilities, source → sources, bus → buses)."""
    lower = noun.lower()
    if lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        return noun[:-1] + "ies"
    if lower.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    return noun + "s"


TABLE_2 = PairsConfig(pairs=(
    NounAdjectivePair("specific", "response", "spécifique", "réponse", "backward"),
    NounAdjectivePair("particular", "institution", "particulier", "institution", "backward"),
    NounAdjectivePair("effective", "organisation", "efficace", "organisation", "backward"),
    NounAdjectivePair("permanent", "solution", "permanent", "solution", "backward"),
    NounAdjectivePair("new", "source", "nouveau", "source", "forward"),
    NounAdjectivePair("good", "decision", "bon", "décision", "forward"),
    NounAdjectivePair("big", "responsibility", "grand", "responsabilité", "forward"),
    NounAdjectivePair("first", "population", "premier", "population", "forward"),
))


def load_pairs(path: str | Path | None) -> PairsConfig:
    """Table 2 when `path` is None, else the validated pairs file (errors name the file, the entry and the key)."""
    if path is None:
        return TABLE_2
    return parse_pairs(read_toml(path, "pairs file"), str(path))


def parse_pairs(raw: dict, origin: str) -> PairsConfig:
    """Validate the TOML structure of a pairs file (see the module docstring)."""
    layout = check_table(PairsFile, raw, origin)
    pairs = []
    for order in ORDERS:
        if not layout.get(order):
            raise BenchbuildError(f"{origin}: needs at least one [[{order}]] pair")
        for number, entry in enumerate(layout[order], start=1):
            pairs.append(_parse_pair(entry, order, number, origin))
    for key in ("source_lang", "target_lang"):
        if key in layout and not layout[key].strip():
            raise BenchbuildError(f"{origin}: {key} must be a language code such as 'en'")
    _check_consistent(pairs, origin)
    return PairsConfig(pairs=tuple(pairs), source_lang=layout.get("source_lang", "en"),
                       target_lang=layout.get("target_lang", "fr"), origin=origin)


def _parse_pair(entry: dict[str, Any], order: Order, number: int, origin: str) -> NounAdjectivePair:
    where = f"[[{order}]] pair {number}"
    values = check_table(NounAdjectivePair, entry, origin, where, complete=False, exclude=("order",))
    for key in REQUIRED_PAIR_KEYS:
        value = values.get(key, "")
        if not value.strip():
            label = values.get("noun") or values.get("adjective") or "?"
            raise BenchbuildError(f"{origin}: {where} ({label}) is missing {key!r}"
                                  + (" (the target-language lemma)" if key.startswith("fr_") else ""))
        if len(value.split()) != 1:
            raise BenchbuildError(f"{origin}: {where}: {key} {value!r} must be a single word")
    forms = values.get("noun_forms", ())
    if not all(form.strip() for form in forms):
        raise BenchbuildError(f"{origin}: {where}: noun_forms must be a list of words")
    return NounAdjectivePair(adjective=values["adjective"].strip(), noun=values["noun"].strip(),
                             fr_adjective=values["fr_adjective"].strip(), fr_noun=values["fr_noun"].strip(),
                             order=order, noun_forms=tuple(form.strip() for form in forms))


def _check_consistent(pairs: list[NounAdjectivePair], origin: str) -> None:
    column_of: dict[str, str] = {}
    for pair in pairs:
        for word in (pair.adjective.lower(), pair.noun.lower()):
            other = column_of.setdefault(word, pair.order)
            if other != pair.order:
                raise BenchbuildError(f"{origin}: {word!r} is in both the backward and the forward column")
    seen_nouns: dict[str, str] = {}
    for pair in pairs:
        for form in pair.surface_forms():
            if form in seen_nouns:
                raise BenchbuildError(f"{origin}: the noun {pair.noun!r} (form {form!r}) is in two pairs: "
                                      "each noun keeps exactly one adjective in train")
            seen_nouns[form] = pair.noun
    adjectives = {pair.adjective.lower() for pair in pairs}
    for pair in pairs:
        if pair.noun.lower() in adjectives:
            raise BenchbuildError(f"{origin}: {pair.noun!r} is both a noun and an adjective")
