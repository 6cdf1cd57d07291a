"""`tie_output = false`: fairseq's default output layer (a projection of its own, d → vocabulary without bias, drawn
N(0, d^-1/2) by `TransformerDecoder.build_output_projection`), which 000's SCAN models had (issue #33); the default
stays tied to the decoder's embedding table."""

from __future__ import annotations

import json

import pytest
import torch
from tiny_zoo import zoo_network

from benchbuild.errors import BenchbuildError
from benchbuild.zoo import load_entry
from benchbuild.zoo.transformer import TransformerConfig

VOCAB = 40


def network(name: str = "sag_t5", **extra):
    return zoo_network(load_entry(name), VOCAB, d_model=64, d_ff=128, **extra)


def test_the_default_stays_tied_and_draws_what_it_drew():
    default, tied = network(), network(tie_output=True)
    assert default.output_projection is None and default.output_weight is default.embedding.weight
    assert default.state_dict().keys() == tied.state_dict().keys()
    assert all(torch.equal(default.state_dict()[key], tied.state_dict()[key]) for key in default.state_dict())


def test_an_untied_model_has_an_output_projection_drawn_as_fairseq_draws_it():
    model = network(init="fairseq", tie_output=False)
    projection = model.output_projection
    assert projection.weight.shape == (VOCAB, 64) and projection.bias is None
    assert projection.weight.std().item() == pytest.approx(64 ** -0.5, rel=0.1)  # N(0, d^-1/2), 40 x 64 draws
    assert abs(projection.weight.mean().item()) < 0.02
    assert not torch.equal(projection.weight, model.embedding.weight)
    tied = sum(p.numel() for p in network(init="fairseq").parameters())
    assert sum(p.numel() for p in model.parameters()) == tied + VOCAB * 64


def test_the_untied_projection_alone_makes_the_logits():
    model = network(init="fairseq", tie_output=False).eval()
    inputs = dict(input_ids=torch.tensor([[5, 6, 7, 2]]), decoder_input_ids=torch.tensor([[1, 8, 9]]))
    with torch.no_grad():
        before = model(**inputs).logits
        model.output_projection.weight[11] = 0.0
        after = model(**inputs).logits
    assert torch.all(after[..., 11] == 0) and torch.equal(after[..., 12], before[..., 12])
    assert not torch.equal(before[..., 11], after[..., 11])
    with torch.no_grad():  # the embedding of an id no input uses changes no logit: it is not the output layer
        model.embedding.weight[13] += 1.0
        assert torch.equal(model(**inputs).logits, after)


def test_a_zoo_drawn_untied_projection_is_glorot_and_dangle_unties_too():
    bound = (6 / (64 + VOCAB)) ** 0.5
    weight = network(tie_output=False).output_projection.weight.detach().abs()
    assert bound * 0.9 < weight.max().item() <= bound
    dangle = zoo_network(load_entry("dangle"), VOCAB, tie_output=False)
    assert dangle.output_projection is not None and dangle.output_weight is dangle.output_projection.weight


def test_tie_output_takes_a_boolean():
    with pytest.raises(BenchbuildError, match="tie_output = 'no' must be true or false"):
        TransformerConfig(tie_output="no")


@pytest.mark.shared
def test_an_untied_run_with_separate_dictionaries_trains_saves_and_decodes_alike_after_reloading(tiny_scan, tmp_path):
    """fairseq's SCAN defaults together (separate dictionaries, untied output layer) through `train`: the run's
    config records the switch, the safetensors checkpoint holds the projection, and the reloaded model gives the
    same logits."""
    from benchbuild.training.loop import train
    from benchbuild.zoo.loading import load_model

    run = tmp_path / "run"
    train("sag_t5", tiny_scan, run, device="cpu", progress=False, max_steps=2,
          overrides={"dictionaries": "separate", "architecture": {"tie_output": False, "d_model": 32, "d_ff": 64,
                                                                   "encoder_layers": 1, "decoder_layers": 1}})
    config = json.loads((run / "config.json").read_text())
    assert config["tie_output"] is False and config["source_vocab_size"] is not None
    model = load_model(run).eval()
    assert model.output_projection.weight.shape == (config["vocab_size"], 32)
    inputs = dict(input_ids=torch.tensor([[3, 4, 2]]), decoder_input_ids=torch.tensor([[1, 3]]))
    again = load_model(run).eval()
    with torch.no_grad():
        assert torch.equal(model(**inputs).logits, again(**inputs).logits)
    assert not torch.equal(model.output_projection.weight, model.embedding.weight)
