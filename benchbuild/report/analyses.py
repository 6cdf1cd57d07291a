"""The numbers behind the report's figures, apart from any drawing: seed bands of learning curves, BLEU by
compositional-degree bucket (001 Figure 1a), COMP and order accuracy per noun–adjective pair (000 §5), the learned
relative-position preferences of `t5_bias` self-attention (000 App. C) and a benchmark folder's per-split degrees
and lengths."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from benchbuild.evaluation.comp import CompCounts, pairing_matches
from benchbuild.metrics import bleu_by_degree
from benchbuild.report.runs import Evaluation

# The per-head bias table of a `t5_bias` self-attention layer (`Attention.relative_bias` in zoo/transformer.py):
# heads × (2·span + 1), column k holding the bias of the signed distance i − j = k − span from query i to key j.
RELATIVE_BIAS = re.compile(r"^(encoder|decoder)_stack\.layers\.(\d+)\.mixer\.relative_bias$")


@dataclass(frozen=True)
class Band:
    """Seeds of one curve on a shared x grid: their mean and the lowest and highest of them at each x."""

    x: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray


def band(curves: Sequence[tuple[Sequence[float], Sequence[float]]], points: int = 50) -> Band | None:
    """The band of `curves` (x, y) over the x range they all cover, each interpolated linearly onto it; None for
    fewer than two curves or no shared range."""
    curves = [(np.asarray(x, dtype=float), np.asarray(y, dtype=float)) for x, y in curves if len(x)]
    if len(curves) < 2:
        return None
    start, end = max(x[0] for x, _ in curves), min(x[-1] for x, _ in curves)
    if not end > start:
        return None
    grid = np.linspace(start, end, points)
    values = np.stack([np.interp(grid, x, y) for x, y in curves])
    return Band(grid, values.mean(axis=0), values.min(axis=0), values.max(axis=0))


def degree_buckets(evaluation: Evaluation, rows: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]] | None:
    """BLEU per compositional-degree bucket of an evaluation: its `metrics.json`'s (`eval` scores them where the
    split has a `degree` column), else computed from its predictions and the split's rows; None when neither has
    what it needs."""
    recorded = evaluation.metrics.get("bleu_by_degree")
    if isinstance(recorded, dict) and recorded.get("buckets"):
        return list(recorded["buckets"])
    predictions = evaluation.predictions()
    if not rows or "degree" not in rows[0] or len(predictions) != len(rows):
        return None
    return bleu_by_degree([p["prediction"] for p in predictions], [row["target"] for row in rows],
                          [row["degree"] for row in rows])


@dataclass(frozen=True)
class PairScore:
    """COMP and order accuracy of one model's predictions on the test rows of one noun–adjective pair."""

    adjective: str
    noun: str
    order: str
    counts: CompCounts


def pair_scores(predictions: Sequence[str], rows: Sequence[Mapping[str, Any]], lemmatizer=None) -> list[PairScore]:
    """Per (adjective, noun, order) of the test rows, the COMP counts of `predictions` on its rows (000 §5's
    measure, split by pair), sorted by order, then adjective and noun."""
    matches = pairing_matches(predictions, rows, lemmatizer)
    counts: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for match, row in zip(matches, rows):
        tally = counts[(row["order"], row["adjective"], row["noun"])]
        tally[0] += 1
        tally[1] += match.has_both
        tally[2] += match.has_both and match.order == row["order"]
    return [PairScore(adjective, noun, order, CompCounts(*tally))
            for (order, adjective, noun), tally in sorted(counts.items())]


def has_pair_columns(rows: Sequence[Mapping[str, Any]] | None) -> bool:
    """Whether rows are noun–adjective test rows (every COMP column filled)."""
    columns = ("adjective", "noun", "fr_adjective", "fr_noun", "order")
    return bool(rows) and all(row.get(column) for row in rows for column in columns)


def relative_biases(weights: Path) -> dict[tuple[str, int], np.ndarray]:
    """Every `t5_bias` self-attention bias table in a `model.safetensors`, by (stack, layer); empty for models
    without one. Read with safetensors' numpy loader: no model is built."""
    from safetensors import safe_open

    found = {}
    with safe_open(str(weights), framework="np") as handle:
        for key in handle.keys():
            match = RELATIVE_BIAS.match(key)
            if match:
                found[(match.group(1), int(match.group(2)))] = np.asarray(handle.get_tensor(key), dtype=float)
    return dict(sorted(found.items(), key=lambda item: (item[0][0] != "encoder", item[0][1])))


def position_preferences(bias: np.ndarray, causal: bool) -> tuple[np.ndarray, np.ndarray]:
    """000 App. C's view of a bias table: per head, the softmax over offsets j − i of the key from the query (from
    −span to +span; a causal decoder's keys only at j − i ≤ 0). Returns (offsets, heads × offsets)."""
    span = (bias.shape[1] - 1) // 2
    # Column k holds distance i − j = k − span: reversed, the columns run over j − i = −span … span.
    by_offset = bias[:, ::-1]
    offsets = np.arange(-span, span + 1)
    if causal:
        by_offset, offsets = by_offset[:, : span + 1], offsets[: span + 1]
    shifted = np.exp(by_offset - by_offset.max(axis=1, keepdims=True))
    return offsets, shifted / shifted.sum(axis=1, keepdims=True)


def split_degrees(degrees: Mapping[str, Sequence[float | None]]) -> dict[str, np.ndarray]:
    """Each split's `degree` column as an array, rows without a degree dropped; splits left empty are left out."""
    arrays = {name: np.asarray([np.nan if value is None else value for value in values], dtype=float)
              for name, values in degrees.items()}
    return {name: values[~np.isnan(values)] for name, values in arrays.items() if (~np.isnan(values)).any()}


def split_lengths(texts: Mapping[str, tuple[Sequence[str], Sequence[str]]]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per split, from its (sources, targets): their lengths in whitespace tokens (SCAN: command words and actions)."""
    return {name: (np.asarray([len(text.split()) for text in sources]),
                   np.asarray([len(text.split()) for text in targets]))
            for name, (sources, targets) in texts.items() if len(sources)}
