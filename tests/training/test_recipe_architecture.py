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
