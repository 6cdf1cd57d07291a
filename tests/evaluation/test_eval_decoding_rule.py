"""`eval` decodes as the run's recipe says (MT recipes: beam 5 and fairseq's max length a·|x| + b) unless `--beam`
says otherwise, and metrics.json records which beam and cap it used and where each came from."""

from __future__ import annotations

import json

import pytest
from small_inputs import WORDS, tiny_transformer_entry, word_lines, write_benchmark
from typer.testing import CliRunner

from benchbuild.cli import app
from benchbuild.training.tokenization import word_level_tokenizer
from benchbuild.zoo import build_model, load_entry
from benchbuild.zoo.decoding import generate_predictions

TINY_MT = tiny_transformer_entry("tiny_mt", "mt", steps=4, batch_tokens=64, learning_rate=1e-3, eval_every=4,
                                 select="last", beam=5, max_len_a=1.2, max_len_b=10)


@pytest.fixture(scope="module")
def mt_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mt")
    lines = word_lines(48, 5)
    rows = [{"id": str(i), "source": line, "target": " ".join(reversed(line.split()))} for i, line in enumerate(lines)]
    data = write_benchmark(folder / "bench", {"train": rows[:40], "test": rows[40:]}, "generic", "toy")
    entry = folder / "tiny_mt.toml"
    entry.write_text(TINY_MT, encoding="utf-8")
    trained = CliRunner().invoke(app, ["train", "--model", str(entry), "--data", str(data), "--out",
                                       str(folder / "run"), "--device", "cpu"])
    assert trained.exit_code == 0, trained.output
    return folder / "run", data


def test_eval_of_an_mt_run_decodes_with_the_recipes_beam_and_length_rule(mt_run):
    run, data = mt_run
    done = CliRunner().invoke(app, ["eval", "--run", str(run), "--data", str(data), "--device", "cpu"])
    assert done.exit_code == 0, done.output
    metrics = json.loads((run / "metrics.json").read_text())
    assert (metrics["beam"], metrics["beam_from"]) == (5, "recipe")
    assert (metrics["max_len_a"], metrics["max_len_b"], metrics["max_new_tokens"]) == (1.2, 10, None)


def test_eval_beam_option_replaces_the_recipes_beam_and_says_so(mt_run):
    run, data = mt_run
    done = CliRunner().invoke(app, ["eval", "--run", str(run), "--data", str(data), "--device", "cpu", "--beam",
                                    "1", "--out", str(run / "greedy")])
    assert done.exit_code == 0, done.output
    metrics = json.loads((run / "greedy" / "metrics.json").read_text())
    assert (metrics["beam"], metrics["beam_from"], metrics["max_len_b"]) == (1, "--beam", 10)


def test_the_length_rule_caps_each_batchs_outputs_at_a_times_its_longest_source_plus_b():
    """An untrained model rarely ends a sentence: its outputs run to the cap, int(a·|x| + b) tokens before `</s>`."""
    import torch

    tokenizer = word_level_tokenizer(WORDS)
    torch.manual_seed(0)
    model = build_model(load_entry("transformer"), vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                        overrides={"d_model": 16, "num_heads": 2, "d_ff": 32, "encoder_layers": 1,
                                   "decoder_layers": 1})
    sources = ["a b", "a b c d e f"]  # 3 and 7 tokens with </s>: one batch pads both to 7

    def longest(rule, batch_size):
        predictions = generate_predictions(model, tokenizer, sources, batch_size=batch_size, length_rule=rule)
        return [len(prediction.split()) for prediction in predictions]

    assert max(longest((0.0, 2), 2)) <= 2 and max(longest((0.5, 1), 2)) <= int(0.5 * 7 + 1)
    alone = longest((0.5, 1), 1)  # each sentence its own batch: caps int(0.5·3 + 1) = 2 and int(0.5·7 + 1) = 4
    assert alone[0] <= 2 and alone[1] <= 4
    assert max(longest((0.0, 9), 2)) > 2  # the cap, not the model, stopped the shorter outputs
