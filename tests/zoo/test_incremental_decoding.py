"""Incremental decoding: the Transformer's key/value cache gives exactly what recomputing the prefix gives."""

from __future__ import annotations

from functools import cache

import pytest
import torch
from transformers import AutoModelForSeq2SeqLM

from benchbuild.zoo import load_entry
from benchbuild.zoo.dangle import DangleConfig
from benchbuild.zoo.transformer import TransformerConfig
from tiny_zoo import BOS, ENTRIES, EOS, PAD, zoo_network

VOCAB = 30
CACHED = [entry for entry in ENTRIES if entry.architecture["kind"] == "transformer"]
BY_CACHED = pytest.mark.parametrize("entry", CACHED, ids=[entry.name for entry in CACHED])
# Switch settings no catalogue entry uses, on top of the entry named first.
EXTRA_SWITCHES = [("transformer", {"position": "none"}), ("transformer", {"pre_norm": True}),
                  ("relative_transformer", {"pre_norm": True}), ("sag_conv", {"span": 1, "pre_norm": True}),
                  ("fusion", {"universal": True}), ("sag_t5", {"init": "fairseq"})]


def sources() -> tuple[torch.Tensor, torch.Tensor]:
    """Five random sources of up to 7 tokens, two of them right-padded."""
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(3, VOCAB, (5, 7), generator=generator)
    ids[0, 5:] = PAD
    ids[2, 3:] = PAD
    return ids, ids.ne(PAD).long()


def reversal_rows(count: int = 64) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask, labels): random sources of 3-7 tokens whose target is the source reversed."""
    generator = torch.Generator().manual_seed(4)
    lengths = torch.randint(3, 8, (count,), generator=generator)
    ids = torch.randint(3, VOCAB, (count, 7), generator=generator)
    ids = ids.masked_fill(torch.arange(7)[None, :] >= lengths[:, None], PAD)
    labels = torch.full((count, 8), -100)
    for row, length in enumerate(lengths.tolist()):
        labels[row, :length] = ids[row, :length].flip(0)
        labels[row, length] = EOS
    return ids, ids.ne(PAD).long(), labels


@cache
def briefly_trained(name: str):
    """A tiny model after 60 steps on reversal: untrained ones repeat one token, which would hide a wrong cache."""
    model = zoo_network(load_entry(name), VOCAB)
    input_ids, attention_mask, labels = reversal_rows()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    for _ in range(60):
        loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


def generate(model, use_cache: bool, **options) -> torch.Tensor:
    input_ids, attention_mask = sources()
    with torch.no_grad():
        return model.generate(input_ids=input_ids, attention_mask=attention_mask, do_sample=False,
                              use_cache=use_cache, **options)


def test_transformer_variants_cache_by_default_and_dangle_does_not():
    assert all(zoo_network(entry, VOCAB).config.use_cache is True for entry in CACHED)
    assert all(zoo_network(entry, VOCAB).generation_config.use_cache is True for entry in CACHED)
    for name in ("dangle", "rdangle_sep", "lstm_attention", "syntactic_attention"):
        assert zoo_network(load_entry(name), VOCAB).config.use_cache is False
    assert TransformerConfig(use_cache=False).use_cache is False
    assert DangleConfig(use_cache=True).use_cache is False


@BY_CACHED
@pytest.mark.parametrize("beams", [1, 3])
def test_cached_generate_equals_uncached_generate(entry, beams):
    model = briefly_trained(entry.name)
    fixed = dict(num_beams=beams, min_length=12, max_length=12)  # 11 steps, past every span and conv window
    cached = generate(model, True, **fixed)
    assert cached.shape == (5, 12) and len(set(cached[:, 1:].flatten().tolist())) > 3
    assert torch.equal(cached, generate(model, False, **fixed))
    free = dict(num_beams=beams, max_length=10)  # rows end where the model predicts EOS
    assert torch.equal(generate(model, True, **free), generate(model, False, **free))


@pytest.mark.parametrize("name, switches", [(entry.name, {}) for entry in CACHED] + EXTRA_SWITCHES,
                         ids=[entry.name for entry in CACHED] + [f"{n}-{'-'.join(s)}" for n, s in EXTRA_SWITCHES])
def test_cached_steps_reproduce_the_logits_of_one_full_pass(name, switches):
    """Three tokens at once, two more, then one at a time: every position's logits match one uncached pass."""
    model = zoo_network(load_entry(name), VOCAB, **switches).eval()
    input_ids, attention_mask = sources()
    target = torch.cat([torch.full((5, 1), BOS), torch.randint(3, VOCAB, (5, 9),
                                                               generator=torch.Generator().manual_seed(2))], 1)
    with torch.no_grad():
        full = model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=target).logits
        encoded = model.encode(input_ids, attention_mask)
        step = model(encoder_outputs=encoded, attention_mask=attention_mask, decoder_input_ids=target[:, :3],
                     use_cache=True)
        pieces, past = [step.logits], step.past_key_values
        for start, end in [(3, 5)] + [(position, position + 1) for position in range(5, target.size(1))]:
            step = model(encoder_outputs=encoded, attention_mask=attention_mask,
                         decoder_input_ids=target[:, start:end], past_key_values=past, use_cache=True)
            pieces.append(step.logits)
    assert past.get_seq_length() == target.size(1)
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["transformer", "relative_universal_transformer", "sag_conv"])
def test_cached_generate_feeds_one_token_per_step_and_projects_the_encoder_output_once(name):
    model = zoo_network(load_entry(name), VOCAB).eval()
    fed, projected = [], []
    model.embedding.register_forward_hook(lambda module, args, output: fed.append(args[0].size(1)))
    for layer in model.decoder_stack.layers:
        layer.cross_attention.key.register_forward_hook(lambda module, args, output: projected.append(1))
    generate(model, True, min_length=8, max_length=8)
    encoder_calls = 1
    assert fed[encoder_calls:] == [1] * 7
    assert len(projected) == model.decoder_stack.count  # once per depth, universal layers included
    fed.clear()
    generate(model, False, min_length=8, max_length=8)
    assert fed[encoder_calls:] == list(range(1, 8))


@pytest.mark.parametrize("name", ["dangle", "rdangle_shr", "lstm_attention", "syntactic_attention"])
def test_models_without_a_cache_decode_the_same_when_asked_to_use_one(name):
    model = zoo_network(load_entry(name), VOCAB).eval()
    for beams in (1, 3):
        options = dict(num_beams=beams, min_length=6, max_length=6)
        assert torch.equal(generate(model, True, **options), generate(model, False, **options))


def test_a_saved_transformer_loads_with_its_cache_switched_on(tmp_path):
    zoo_network(load_entry("sag_t5"), VOCAB).save_pretrained(tmp_path)
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    assert loaded.config.use_cache is True and loaded.generation_config.use_cache is True
    options = dict(num_beams=3, min_length=9, max_length=9)
    assert torch.equal(generate(loaded, True, **options), generate(loaded, False, **options))
