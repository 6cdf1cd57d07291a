"""Which recipe trains a run: the catalogue entry's recipe for the benchmark, with the run's overrides."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Iterable, Mapping

from benchbuild.errors import BenchbuildError, did_you_mean
from benchbuild.papers import reported_on
from benchbuild.toml_schema import check_table, from_table
from benchbuild.training.validation import rows_trained_on
from benchbuild.zoo.recipe import RECIPE_FAMILIES, TrainingRecipe, layered

# Benchmark families whose sequences are whitespace-tokenized command languages; everything else is MT.
SCAN_LIKE_FAMILIES = frozenset({"scan"})


def recipe_family_for(benchmark_family: str) -> str:
    """Default recipe of a benchmark family: `scan` for SCAN-like data, `mt` for natural language."""
    return "scan" if benchmark_family in SCAN_LIKE_FAMILIES else "mt"


def default_recipe(recipes: Mapping[str, Any], reported: Iterable[Mapping[str, Any]], benchmark_family: str,
                   benchmark_name: str, splits: Iterable[str] = ()) -> str:
    """The recipe a run of an entry (its `recipes` and `[[reported]]` rows) trains with on a benchmark, unless `train`
    is given one: the recipe of the entry's reported number on this benchmark (`reported_on`), so a run reproduces
    the paper's setup (`transformer` on `scan/addprim_jump`: 000's `scan_000`); else the entry's recipe named for the
    benchmark family (`nounadj`); else `recipe_family_for` (`scan` for SCAN-like data, `mt` otherwise)."""
    for row in reported:
        if row.get("recipe") and reported_on(str(row["benchmark"]), benchmark_family, benchmark_name, splits):
            return str(row["recipe"])
    return benchmark_family if benchmark_family in recipes else recipe_family_for(benchmark_family)


def resolve_recipe(recipes: Mapping[str, Mapping[str, Any]], family: str, overrides: Mapping[str, Any] | None = None,
                   *, source: str = "the catalogue entry") -> TrainingRecipe:
    """The typed recipe `recipes[family]` with `overrides` applied; unknown keys are an error naming the key."""
    if family not in RECIPE_FAMILIES:
        raise BenchbuildError(f"unknown recipe {family!r}: {did_you_mean(family, RECIPE_FAMILIES)}(recipes: "
                              f"{', '.join(RECIPE_FAMILIES)})")
    if family not in recipes:
        have = ", ".join(sorted(recipes)) or "none"
        raise BenchbuildError(f"{source} has no [recipe.{family}] table (it has: {have})")
    overrides = check_table(TrainingRecipe, overrides or {}, "the recipe overrides", complete=False,
                            noun="recipe key")
    return from_table(TrainingRecipe, layered(recipes[family], overrides), source, f"[recipe.{family}]",
                      noun="recipe key")


def planned_steps(recipe: TrainingRecipe, split_rows: Mapping[str, int], validation_split: str | None = None,
                  token_batches: int | None = None) -> int:
    """The step budget of a run of `recipe` on a benchmark whose splits have `split_rows` rows (validating on
    `validation_split`, else as `train` chooses): `steps`, or, when the recipe sets `epochs`, ceil(epochs × rows
    trained on / batch_size), the rows trained on being train's less those held out to validate on; with
    `batch_tokens`, ceil(epochs × `token_batches` / update_freq), `token_batches` being the token batches of an
    epoch (`epoch_in_token_batches`)."""
    if recipe.epochs is None:
        return recipe.steps
    return _epochs_in_steps(recipe.epochs, recipe, split_rows, validation_split, token_batches)


def validation_interval(recipe: TrainingRecipe, split_rows: Mapping[str, int],
                        validation_split: str | None = None, token_batches: int | None = None) -> int:
    """Steps between validations: `eval_every`, or, when the recipe sets `eval_every_epochs`, ceil(eval_every_epochs ×
    rows trained on / batch_size) (with `batch_tokens`: × `token_batches` / update_freq)."""
    if recipe.eval_every_epochs is None:
        return recipe.eval_every
    return _epochs_in_steps(recipe.eval_every_epochs, recipe, split_rows, validation_split, token_batches)


def epoch_in_token_batches(recipe: TrainingRecipe) -> bool:
    """Whether the recipe counts a budget or an interval in epochs of token batches: how many steps they are is
    known only once the rows trained on are tokenized and packed (`planned_steps`' `token_batches`)."""
    return recipe.batch_tokens is not None and (recipe.epochs is not None or recipe.eval_every_epochs is not None)


def _epochs_in_steps(epochs: float, recipe: TrainingRecipe, split_rows: Mapping[str, int],
                     validation_split: str | None, token_batches: int | None) -> int:
    # In exact arithmetic on the number as written: 1.1 epochs of 800 rows in batches of 16 are 55 steps, not the 56
    # that floating point (1.1 × 800 / 16 = 55.00000000000001) would round up to.
    if recipe.batch_tokens is not None:
        if token_batches is None:
            raise ValueError("a recipe of epochs in token batches needs the token batches of an epoch")
        return max(1, math.ceil(Fraction(str(epochs)) * token_batches / recipe.update_freq))
    rows = rows_trained_on(split_rows, validation_split, recipe.held_out, recipe.select)
    return max(1, math.ceil(Fraction(str(epochs)) * rows / recipe.batch_size))
