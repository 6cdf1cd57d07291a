"""The MT recipes as their authors ran them: 001's ReaCT recipes equal mswellhao/Dangle's run_react.sh key by key, every
MT recipe of the papers' entries decodes with beam 5 and uses Adam β₂ 0.98 as fairseq's examples do, and each one
says where it still differs (`[fidelity.<recipe>]`)."""

from __future__ import annotations

import pytest

from benchbuild.zoo.recipe import resolve_recipe
from benchbuild.zoo import load_entry
from benchbuild.zoo.catalogue import resolved_architecture
from benchbuild.zoo.decoding import fairseq_limit, length_rule

# mswellhao/Dangle run_react.sh, the flags its three fairseq-train / fairseq-generate calls share, as our keys:
# --optimizer adam --adam-betas '(0.9, 0.98)' --lr 5e-4 --lr-scheduler inverse_sqrt --warmup-updates 4000
# --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --clip-norm 2.0 --max-update 100000
# --weight-decay 0.0001 --eval-bleu --eval-bleu-args '{"beam": 5, "max_len_a": 1.2, "max_len_b": 10}'
# --best-checkpoint-metric bleu --maximize-best-checkpoint-metric; fairseq-generate --beam 5 --max-len-a 1.2 --max-len-b 10
RUN_REACT_RECIPE = {"steps": 100_000, "learning_rate": 5e-4, "schedule": "inverse_sqrt", "warmup_steps": 4000,
                    "label_smoothing": 0.1, "grad_clip": 2.0, "weight_decay": 1e-4, "adam_beta1": 0.9,
                    "adam_beta2": 0.98, "select": "best_validation", "validate_by": "bleu", "beam": 5,
                    "max_len_a": 1.2, "max_len_b": 10}
# --dropout 0.4 --activation-dropout 0.4 --attention-dropout 0.3 --max-relative-position 16
# --decoder-normalize-before --encoder-normalize-before
RUN_REACT_ARCHITECTURE = {"dropout": 0.4, "activation_dropout": 0.4, "attention_dropout": 0.3, "position": "shaw",
                          "max_relative_position": 16, "pre_norm": True}
# Per model: transformer_baseline (--max-tokens 8192, --encoder-layers 12 --decoder-layers 12), transformer_rdangle_kv_shared
# (--max-tokens 600 --update-freq 16) and transformer_rdangle_kv_separate (--max-tokens 600 --update-freq 4, 12 decoder layers).
PER_MODEL = {("transformer", "mt_001"): ({"batch_tokens": 8192, "update_freq": 1},
                                         {"encoder_layers": 12, "decoder_layers": 12}),
             ("dangle", "mt"): ({"batch_tokens": 600, "update_freq": 16}, {"decoder_layers": 12}),
             ("rdangle_shr", "mt"): ({"batch_tokens": 600, "update_freq": 16}, {"decoder_layers": 12}),
             ("rdangle_sep", "mt"): ({"batch_tokens": 600, "update_freq": 4}, {"decoder_layers": 12})}


@pytest.mark.parametrize("name, family", PER_MODEL)
def test_001s_react_recipes_equal_run_react_sh_key_by_key(name, family):
    entry = load_entry(name)
    recipe = resolve_recipe(entry.recipes, family).to_dict()
    architecture = resolved_architecture(entry, family)
    recipe_keys, architecture_keys = PER_MODEL[(name, family)]
    expected_recipe = {**RUN_REACT_RECIPE, **recipe_keys}
    assert {key: recipe[key] for key in expected_recipe} == expected_recipe
    expected_architecture = {**RUN_REACT_ARCHITECTURE, **architecture_keys}
    assert {key: architecture.get(key) for key in expected_architecture} == expected_architecture


# The MT recipes of the papers' entries and the fairseq example each follows: all decode with beam 5 (000 §5, 001's
# run_react.sh, CoGnition's scripts) and train with Adam (0.9, 0.98) (fairseq's IWSLT'14 and WMT'14 examples,
# run_react.sh, CoGnition's train.sh).
MT_RECIPES = [("transformer", "mt"), ("transformer", "nounadj"), ("transformer", "mt_001"), ("sag_t5", "mt"),
              ("sag_t5", "nounadj"), ("dangle", "mt"), ("rdangle_sep", "mt"), ("rdangle_shr", "mt"),
              ("fusion", "mt")]


@pytest.mark.parametrize("name, family", MT_RECIPES)
def test_every_mt_recipe_of_the_papers_decodes_with_beam_5_and_adam_beta2_0_98(name, family):
    recipe = resolve_recipe(load_entry(name).recipes, family)
    assert (recipe.beam, recipe.adam_beta1, recipe.adam_beta2) == (5, 0.9, 0.98)
    assert recipe.batch_tokens is not None  # fairseq batches by tokens (--max-tokens) in every one of them


@pytest.mark.parametrize("name, family", MT_RECIPES)
def test_every_mt_recipe_of_the_papers_lists_its_sources_and_differences(name, family):
    table = load_entry(name).fidelity.get(family)
    assert table is not None and table["sources"] and table["differences"], (name, family)


def test_the_papers_token_budgets_per_update():
    """Tokens an update sees, as each paper states it: 000 App. A.2 1,024 x 4 GPUs (IWSLT) and 4,000 x 6 GPUs
    (noun-adjective), CoGnition's train.sh "effective batch size: 4096 * 2" (004 §3.1: 8192)."""
    for name, family, tokens in [("transformer", "mt", 4096), ("transformer", "nounadj", 24_000),
                                 ("fusion", "mt", 8192), ("dangle", "mt", 9600)]:
        recipe = resolve_recipe(load_entry(name).recipes, family)
        assert recipe.batch_tokens * recipe.update_freq == tokens, name


def test_fairseqs_output_cap_is_a_times_the_padded_source_length_plus_b():
    # fairseq SequenceGenerator: max_len = int(1.2 * 7 + 10) = 18 tokens, then </s> forced.
    assert fairseq_limit(1.2, 10, 7) == 18
    assert fairseq_limit(0.0, 200, 50) == 200
    assert length_rule({"max_len_a": 1.2, "max_len_b": 10}) == (1.2, 10)
    assert length_rule({"max_len_a": 1.2, "max_len_b": None}) is None and length_rule({}) is None


def test_the_fidelity_section_names_every_difference_of_the_mt_recipes():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "catalogue.md").read_text(encoding="utf-8")
    start = re.search(r"^#+ Fidelity", text, re.MULTILINE).start()
    body = text.index("\n", start)
    following = re.search(r"^#+ ", text[body:], re.MULTILINE)  # the section ends at the next heading, or the page
    section = " ".join(text[start:body + following.start() if following else len(text)].split()).lower()
    missing = {(name, family, row["what"]) for name, family in MT_RECIPES
               for row in load_entry(name).fidelity[family]["differences"] if row["what"].lower() not in section}
    assert not missing, f"the Fidelity section of docs/catalogue.md does not name: {sorted(missing)}"
