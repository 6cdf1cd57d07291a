"""Stage 1 of ReaCT: normalize training and pool text the same way, so that words and n-grams are comparable.

A normalized line is its tokens joined by single spaces. The vectorized stages (`ngrams`, `degree`) split on any
whitespace in Arrow, so for scoring, `for_splitting` skips the Python-side re-joining unless Moses must run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Literal, Sequence

from benchbuild.errors import BenchbuildError

Tokenize = Literal["moses", "none"]
TOKENIZERS = ("moses", "none")


@dataclass(frozen=True)
class Normalizer:
    """Lowercasing and tokenization applied to every source (and target) line of every corpus.

    `tokenize="none"` keeps the text's own tokens (whitespace-separated, as in pre-tokenized IWSLT/WMT files);
    `"moses"` runs the sacremoses tokenizer for `lang` without XML escaping.
    """

    lowercase: bool = False
    tokenize: Tokenize = "none"
    lang: str = "de"
    _moses: object = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.tokenize not in TOKENIZERS:
            raise BenchbuildError(f"unknown --tokenize {self.tokenize!r}: choose one of {', '.join(TOKENIZERS)}")
        if self.tokenize == "moses":
            from sacremoses import MosesTokenizer

            object.__setattr__(self, "_moses", MosesTokenizer(lang=self.lang))

    def __call__(self, line: str) -> str:
        if self._moses is not None:
            line = self._moses.tokenize(line, escape=False, return_str=True)
        line = " ".join(line.split())
        return line.lower() if self.lowercase else line

    def all(self, lines: Iterable[str]) -> list[str]:
        """Every line normalized, in order."""
        return [self(line) for line in lines]

    def for_splitting(self, lines: Sequence[str]) -> Sequence[str]:
        """Lines whose whitespace tokens equal those of the normalized lines (cheaper: no re-joining)."""
        if self._moses is not None:
            return self.all(lines)
        return [line.lower() for line in lines] if self.lowercase else lines

    def signature(self) -> dict[str, object]:
        """The parameters that change the normalized text (for caches and cards)."""
        return {"lowercase": self.lowercase, "tokenize": self.tokenize, "lang": self.lang}
