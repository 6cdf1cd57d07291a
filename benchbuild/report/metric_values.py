"""The numbers a run's `metrics.json` gives the report's tables: each headline metric as one number (percentages or
BLEU points; each BLEU a paper computed its own way, `paper_bleu`, as `bleu_<way>`) and its 95% bootstrap interval
over the test rows."""

from __future__ import annotations

from typing import Any

from benchbuild.evaluation import paper_bleu


def headline_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """The single numbers of a `metrics.json` that a table shows (percentages or BLEU points); each BLEU of
    `paper_bleu` (BLEU as a paper computed it) as `bleu_<way>`."""
    numbers = {"exact_match": metrics.get("exact_match"),
               "bleu": (metrics.get("bleu") or {}).get("score"),
               **{paper_bleu.WAYS[way].metric: entry.get("value") for way, entry in _paper_bleus(metrics).items()},
               "chrf": (metrics.get("chrf") or {}).get("score")}
    comp = metrics.get("comp")
    if isinstance(comp, dict):
        numbers.update({key: value for key, value in comp.items() if isinstance(value, (int, float))
                        and not isinstance(value, bool) and key not in ("rows", "n", "count")})
    elif isinstance(comp, (int, float)):
        numbers["comp"] = comp
    if isinstance(metrics.get("cter"), dict):
        numbers["cter_instance"] = metrics["cter"]["instance"]
        numbers["cter_aggregate"] = metrics["cter"]["aggregate"]
    return {key: float(value) for key, value in numbers.items() if value is not None}


def _paper_bleus(metrics: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """metrics.json's `paper_bleu` entries of the ways benchbuild knows (none in one written before it existed)."""
    found = metrics.get("paper_bleu")
    return {way: entry for way, entry in found.items() if way in paper_bleu.WAYS and isinstance(entry, dict)} \
        if isinstance(found, dict) else {}


def example_interval(metrics: dict[str, Any], metric: str) -> list[float] | None:
    """A metric's 95% bootstrap interval over the test rows in `metrics` (`<metric>_ci`; a paper BLEU's `ci`)."""
    way = metric.removeprefix("bleu_")
    if metric.startswith("bleu_") and way in paper_bleu.WAYS:
        return _paper_bleus(metrics).get(way, {}).get("ci")
    return metrics.get(f"{metric}_ci")
