"""Score predictions against a benchmark split: every metric the split's columns allow, in one dictionary.

Used by `benchbuild eval` (predictions of a trained run) and `benchbuild score` (plain-text outputs of any system).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from benchbuild.benchmark import load_splits, read_build_info
from benchbuild.errors import BenchbuildError
from benchbuild import metrics
from benchbuild.evaluation.cter import cter, read_compounds, read_lexicon

COMP_COLUMNS = ("fr_noun", "fr_adjective", "order")
DEGREE_BUCKETS = 5


def score_rows(rows: Sequence[Mapping[str, Any]], predictions: Sequence[str], *, lexicon: str | Path | None = None,
               compounds: Sequence[str] | None = None, degree_buckets: int = DEGREE_BUCKETS) -> dict[str, Any]:
    """Exact match, BLEU and chrF; COMP where `fr_noun`/`fr_adjective`/`order` exist; BLEU by degree bucket where
    `degree` exists; CTER when a lexicon and the rows' compounds are given."""
    if len(predictions) != len(rows):
        raise BenchbuildError(f"{len(predictions)} predictions for {len(rows)} rows")
    references = [row["target"] for row in rows]
    columns = set(rows[0]) if rows else set()
    result: dict[str, Any] = {
        "rows": len(rows),
        "exact_match": metrics.exact_match(predictions, references),
        "bleu": metrics.bleu(predictions, references),
        "chrf": metrics.chrf(predictions, references),
    }
    if all(column in columns for column in COMP_COLUMNS):
        from benchbuild.evaluation import comp

        result["comp"] = comp.comp_scores(list(predictions), list(rows))
    if "degree" in columns:
        result["bleu_by_degree"] = {
            "buckets": metrics.bleu_by_degree(predictions, references, [row["degree"] for row in rows],
                                              buckets=degree_buckets),
            "bucketing": f"rows sorted by degree, cut into {degree_buckets} equal-count buckets (001 Figure 1a); "
                         "each bucket's edges are its lowest and highest degree",
        }
    if lexicon is not None:
        result["cter"] = cter(predictions, compounds if compounds is not None else [], read_lexicon(lexicon))
    return result


def score_file(data: str | Path, split: str, predictions: str | Path, *, lexicon: str | Path | None = None,
               compound: str | None = None) -> dict[str, Any]:
    """Score a plain-text file (one prediction a line, in the split's row order) against a benchmark split."""
    rows = split_rows(data, split)
    path = Path(predictions)
    if not path.is_file():
        raise BenchbuildError(f"{path}: no such predictions file")
    lines = path.read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != len(rows):
        raise BenchbuildError(f"{path} has {len(lines)} lines but split {split!r} of {data} has {len(rows)} rows: "
                              "give one prediction per row, in row order")
    compounds = read_compounds(compound, rows) if lexicon is not None else None
    result = score_rows(rows, lines, lexicon=lexicon, compounds=compounds)
    return {"benchmark": benchmark_label(data), "split": split, "predictions": str(path), **result}


def split_rows(data: str | Path, split: str) -> list[dict[str, Any]]:
    splits = load_splits(data)
    if split not in splits:
        raise BenchbuildError(f"{data} has no split {split!r} (splits: {', '.join(splits)})")
    return list(splits[split])


def benchmark_label(data: str | Path) -> str:
    """`family/name` of a benchmark folder, as the catalogue's `[[reported]]` tables name it (`scan/simple`)."""
    info = read_build_info(data)
    return info.name if info.name.startswith(info.family + "/") else f"{info.family}/{info.name}"
