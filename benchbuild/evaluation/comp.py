"""COMP (000 §5) and order accuracy of predictions on the noun–adjective order benchmark.

COMP is the share of predictions that contain both the target French adjective and the target French noun, matched
by lemma (`fr_core_news_sm`, batched) or regular inflection, so *nouvelle / nouveau / nouvel / nouvelles /
nouveaux* all count. Order accuracy (beyond the paper) is, among those predictions, the share whose adjective stands
on the side the row's `order` says (`forward`: before the noun; `backward`: after it), judged on the closest
adjective–noun pair.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from benchbuild.errors import BenchbuildError
from benchbuild.french import FrenchLemmatizer, PairingMatch, find_pairing

REQUIRED_COLUMNS = ("fr_adjective", "fr_noun", "order")


@dataclass(frozen=True)
class CompCounts:
    """How many predictions were scored, held both lemmas, and (of those) had the adjective on the right side."""

    rows: int
    with_both: int
    right_order: int

    @property
    def comp(self) -> float:
        """COMP in percent (0 for no rows)."""
        return 100.0 * self.with_both / self.rows if self.rows else 0.0

    @property
    def order_accuracy(self) -> float | None:
        """Order accuracy in percent among predictions holding both lemmas; None when there are none."""
        return 100.0 * self.right_order / self.with_both if self.with_both else None


def pairing_matches(predictions: Sequence[str], rows: Sequence[Mapping[str, Any]],
                    lemmatizer: FrenchLemmatizer | None = None) -> list[PairingMatch]:
    """Per prediction: whether it holds both target lemmas and on which side its adjective stands."""
    if len(predictions) != len(rows):
        raise BenchbuildError(f"{len(predictions)} predictions for {len(rows)} rows")
    for number, row in enumerate(rows, start=1):
        missing = [column for column in REQUIRED_COLUMNS if not row.get(column)]
        if missing:
            raise BenchbuildError(f"row {number} has no {missing[0]!r}: COMP needs a noun–adjective test split "
                                  f"(columns {', '.join(REQUIRED_COLUMNS)})")
    if not rows:
        return []
    lemmatizer = lemmatizer if lemmatizer is not None else FrenchLemmatizer()
    return [find_pairing(tokens, row["fr_adjective"], row["fr_noun"])
            for tokens, row in zip(lemmatizer.tokens(predictions), rows, strict=True)]


def comp_counts(predictions: Sequence[str], rows: Sequence[Mapping[str, Any]],
                lemmatizer: FrenchLemmatizer | None = None) -> CompCounts:
    """COMP and order-accuracy counts of `predictions` against rows with `fr_adjective`, `fr_noun` and `order`."""
    matches = pairing_matches(predictions, rows, lemmatizer)
    return CompCounts(rows=len(matches), with_both=sum(match.has_both for match in matches),
                      right_order=sum(match.has_both and match.order == row["order"]
                                      for match, row in zip(matches, rows)))


def comp_scores(predictions: Sequence[str], rows: Sequence[Mapping[str, Any]],
                lemmatizer: FrenchLemmatizer | None = None) -> dict[str, Any] | None:
    """COMP and order accuracy (percent) with their counts, as a JSON-ready dictionary for metrics files.

    None for rows that carry the columns but no values: train and validation share the test split's schema with
    nulls there, and COMP is defined on test rows only.
    """
    if rows and not any(row.get(column) for row in rows for column in REQUIRED_COLUMNS):
        return None
    counts = comp_counts(predictions, rows, lemmatizer)
    return {"comp": counts.comp, "order_accuracy": counts.order_accuracy, "rows": counts.rows,
            "counts": {"with_both": counts.with_both, "right_order": counts.right_order}}
