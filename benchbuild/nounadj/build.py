"""Build the noun–adjective order benchmark: stream a parallel corpus, parse only sentences holding a target noun,
place each sentence by the split rules, check test references in French, and return a `Benchmark` (whose card's
prose is in `data_cards/nounadj.md.j2`).

Memory stays bounded on a 2-million-pair corpus: rows stream from the reader through the parser in line order, the
train-eligible rows are written in Arrow record batches (to a work folder when one is given) and the validation
sample is taken in a second streaming pass over them; only test rows (a few hundred) are held in memory.
"""

from __future__ import annotations

import sys
from collections import Counter, deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from benchbuild.benchmark import Benchmark, BuildInfo, CardFacts
from benchbuild.corpus import CorpusStats, ParallelInput
from benchbuild.engine import Engine
from benchbuild.errors import BenchbuildError
from benchbuild.nounadj.amod import noun_occurrences
from benchbuild.french import FrenchLemmatizer, find_pairing
from benchbuild.nounadj.pairs import PairsConfig, load_pairs
from benchbuild.nounadj.parameters import NounAdjParameters
from benchbuild.nounadj.parsers import MAX_PARSED_CHARACTERS, Parser, make_parser
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
_BATCH_ROWS = 8192
_PROGRESS_EVERY = 2000


@dataclass
class BuildCounts:
    """What happened to every corpus line, for the card."""

    parsed: int = 0
    unparsed_train: int = 0
    parsed_train: int = 0
    other_adjective: int = 0
    table_adjective: int = 0
    too_long: int = 0
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


def build_noun_adj(parameters: NounAdjParameters, *, workdir: Path | None = None, progress: bool = False,
                   parser: Parser | None = None, french: FrenchLemmatizer | None = None,
                   engine: Engine | None = None) -> Benchmark:
    """Build the benchmark. Input, pairs and models are all checked before the first line is parsed.

    `parser` and `french` may be given already loaded (to share models between builds); `workdir` holds the Arrow
    files of the large splits (they must outlive the returned Benchmark until it is saved). With a Dask `engine`,
    the candidate sentences are parsed by its workers (the rest of the build stays here); the benchmark is the same.
    """
    parameters.check()
    pairs = load_pairs(parameters.pairs)
    corpus = parameters.corpus()
    if corpus.hf is not None:  # a translation column is read by the pairs file's languages
        corpus = replace(corpus, source_lang=pairs.source_lang, target_lang=pairs.target_lang)
    total = corpus.validate()
    if total == 0:
        raise BenchbuildError(f"the corpus ({_described(corpus)}) is empty: give a parallel corpus with sentences")
    if parser is None:
        parser = make_parser(parameters.parser, spacy_model=parameters.spacy_model, stanza_dir=parameters.stanza_dir,
                             n_process=parameters.n_process, batch_size=parameters.batch_size, lang=pairs.source_lang,
                             engine=engine)
    if french is None:
        french = FrenchLemmatizer(batch_size=parameters.batch_size)

    stats, counts = CorpusStats(), BuildCounts()
    eligible = ArrowSink(workdir / "eligible.arrow" if workdir else None)
    test_rows = _stream_corpus(corpus, parameters, pairs, parser, stats, counts, eligible, total, progress)
    test_rows = _check_references(test_rows, french, counts)
    if parameters.require_reference_match:
        test_rows = [row for row in test_rows if row["reference_match"]]
    _check_not_empty(corpus, stats, counts)

    train, validation = _split_validation(eligible.finish(), parameters, workdir)
    if len(train) == 0:
        raise BenchbuildError(f"no sentence of the corpus ({_described(corpus)}) is train-eligible, so the train split "
                              "would be empty: give a larger corpus (or a lower --valid-fraction)")
    if workdir is not None:  # its rows now live in train.arrow and validation.arrow: halve the disk used
        (workdir / "eligible.arrow").unlink()
    splits = {"train": train, "validation": validation,
              "test": datasets.Dataset(pa.Table.from_pylist(test_rows, schema=FEATURES.arrow_schema))}
    info = BuildInfo.with_inputs(FAMILY, "noun-adjective-order", _recorded(parameters, pairs, parser, french),
                                 parameters.seed, _input_files(corpus, parameters))
    card = _card_facts(pairs, stats, counts, test_rows, splits)
    return Benchmark.from_splits(splits, info, card, FEATURES)


def _described(corpus: ParallelInput) -> str:
    return ", ".join(str(path) for path in corpus.files().values())


def _check_not_empty(corpus: ParallelInput, stats: CorpusStats, counts: BuildCounts) -> None:
    """Refuse a corpus that cannot give a test row: no pair with text, or no sentence holding a target noun."""
    if stats.pairs_kept == 0:
        raise BenchbuildError(f"the corpus ({_described(corpus)}) has no pair with text on both sides: give a "
                              "parallel corpus with sentences")
    if counts.parsed == 0:
        raise BenchbuildError(f"no sentence of the corpus ({_described(corpus)}) holds a target noun of the pairs, "
                              "so the test split would be empty: give a larger corpus (or a --pairs file whose nouns "
                              "it holds)")


def _stream_corpus(corpus: ParallelInput, parameters: NounAdjParameters, pairs: PairsConfig, parser: Parser,
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
            for read, (line, source, target) in enumerate(corpus.rows(encoding_errors=parameters.encoding_errors,
                                                                      stats=stats), start=1):
                if read % _PROGRESS_EVERY == 0:
                    advance(amount=line - shown)
                    shown = line
                if pattern.search(source):
                    if max(len(source), len(target)) > MAX_PARSED_CHARACTERS:
                        # Not a sentence (a whole unsplit document?); unparsed, it could hide a held-out pairing.
                        counts.too_long += 1
                        continue
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


def _split_validation(eligible: datasets.Dataset, parameters: NounAdjParameters,
                      workdir: Path | None) -> tuple[datasets.Dataset, datasets.Dataset]:
    """Exactly round(n × valid_fraction) seeded rows to validation, streaming over the eligible rows' batches."""
    mask = validation_mask(len(eligible), parameters.valid_fraction, np.random.default_rng(parameters.seed))
    train = ArrowSink(workdir / "train.arrow" if workdir else None)
    validation = ArrowSink(workdir / "validation.arrow" if workdir else None)
    offset = 0
    for batch in eligible.data.table.to_batches(_BATCH_ROWS):
        chosen = pa.array(mask[offset:offset + batch.num_rows])
        offset += batch.num_rows
        validation.add_batch(batch.filter(chosen))
        train.add_batch(batch.filter(pc.invert(chosen)))
    return train.finish(), validation.finish()


def _recorded(parameters: NounAdjParameters, pairs: PairsConfig, parser: Parser,
              french: FrenchLemmatizer) -> dict[str, Any]:
    """The parameters build.json and the card list (the corpus is recorded by its fingerprints)."""
    return {
        "pairs": str(parameters.pairs) if parameters.pairs else "Table 2 (default)",
        "source_lang": pairs.source_lang,
        "target_lang": pairs.target_lang,
        "parser": parameters.parser,
        "parser_model": parser.description,
        "french_model": french.description,
        "valid_fraction": parameters.valid_fraction,
        "require_reference_match": parameters.require_reference_match,
        "encoding_errors": parameters.encoding_errors,
        "n_process": parameters.n_process,
        "batch_size": parameters.batch_size,
    }


def _input_files(corpus: ParallelInput, parameters: NounAdjParameters) -> dict[str, Path]:
    files = dict(corpus.files())
    if parameters.pairs:
        files[f"pairs: {Path(parameters.pairs).name}"] = Path(parameters.pairs)
    return files


def _card_facts(pairs: PairsConfig, stats: CorpusStats, counts: BuildCounts, test_rows: list[dict[str, Any]],
                splits: dict[str, datasets.Dataset]) -> CardFacts:
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
        f"neither split: holds a target-noun form but a side is longer than {MAX_PARSED_CHARACTERS:,} characters "
        "(not parsed)": counts.too_long,
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
        languages=[pairs.source_lang, pairs.target_lang],
        license="other",
        counts=card_counts,
        extra={
            "pairs": pairs.as_table(),
            "pairs_origin": pairs.origin,
            "adjectives": {order: sorted(pairs.adjectives(order)) for order in ("backward", "forward")},
            "test_pairings": [{"noun": noun, "adjective": adjective, "order": order, "rows": rows}
                              for (noun, adjective, order), rows in sorted(per_pairing.items())],
            "train_pairings": [{"noun": pair.noun, "adjective": pair.adjective,
                                "with_adjective": counts.own_pairing[pair.noun], "bare": counts.bare_noun[pair.noun]}
                               for pair in pairs.pairs],
        },
    )
