import math

import pytest

from benchbuild.errors import BenchbuildError
from benchbuild.zoo.recipe import recipe_family_for, resolve_recipe

RECIPES = {"scan": {"steps": 100, "batch_size": 8, "learning_rate": 1e-3, "schedule": "inverse_sqrt",
                    "warmup_steps": 4}, "mt": {"steps": 10, "batch_size": 2, "learning_rate": 5e-4,
                                               "bpe_vocab_size": 800}}


def test_overrides_replace_catalogue_values_and_the_tokenizer_follows_the_family():
    recipe = resolve_recipe(RECIPES, "scan", {"steps": 7, "label_smoothing": 0.1})
    assert (recipe.steps, recipe.batch_size, recipe.label_smoothing) == (7, 8, 0.1)
    assert recipe.tokenizer_kind == "word"
    assert resolve_recipe(RECIPES, "mt").tokenizer_kind == "bpe"


def test_unknown_keys_are_errors_naming_the_key():
    with pytest.raises(BenchbuildError, match="'lr'"):
        resolve_recipe(RECIPES, "scan", {"lr": 0.1})
    with pytest.raises(BenchbuildError, match="'momentum'"):
        resolve_recipe({"scan": {**RECIPES["scan"], "momentum": 0.9}}, "scan")
    with pytest.raises(BenchbuildError, match=r"\[recipe.mt\]"):
        resolve_recipe({"scan": RECIPES["scan"]}, "mt")
    with pytest.raises(BenchbuildError, match="schedule"):
        resolve_recipe(RECIPES, "scan", {"schedule": "cosine"})


def test_inverse_sqrt_warms_up_linearly_then_decays_and_constant_stays_flat():
    recipe = resolve_recipe(RECIPES, "scan")
    factors = [recipe.learning_rate_factor(step) for step in range(16)]
    assert factors[:4] == [0.25, 0.5, 0.75, 1.0]
    assert factors[15] == pytest.approx(math.sqrt(4 / 16))
    constant = resolve_recipe(RECIPES, "scan", {"schedule": "constant", "warmup_steps": 0})
    assert {constant.learning_rate_factor(step) for step in range(10)} == {1.0}


def test_recipe_family_defaults_from_the_benchmark_family():
    assert recipe_family_for("scan") == "scan"
    assert recipe_family_for("nounadj") == "mt"
    assert recipe_family_for("react") == "mt"


def test_a_misspelt_recipe_name_gets_the_nearest_one():
    with pytest.raises(BenchbuildError, match=r"unknown recipe 'mt001': did you mean 'mt_001'\? \(recipes: scan, "):
        resolve_recipe({"mt_001": {}}, "mt001")
