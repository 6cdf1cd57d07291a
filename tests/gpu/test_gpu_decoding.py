"""Incremental decoding on CUDA: every cached zoo Transformer decodes with its key/value cache exactly what it decodes
recomputing the prefix. The same checks on CPU, with the same briefly trained models, are
tests/zoo/test_incremental_decoding.py, whose helpers these reuse."""

from __future__ import annotations

import copy

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU and torch sees none here (benchmarks/gpu/run.sh runs these on a GPU machine)",
                allow_module_level=True)

from test_incremental_decoding import BY_CACHED, VOCAB, briefly_trained, sources
from tiny_zoo import BOS

pytestmark = pytest.mark.gpu


def on_cuda(name: str):
    """The CPU tests' briefly trained model `name`, copied to the GPU (the cached CPU model stays where it is)."""
    return copy.deepcopy(briefly_trained(name)).to("cuda").eval()


def generate(model, use_cache: bool, **options) -> torch.Tensor:
    input_ids, attention_mask = sources()
    with torch.no_grad():
        return model.generate(input_ids=input_ids.to("cuda"), attention_mask=attention_mask.to("cuda"),
                              do_sample=False, use_cache=use_cache, **options)


@BY_CACHED
@pytest.mark.parametrize("beams", [1, 3])
def test_cached_generate_on_cuda_equals_uncached_generate(entry, beams, ieee_float32):
    model = on_cuda(entry.name)
    fixed = {"num_beams": beams, "min_length": 12, "max_length": 12}  # 11 steps, past every span and conv window
    cached = generate(model, True, **fixed)
    assert cached.is_cuda and cached.shape == (5, 12) and len(set(cached[:, 1:].flatten().tolist())) > 3
    assert torch.equal(cached, generate(model, False, **fixed))
    free = {"num_beams": beams, "max_length": 10}  # rows end where the model predicts EOS
    assert torch.equal(generate(model, True, **free), generate(model, False, **free))


@BY_CACHED
def test_cached_steps_on_cuda_reproduce_the_logits_of_one_full_pass(entry, ieee_float32):
    """Three tokens at once, two more, then one at a time: every position's logits match one uncached pass."""
    model = on_cuda(entry.name)
    input_ids, attention_mask = (tensor.to("cuda") for tensor in sources())
    target = torch.cat([torch.full((5, 1), BOS), torch.randint(3, VOCAB, (5, 9),
                                                               generator=torch.Generator().manual_seed(2))], 1)
    target = target.to("cuda")
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
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-4, atol=1e-4)
