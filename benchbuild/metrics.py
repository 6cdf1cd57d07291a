"""Corpus metrics over predictions and references: exact match, BLEU and chrF (sacrebleu, with signatures),
and BLEU by compositional-degree bucket (001 Figure 1a)."""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np
import sacrebleu

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def normalize_whitespace(text: str) -> str:
    return " ".join(text.split())


def exact_match(predictions: Sequence[str], references: Sequence[str]) -> float:
    """Sequence accuracy in percent: a prediction counts when it equals its reference up to whitespace."""
    _check_aligned(predictions, references)
    if not references:
        return 0.0
    hits = sum(normalize_whitespace(p) == normalize_whitespace(r) for p, r in zip(predictions, references))
    return 100.0 * hits / len(references)


def bleu_tokenizer_for(references: Sequence[str]) -> str:
    """sacrebleu's `zh` tokenizer (character-level on CJK) when most references are CJK text, else `13a`."""
    cjk = sum(bool(_CJK.search(reference)) for reference in references)
    return "zh" if references and cjk * 2 > len(references) else "13a"


def bleu(predictions: Sequence[str], references: Sequence[str], tokenize: str | None = None) -> dict[str, Any]:
    """Corpus BLEU with its sacrebleu signature."""
    _check_aligned(predictions, references)
    metric = sacrebleu.BLEU(tokenize=tokenize or bleu_tokenizer_for(references))
    score = metric.corpus_score(list(predictions), [list(references)])
    return {"score": score.score, "signature": str(metric.get_signature())}


def chrf(predictions: Sequence[str], references: Sequence[str]) -> dict[str, Any]:
    """Corpus chrF with its sacrebleu signature."""
    _check_aligned(predictions, references)
    metric = sacrebleu.CHRF()
    score = metric.corpus_score(list(predictions), [list(references)])
    return {"score": score.score, "signature": str(metric.get_signature())}


def bleu_by_degree(predictions: Sequence[str], references: Sequence[str], degrees: Sequence[float],
                   buckets: int = 5, tokenize: str | None = None) -> list[dict[str, Any]]:
    """BLEU per compositional-degree bucket: rows sorted by degree, cut into `buckets` groups of (nearly) equal
    size, as 001 Figure 1a computes each point on an equal number of examples. Each bucket states its edges (the
    lowest and highest degree inside it) and its row count."""
    _check_aligned(predictions, references)
    if len(degrees) != len(references):
        raise ValueError(f"{len(degrees)} degrees for {len(references)} references")
    tokenize = tokenize or bleu_tokenizer_for(references)
    order = np.argsort(np.asarray(degrees, dtype=float), kind="stable")
    result = []
    for group in np.array_split(order, min(buckets, len(order))):
        if len(group) == 0:
            continue
        values = [float(degrees[i]) for i in group]
        score = bleu([predictions[i] for i in group], [references[i] for i in group], tokenize=tokenize)
        result.append({"degree_min": min(values), "degree_max": max(values), "rows": len(group),
                       "bleu": score["score"]})
    return result


def _check_aligned(predictions: Sequence[str], references: Sequence[str]) -> None:
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references")
