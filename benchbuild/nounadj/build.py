"""Build the noun–adjective order benchmark: stream a parallel corpus, parse only sentences holding a target noun,
place each sentence by the split rules, check test references in French, and return a `Benchmark`.

Memory stays bounded on a 2-million-pair corpus: rows stream from the reader through the parser in line order, the
train-eligible rows are written in Arrow record batches (to a work folder when one is given) and the validation
sample is taken in a second streaming pass over them; only test rows (a few hundred) are held in memory.
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter, deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from benchbuild.benchmark import Benchmark, BuildInfo, CardFacts, Format
from benchbuild.corpus import ENCODING_ERRORS, CorpusStats, ParallelInput
from benchbuild.errors import BenchbuildError
from benchbuild.nounadj.amod import noun_occurrences
from benchbuild.nounadj.french import FrenchLemmatizer, find_pairing
from benchbuild.nounadj.pairs import PairsConfig, load_pairs
from benchbuild.nounadj.parsers import DEFAULT_SPACY_MODEL, Parser, make_parser
from benchbuild.nounadj.split import decide_sentence, validation_mask
from benchbuild.progress import progress_bar

FAMILY = "nounadj"
FEATURES = datasets.Features({
    "id": datasets.Value("string"),
    "source": datasets.Value("string"),
    "target": datasets.Value("string"),
    "noun": datasets.Value("string"),
    "adjective": datasets.Value("string"),
    "fr_noun": datasets.Value("string"),
    "fr_adjective": datasets.Value("string"),
    "order": datasets.Value("string"),
    "reference_match": datasets.Value("bool"),
})
COLUMNS = {
    "id": "`nounadj-<line>`: the corpus line (or dataset row) number, stable across rebuilds",
    "source": "the English sentence",
    "target": "the French reference",
    "noun": "test only (null elsewhere): the English target noun (lemma)",
    "adjective": "test only: the English adjective modifying it, from the other column of the pairs table",
    "fr_noun": "test only: the French lemma of the noun",
    "fr_adjective": "test only: the French lemma of the adjective",
    "order": "test only: `forward` (adjective before the noun) or `backward` (after it), where the French adjective "
             "should stand",
    "reference_match": "test only: whether the French reference contains both French lemmas (fr_core_news_sm "
                       "lemmas or regular inflections)",
}
CITATION = """@inproceedings{chaabouni-etal-2021-transformers,
  title = {Can Transformers Jump Around Right in Natural Language? Assessing Performance Transfer from {SCAN}},
  author = {Chaabouni, Rahma and Dess{\\`i}, Roberto and Kharitonov, Eugene},
  booktitle = {Proceedings of the Fourth BlackboxNLP Workshop on Analyzing and Interpreting Neural Networks for NLP},
  year = {2021},
  publisher = {Association for Computational Linguistics}
}"""
_BATCH_ROWS = 8192
_PROGRESS_EVERY = 2000


@dataclass(frozen=True)
class NounAdjOptions:
    """The build parameters (the CLI's options); `n_process` and `batch_size` change speed, never the output."""

    pairs_file: Path | None = None
    parser: str = "spacy"
    spacy_model: str = DEFAULT_SPACY_MODEL
    stanza_dir: Path | None = None
    n_process: int = 1
    batch_size: int = 256
    valid_fraction: float = 0.1
    seed: int = 0
    require_reference_match: bool = False
    encoding_errors: str = "strict"

    def check(self) -> None:
        if not 0.0 <= self.valid_fraction < 1.0:
            raise BenchbuildError(f"--valid-fraction must be in [0, 1), got {self.valid_fraction}")
        if self.encoding_errors not in ENCODING_ERRORS:
            raise BenchbuildError(f"--encoding-errors must be strict or replace, got {self.encoding_errors!r}")
        if self.parser not in ("spacy", "stanza"):
            raise BenchbuildError(f"--parser must be spacy or stanza, got {self.parser!r}")


@dataclass
class BuildCounts:
    """What happened to every corpus line, for the card."""

    parsed: int = 0
    unparsed_train: int = 0
    parsed_train: int = 0
    other_adjective: int = 0
    table_adjective: int = 0
    test_candidates: int = 0
    several_pairings: int = 0
    reference_match: int = 0
    reference_order: int = 0
    own_pairing: Counter = field(default_factory=Counter)
    bare_noun: Counter = field(default_factory=Counter)


class ArrowSink:
    """Collects rows of the benchmark's schema into record batches, in memory or in an Arrow stream file."""

    def __init__(self, path: Path | None):
        self.schema = FEATURES.arrow_schema
        self.path = path
        self._buffer: list[dict[str, Any]] = []
        self._batches: list[pa.RecordBatch] = []
        self._writer = pa.ipc.new_stream(str(path), self.schema) if path is not None else None

    def add(self, row: dict[str, Any]) -> None:
        self._buffer.append(row)
        if len(self._buffer) >= _BATCH_ROWS:
            self._flush()

    def add_batch(self, batch: pa.RecordBatch) -> None:
        self._flush()
        self._write(batch)

    def _flush(self) -> None:
        if self._buffer:
            self._write(pa.RecordBatch.from_pylist(self._buffer, schema=self.schema))
            self._buffer = []

    def _write(self, batch: pa.RecordBatch) -> None:
        if self._writer is not None:
            self._writer.write_batch(batch)
        else:
            self._batches.append(batch)

    def finish(self) -> datasets.Dataset:
        self._flush()
        if self._writer is not None:
            self._writer.close()
            return datasets.Dataset.from_file(str(self.path))
        return datasets.Dataset(pa.Table.from_batches(self._batches, schema=self.schema))


def train_row(line: int, source: str, target: str) -> dict[str, Any]:
    return {"id": f"nounadj-{line}", "source": source, "target": target, "noun": None, "adjective": None,
            "fr_noun": None, "fr_adjective": None, "order": None, "reference_match": None}


def build_noun_adj(corpus: ParallelInput, options: NounAdjOptions = NounAdjOptions(), *,
                   workdir: Path | None = None, progress: bool = False, parser: Parser | None = None,
                   french: FrenchLemmatizer | None = None) -> Benchmark:
    """Build the benchmark from `corpus`. Input, pairs and models are all checked before the first line is parsed.

    `parser` and `french` may be given already loaded (to share models between builds); `workdir` holds the Arrow
    files of the large splits (they must outlive the returned Benchmark until it is saved).
    """
    options.check()
    pairs = load_pairs(options.pairs_file)
    if corpus.hf is not None:  # a translation column is read by the pairs file's languages
        corpus = replace(corpus, source_lang=pairs.source_lang, target_lang=pairs.target_lang)
    total = corpus.validate()
    if parser is None:
        parser = make_parser(options.parser, spacy_model=options.spacy_model, stanza_dir=options.stanza_dir,
                             n_process=options.n_process, batch_size=options.batch_size, lang=pairs.source_lang)
    if french is None:
        french = FrenchLemmatizer(batch_size=options.batch_size)

    stats, counts = CorpusStats(), BuildCounts()
    eligible = ArrowSink(workdir / "eligible.arrow" if workdir else None)
    test_rows = _stream_corpus(corpus, options, pairs, parser, stats, counts, eligible, total, progress)
    test_rows = _check_references(test_rows, french, counts)
    if options.require_reference_match:
        test_rows = [row for row in test_rows if row["reference_match"]]

    train, validation = _split_validation(eligible.finish(), options, workdir)
    if workdir is not None:  # its rows now live in train.arrow and validation.arrow: halve the disk used
        (workdir / "eligible.arrow").unlink()
    splits = {"train": train, "validation": validation,
              "test": datasets.Dataset(pa.Table.from_pylist(test_rows, schema=FEATURES.arrow_schema))}
    info = BuildInfo.with_inputs(FAMILY, "noun-adjective-order", _parameters(options, pairs, parser, french),
                                 options.seed, _input_files(corpus, options))
    card = _card_facts(options, pairs, parser, french, stats, counts, test_rows, splits)
    return Benchmark.from_splits(splits, info, card, FEATURES)


def build_noun_adj_to(out: Path, corpus: ParallelInput, options: NounAdjOptions = NounAdjOptions(), *,
                      format: Format = "arrow", overwrite: bool = False, progress: bool = False) -> BuildInfo:
    """Build and save atomically to `out`; the large splits live in a temporary work folder until saved.

    Returns the saved BuildInfo (the Benchmark's splits are backed by the work folder, gone once this returns).
    """
    from benchbuild.atomic import check_writable

    check_writable(Path(out), overwrite)
    with tempfile.TemporaryDirectory(prefix="benchbuild-nounadj-") as work:
        benchmark = build_noun_adj(corpus, options, workdir=Path(work), progress=progress)
        benchmark.save(out, format=format, overwrite=overwrite)
    return benchmark.info


def _stream_corpus(corpus: ParallelInput, options: NounAdjOptions, pairs: PairsConfig, parser: Parser,
                   stats: CorpusStats, counts: BuildCounts, eligible: ArrowSink, total: int | None,
                   progress: bool) -> list[dict[str, Any]]:
    """One pass in line order: non-candidates straight to train, candidates through the parser and the rules."""
    pattern, noun_lemmas = pairs.noun_pattern(), pairs.noun_lemmas()
    waiting: deque[tuple[int, str, str]] = deque()
    test_rows: list[dict[str, Any]] = []

    # A bar only on a terminal: piped or captured stderr keeps an error to its one line.
    with progress_bar("noun–adjective: lines read", total, enabled=progress and sys.stderr.isatty()) as advance:
        def candidates() -> Iterator[tuple[str, tuple[int, str, str]]]:
            shown = 0
            for read, (line, source, target) in enumerate(corpus.rows(encoding_errors=options.encoding_errors,
                                                                      stats=stats), start=1):
                if read % _PROGRESS_EVERY == 0:
                    advance(amount=line - shown)
                    shown = line
                if pattern.search(source):
                    counts.parsed += 1
                    yield source, (line, source, target)
                else:
                    waiting.append((line, source, target))
            advance(amount=(total or shown) - shown)

        for words, (line, source, target) in parser.parse(candidates()):
            # The parser reads ahead; rows read before this one that needed no parse go out first, keeping line order.
            while waiting and waiting[0][0] < line:
                eligible.add(train_row(*waiting.popleft()))
                counts.unparsed_train += 1
            occurrences = noun_occurrences(words, noun_lemmas)
            decision = decide_sentence(occurrences, pairs)
            if decision.kind == "train":
                counts.parsed_train += 1
                for occurrence in occurrences:
                    (counts.own_pairing if occurrence.adjectives else counts.bare_noun)[occurrence.noun] += 1
                eligible.add(train_row(line, source, target))
            elif decision.kind == "test":
                counts.test_candidates += 1
                pairing = decision.pairing
                counts.several_pairings += pairing.pairings > 1
                test_rows.append({"id": f"nounadj-{line}", "source": source, "target": target,
                                  "noun": pairing.noun, "adjective": pairing.adjective, "fr_noun": pairing.fr_noun,
                                  "fr_adjective": pairing.fr_adjective, "order": pairing.order,
                                  "reference_match": None})
            elif decision.kind == "other_adjective":
                counts.other_adjective += 1
            else:
                counts.table_adjective += 1
        while waiting:
            eligible.add(train_row(*waiting.popleft()))
            counts.unparsed_train += 1
    return test_rows


def _check_references(test_rows: list[dict[str, Any]], french: FrenchLemmatizer,
                      counts: BuildCounts) -> list[dict[str, Any]]:
    """Mark whether each French reference holds both lemmas (and count those with the expected order)."""
    for row, tokens in zip(test_rows, french.tokens(row["target"] for row in test_rows), strict=True):
        match = find_pairing(tokens, row["fr_adjective"], row["fr_noun"])
        row["reference_match"] = match.has_both
        counts.reference_match += match.has_both
        counts.reference_order += match.order == row["order"]
    return test_rows


def _split_validation(eligible: datasets.Dataset, options: NounAdjOptions,
                      workdir: Path | None) -> tuple[datasets.Dataset, datasets.Dataset]:
    """Exactly round(n × valid_fraction) seeded rows to validation, streaming over the eligible rows' batches."""
    mask = validation_mask(len(eligible), options.valid_fraction, np.random.default_rng(options.seed))
    train = ArrowSink(workdir / "train.arrow" if workdir else None)
    validation = ArrowSink(workdir / "validation.arrow" if workdir else None)
    offset = 0
    for batch in eligible.data.table.to_batches(_BATCH_ROWS):
        chosen = pa.array(mask[offset:offset + batch.num_rows])
        offset += batch.num_rows
        validation.add_batch(batch.filter(chosen))
        train.add_batch(batch.filter(pc.invert(chosen)))
    return train.finish(), validation.finish()


def _parameters(options: NounAdjOptions, pairs: PairsConfig, parser: Parser,
                french: FrenchLemmatizer) -> dict[str, Any]:
    return {
        "pairs": str(options.pairs_file) if options.pairs_file else "Table 2 (default)",
        "source_lang": pairs.source_lang,
        "target_lang": pairs.target_lang,
        "parser": options.parser,
        "parser_model": parser.description,
        "french_model": french.description,
        "valid_fraction": options.valid_fraction,
        "require_reference_match": options.require_reference_match,
        "encoding_errors": options.encoding_errors,
        "n_process": options.n_process,
        "batch_size": options.batch_size,
    }


def _input_files(corpus: ParallelInput, options: NounAdjOptions) -> dict[str, Path]:
    files = dict(corpus.files())
    if options.pairs_file:
        files[f"pairs: {Path(options.pairs_file).name}"] = Path(options.pairs_file)
    return files


def _card_facts(options: NounAdjOptions, pairs: PairsConfig, parser: Parser, french: FrenchLemmatizer,
                stats: CorpusStats, counts: BuildCounts, test_rows: list[dict[str, Any]],
                splits: dict[str, datasets.Dataset]) -> CardFacts:
    backward = ", ".join(sorted(pairs.adjectives("backward")))
    forward = ", ".join(sorted(pairs.adjectives("forward")))
    rules = {
        "parsing": f"every English sentence holding a form of a target noun is dependency-parsed ({parser.description}); "
                   "for each occurrence of a target noun (a noun whose lemma or form is the noun, its plural or "
                   "a listed form, so plurals count) the adjectives modifying it are its `amod` dependents and "
                   "adjectives conjoined to them, compared by lemma. Sentences with no "
                   "target-noun form are not parsed and go to train/validation.",
        "train / validation": "sentences in which every target-noun occurrence has no adjective or only its own "
                              "paired adjective, plus every unparsed sentence; "
                              f"{options.valid_fraction:g} of them (seed {options.seed}) form validation.",
        "test": f"sentences in which a backward-column noun is modified only by forward-column adjectives "
                f"({forward}), or a forward-column noun only by backward-column adjectives ({backward}): pairings "
                "never seen in train. The row's noun/adjective is the sentence's first such pairing. The French "
                f"reference is checked with {french.description} for both French lemmas (`reference_match`)"
                + ("; rows without a match are dropped (--require-reference-match)."
                   if options.require_reference_match else "; all rows are kept."),
        "neither split": "sentences where a target noun carries an adjective outside the table, or a table "
                         "adjective that is neither its own nor only from the other column (e.g. an adjective of "
                         "the same column, or its own adjective together with a swapped one).",
    }
    card_counts = {
        "lines read": stats.pairs_read,
        "pairs dropped: empty or whitespace-only side": stats.empty_dropped,
        "lines with invalid UTF-8 replaced (--encoding-errors replace)": stats.replaced_characters_lines,
        "sentences sent to the parser (hold a target-noun form)": counts.parsed,
        "train/validation: not parsed (no target-noun form)": counts.unparsed_train,
        "train/validation: parsed, every target noun bare or with its own adjective": counts.parsed_train,
        "neither split: a target noun has an adjective outside the table": counts.other_adjective,
        "neither split: a target noun has a table adjective outside its pairing and the other column":
            counts.table_adjective,
        "test: sentences with a held-out pairing": counts.test_candidates,
        "test: sentences with more than one held-out pairing (the row names the first)": counts.several_pairings,
        "test: references holding both French lemmas": counts.reference_match,
        "test: references with the French adjective on the expected side": counts.reference_order,
        "test: rows dropped by --require-reference-match": counts.test_candidates - len(test_rows),
        **{f"rows: {name}": len(dataset) for name, dataset in splits.items()},
    }
    per_pairing = Counter((row["noun"], row["adjective"], row["order"]) for row in test_rows)
    return CardFacts(
        pretty_name="Noun–adjective order (English→French)",
        summary="Does a translation model put a French adjective on the right side of a noun it has seen with only "
                "one other adjective? Built from an English–French parallel corpus after Chaabouni et al. (2021, "
                "§4.2): in train each target noun appears only with its paired adjective (or none); test holds "
                "the swapped pairings, whose French order is the other one. Score test predictions with COMP "
                "(both French lemmas present) and order accuracy.",
        rules=rules,
        languages=[pairs.source_lang, pairs.target_lang],
        license="other",
        citation=CITATION,
        counts=card_counts,
        extra={
            "pairs": pairs.as_table(),
            "pairs_origin": pairs.origin,
            "columns": COLUMNS,
            "test_pairings": [{"noun": noun, "adjective": adjective, "order": order, "rows": rows}
                              for (noun, adjective, order), rows in sorted(per_pairing.items())],
            "train_pairings": [{"noun": pair.noun, "adjective": pair.adjective,
                                "with_adjective": counts.own_pairing[pair.noun], "bare": counts.bare_noun[pair.noun]}
                               for pair in pairs.pairs],
        },
    )

