"""Which recipe trains a run: the catalogue entry's table for the benchmark's family, with the run's overrides."""

from __future__ import annotations

from typing import Any, Mapping

from benchbuild.errors import BenchbuildError
from benchbuild.toml_schema import check_table, from_table
from benchbuild.zoo.recipe import RECIPE_FAMILIES, TrainingRecipe

# Benchmark families whose sequences are whitespace-tokenized command languages; everything else is MT.
SCAN_LIKE_FAMILIES = frozenset({"scan"})


def recipe_family_for(benchmark_family: str) -> str:
    """Default recipe of a benchmark family: `scan` for SCAN-like data, `mt` for natural language."""
    return "scan" if benchmark_family in SCAN_LIKE_FAMILIES else "mt"


def resolve_recipe(recipes: Mapping[str, Mapping[str, Any]], family: str, overrides: Mapping[str, Any] | None = None,
                   *, source: str = "the catalogue entry") -> TrainingRecipe:
    """The typed recipe `recipes[family]` with `overrides` applied; unknown keys are an error naming the key."""
    if family not in RECIPE_FAMILIES:
        raise BenchbuildError(f"unknown recipe family {family!r}: choose one of {', '.join(RECIPE_FAMILIES)}")
    if family not in recipes:
        have = ", ".join(sorted(recipes)) or "none"
        raise BenchbuildError(f"{source} has no [recipe.{family}] table (it has: {have})")
    overrides = check_table(TrainingRecipe, overrides or {}, "the recipe overrides", complete=False,
                            noun="recipe key")
    return from_table(TrainingRecipe, {**recipes[family], **overrides}, source, f"[recipe.{family}]",
                      noun="recipe key")
