"""Adjectival modifiers of target nouns in a dependency parse, whatever parser produced it.

Both backends (spaCy, stanza) are reduced to a list of `Word`s with a head index, and `noun_occurrences` finds each
occurrence of a target noun (by lemma, so plurals count) with the set of adjectives modifying it: its `amod`
dependents plus adjectives conjoined to one of them ("new and permanent solution" gives *solution* both).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

NOUN_TAGS = frozenset({"NOUN", "PROPN"})


@dataclass(frozen=True)
class Word:
    """One token of a parse: `head` is the index of its head word in the same sentence list, -1 for a root."""

    text: str
    lemma: str
    upos: str
    deprel: str
    head: int


@dataclass(frozen=True)
class NounOccurrence:
    """A target noun at word index `position`, with the lowercased lemmas of its adjectives in sentence order."""

    noun: str
    position: int
    adjectives: tuple[str, ...]


def noun_occurrences(words: Sequence[Word], nouns: Mapping[str, str]) -> list[NounOccurrence]:
    """Every occurrence of a target noun (a NOUN/PROPN whose lowercased lemma or form is a key of `nouns`, which
    maps it to the noun's lemma) with the lemmas of its adjectival modifiers."""
    children: dict[int, list[int]] = {}
    for index, word in enumerate(words):
        if word.head >= 0 and word.head != index:
            children.setdefault(word.head, []).append(index)
    found = []
    for index, word in enumerate(words):
        if word.upos not in NOUN_TAGS:
            continue
        noun = nouns.get(word.lemma.lower()) or nouns.get(word.text.lower())
        if noun is None:
            continue
        modifiers = _amod_with_conjuncts(index, words, children)
        found.append(NounOccurrence(noun=noun, position=index,
                                    adjectives=tuple(words[m].lemma.lower() for m in modifiers)))
    return found


def _amod_with_conjuncts(noun: int, words: Sequence[Word], children: Mapping[int, list[int]]) -> list[int]:
    """Indices of the noun's `amod` dependents and of words conjoined to them (transitively), in sentence order."""
    selected: set[int] = set()
    stack = [child for child in children.get(noun, ()) if _relation(words[child].deprel) == "amod"]
    while stack:
        index = stack.pop()
        if index in selected:
            continue
        selected.add(index)
        stack.extend(child for child in children.get(index, ()) if _relation(words[child].deprel) == "conj")
    return sorted(selected)


def _relation(deprel: str) -> str:
    """The universal relation without its subtype (`amod:att` → `amod`), lowercased."""
    return deprel.split(":", 1)[0].lower()


def spacy_words(doc) -> list[Word]:
    """A spaCy `Doc` as Words (indices are doc-wide; spaCy roots point to themselves, mapped to -1)."""
    return [Word(token.text, token.lemma_, token.pos_, token.dep_, -1 if token.head.i == token.i else token.head.i)
            for token in doc]


def stanza_words(document) -> list[Word]:
    """A `stanza.Document` as Words: every sentence's words, heads shifted to document-wide indices."""
    words: list[Word] = []
    for sentence in document.sentences:
        offset = len(words)
        for word in sentence.words:
            head = (word.head or 0) - 1
            words.append(Word(word.text, word.lemma or word.text, word.upos or "", word.deprel or "",
                              -1 if head < 0 else offset + head))
    return words

