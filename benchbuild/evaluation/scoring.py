"""Score predictions against a benchmark split: every metric the split's columns allow, in one dictionary.

Used by `benchbuild eval` (predictions of a trained run) and `benchbuild score` (plain-text outputs of any system).
"""

from __future__ import annotations

import unicodedata

from pathlib import Path
from typing import Any, Mapping, Sequence

import sacrebleu

from benchbuild.benchmark import load_splits, read_build_info, split_rows_as_dicts
from benchbuild.errors import BenchbuildError
from benchbuild import metrics
from benchbuild.evaluation.cter import CONTEXTS_PER_COMPOUND, compound_verdicts, cter, read_compounds, read_lexicon
from benchbuild.evaluation.paper_bleu import FAMILY_BLEU, paper_bleu
from benchbuild.evaluation.uncertainty import ExampleIntervals
from benchbuild.text_files import read_text

COMP_COLUMNS = ("fr_noun", "fr_adjective", "order")
DEGREE_BUCKETS = 5


def score_rows(rows: Sequence[Mapping[str, Any]], predictions: Sequence[str], *, lexicon: str | Path | None = None,
               compounds: Sequence[str] | None = None, degree_buckets: int = DEGREE_BUCKETS,
               family: str | None = None, split: str = "test") -> dict[str, Any]:
    """Exact match, BLEU and chrF; BLEU as the papers on benchmark family `family` computed it (`paper_bleu`, where
    theirs is not ours: `evaluation.paper_bleu`); COMP where `fr_noun`/`fr_adjective`/`order` exist; BLEU by degree
    bucket where `degree` exists; CTER when a lexicon and the rows' compounds are given. Each number has its 95%
    bootstrap interval over the rows beside it (`exact_match_ci`, `bleu_ci`...; `uncertainty.ExampleIntervals`;
    a paper BLEU's inside its entry), each method naming the rows by their `split` ("16728 train rows").

    Predictions and references are compared in Unicode normal form NFC (metrics.json says so: `unicode_normalization`):
    a canonically equal prediction spelled in NFD ("e" + a combining accent for "é") scores as the same words."""
    if len(predictions) != len(rows):
        raise BenchbuildError(f"{len(predictions)} predictions for {len(rows)} rows")
    predictions = [unicodedata.normalize("NFC", prediction) for prediction in predictions]
    rows = [{**row, "target": unicodedata.normalize("NFC", row["target"])} for row in rows]
    references = [row["target"] for row in rows]
    columns = set(rows[0]) if rows else set()
    tokenize = metrics.bleu_tokenizer_for(references)
    exact_match = metrics.exact_match(predictions, references)
    intervals = ExampleIntervals(unit=f"{split} rows")
    intervals.add_share("exact_match", [metrics.normalize_whitespace(prediction) == metrics.normalize_whitespace(
        reference) for prediction, reference in zip(predictions, references)], intervals.unit)
    # BLEU and chrF with their intervals: one pass of sacrebleu's statistics serves the score and its resamples.
    bleu = intervals.add_sacrebleu("bleu", sacrebleu.BLEU(tokenize=tokenize), predictions, references)
    chrf = intervals.add_sacrebleu("chrf", sacrebleu.CHRF(), predictions, references)
    result: dict[str, Any] = {"rows": len(rows), "exact_match": exact_match, "bleu": bleu}
    if family in FAMILY_BLEU:
        result["paper_bleu"] = paper_bleu(family, predictions, rows)
    result["chrf"] = chrf
    if all(column in columns for column in COMP_COLUMNS):
        from benchbuild.evaluation import comp
        from benchbuild.french import FrenchLemmatizer

        # One spaCy load for the score and its interval; none for rows without pairs (train, validation).
        lemmatizer = (FrenchLemmatizer() if any(row.get(column) for row in rows for column in comp.REQUIRED_COLUMNS)
                      else None)
        result["comp"] = comp.comp_scores(list(predictions), list(rows), lemmatizer)
        if result["comp"] is not None:
            matches = comp.pairing_matches(predictions, rows, lemmatizer)
            intervals.add_share("comp", [match.has_both for match in matches], intervals.unit)
            intervals.add_share("order_accuracy", [match.order == row["order"] for match, row in zip(matches, rows)
                                                   if match.has_both], f"{intervals.unit} holding both lemmas")
    if "degree" in columns:
        result["bleu_by_degree"] = {
            "buckets": metrics.bleu_by_degree(predictions, references, [row["degree"] for row in rows],
                                              buckets=degree_buckets),
            "bucketing": f"rows sorted by degree, cut into {degree_buckets} equal-count buckets (001 Figure 1a); "
                         "each bucket's edges are its lowest and highest degree",
        }
    if lexicon is not None:
        compounds = compounds if compounds is not None else []
        atoms = read_lexicon(lexicon)
        result["cter"] = cter(predictions, compounds, atoms)
        verdicts = compound_verdicts(predictions, compounds, atoms)
        intervals.add_share("cter_instance", [not verdict for verdict in verdicts], intervals.unit)
        groups = len(verdicts) // CONTEXTS_PER_COMPOUND
        intervals.add_share("cter_aggregate", [not all(verdicts[start:start + CONTEXTS_PER_COMPOUND]) for start in
                                               range(0, groups * CONTEXTS_PER_COMPOUND, CONTEXTS_PER_COMPOUND)],
                            "compounds (their 5 contexts resampled together)")
    return {**intervals.beside(result), "unicode_normalization": "NFC"}


def score_file(data: str | Path, split: str, predictions: str | Path, *, lexicon: str | Path | None = None,
               compound: str | None = None) -> dict[str, Any]:
    """Score a plain-text file (one prediction a line, in the split's row order) against a benchmark split."""
    rows = split_rows(data, split)
    path = Path(predictions)
    if not path.is_file():
        raise BenchbuildError(f"{path}: no such predictions file")
    lines = read_text(path).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != len(rows):
        raise BenchbuildError(f"{path} has {len(lines)} lines but split {split!r} of {data} has {len(rows)} rows: "
                              "give one prediction per row, in row order")
    compounds = read_compounds(compound, rows) if lexicon is not None else None
    result = score_rows(rows, lines, lexicon=lexicon, compounds=compounds, family=read_build_info(data).family,
                        split=split)
    return {"benchmark": benchmark_label(data), "split": split, "predictions": str(path), **result}


def split_rows(data: str | Path, split: str) -> list[dict[str, Any]]:
    splits = load_splits(data)
    if split not in splits:
        raise BenchbuildError(f"{data} has no split {split!r} (splits: {', '.join(splits)})")
    return split_rows_as_dicts(splits[split])


def benchmark_label(data: str | Path) -> str:
    """`family/name` of a benchmark folder, as the catalogue's `[[reported]]` tables name it (`scan/simple`)."""
    info = read_build_info(data)
    return info.name if info.name.startswith(info.family + "/") else f"{info.family}/{info.name}"
