"""A recipe's `architecture` keys (`[recipe.mt.architecture]`) reach the trained model, under `train`'s overrides."""

import json

import pytest

from benchbuild.training.loop import train

pytestmark = pytest.mark.shared


@pytest.fixture
def sized_model(tiny_model, tmp_path):
    path = tmp_path / "sized.toml"
    sized = tiny_model.read_text().replace("[recipe.mt]", "[recipe.scan.architecture]\nd_ff = 48\n\n[recipe.mt]")
    path.write_text(sized)
    return path


def test_train_builds_the_recipes_architecture_and_records_it_in_the_identity(tiny_scan, sized_model, tmp_path):
    train(sized_model, tiny_scan, tmp_path / "run", device="cpu", progress=False, max_steps=1)
    assert json.loads((tmp_path / "run" / "config.json").read_text())["d_ff"] == 48
    assert json.loads((tmp_path / "run" / "run.json").read_text())["identity"]["architecture"]["d_ff"] == 48


def test_architecture_overrides_go_over_the_recipes(tiny_scan, sized_model, tmp_path):
    train(sized_model, tiny_scan, tmp_path / "run", device="cpu", progress=False, max_steps=1,
          architecture_overrides={"d_ff": 40})
    assert json.loads((tmp_path / "run" / "config.json").read_text())["d_ff"] == 40


@pytest.fixture
def two_paper_model(tiny_model, tmp_path):
    """The tiny entry with a second paper's SCAN recipe (`scan_000`, another d_ff) and a number it reports on the
    tiny benchmark (`scan/simple`) made with that recipe."""
    path = tmp_path / "two_papers.toml"
    text = tiny_model.read_text()
    scan = text[text.index("[recipe.scan]"):text.index("[recipe.mt]")]
    path.write_text(text + "\n" + scan.replace("[recipe.scan]", "[recipe.scan_000]")
                    + "[recipe.scan_000.architecture]\nd_ff = 40\n\n"
                    + '[[reported]]\nbenchmark = "scan/simple"\nrecipe = "scan_000"\nmetric = "exact_match"\n'
                    + 'value = 99.0\ntable = "000 Table 3"\n')
    return path


def test_set_architecture_adds_to_the_recipes_architecture_keys_instead_of_replacing_them(tiny_scan, sized_model,
                                                                                        tmp_path):
    """`--set architecture={...}` (a sweep's `[set] architecture`) goes over the recipe's table key by key: before,
    it replaced the table, and 000's `scan_000` Transformer with `architecture={init="fairseq"}` lost its 4 + 4
    layers (issue #33)."""
    train(sized_model, tiny_scan, tmp_path / "run", device="cpu", progress=False, max_steps=1,
          overrides={"architecture": {"d_model": 24}})
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (config["d_ff"], config["d_model"]) == (48, 24)


def test_000s_transformer_keeps_its_recipes_sizes_under_an_architecture_override():
    from benchbuild.zoo.recipe import resolve_recipe
    from benchbuild.zoo import load_entry

    recipe = resolve_recipe(load_entry("transformer").recipes, "scan_000", {"architecture": {"span": 2}})
    assert recipe.architecture == {"d_model": 128, "d_ff": 256, "num_heads": 8, "encoder_layers": 4,
                                   "decoder_layers": 4, "dropout": 0.1, "attention_dropout": 0.1,
                                   "activation_dropout": 0.0, "init": "fairseq", "span": 2}


def test_a_run_takes_the_recipe_its_benchmarks_reported_number_was_made_with(tiny_scan, two_paper_model, tmp_path):
    train(two_paper_model, tiny_scan, tmp_path / "run", device="cpu", progress=False, max_steps=1)
    assert json.loads((tmp_path / "run" / "run.json").read_text())["recipe_family"] == "scan_000"
    assert json.loads((tmp_path / "run" / "config.json").read_text())["d_ff"] == 40
    train(two_paper_model, tiny_scan, tmp_path / "other", device="cpu", progress=False, max_steps=1, recipe="scan")
    assert json.loads((tmp_path / "other" / "config.json").read_text())["d_ff"] == 64  # `recipe` chooses another


def test_the_run_folders_model_card_states_size_recipe_selection_and_the_papers_number(tiny_scan, two_paper_model,
                                                                                       tmp_path):
    from benchbuild.zoo.loading import load_model

    train(two_paper_model, tiny_scan, tmp_path / "run", device="cpu", progress=False, max_steps=2)
    card = (tmp_path / "run" / "README.md").read_text()
    model = load_model(tmp_path / "run")
    count = sum(parameter.numel() for parameter in model.parameters())
    assert f"- **parameters**: {count:,} " in card
    assert f"- **vocabulary**: {model.config.vocab_size:,} tokens" in card
    assert "| `d_ff` | `40` |" in card and "| `encoder_layers` | `1` |" in card
    assert "- **recipe**: `scan_000`" in card and "- **selection**: `best_validation` by validation exact match; the weights here are step" in card
    assert ("| scan/simple | exact_match | 99.0 | 000 Table 3 | `scan_000` (this run) | not comparable: trained 2 of "
            in card)
    assert card.startswith("---\nlibrary_name: transformers\n")


def test_the_model_card_says_whether_the_run_was_made_as_the_papers_number_and_what_differs(tiny_scan,
                                                                                           two_paper_model, tmp_path):
    train(two_paper_model, tiny_scan, tmp_path / "full", device="cpu", progress=False)
    card = (tmp_path / "full" / "README.md").read_text()
    assert "| `scan_000` (this run) | made as the paper's number |" in card
    train(two_paper_model, tiny_scan, tmp_path / "shrunk", device="cpu", progress=False,
          architecture_overrides={"d_model": 16, "num_heads": 2})
    card = (tmp_path / "shrunk" / "README.md").read_text()
    assert ("| `scan_000` (this run) | not comparable: architecture changed: d_model = 16, num_heads = 2 |"
            in card)
