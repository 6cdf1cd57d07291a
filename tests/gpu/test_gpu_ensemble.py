"""The ReaCT ensemble on CUDA: its members stacked into one `vmap`ped pass (the default on a GPU) decode and score
like the member-by-member loop, and like the CPU (tests/react/test_react_uncertainty.py checks stacked against the
loop on CPU)."""

from __future__ import annotations

import copy

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU and torch sees none here (benchmarks/gpu/run.sh runs these on a GPU machine)",
                allow_module_level=True)

from benchbuild.react.uncertainty import Ensemble, ensemble_rmi
from benchbuild.training.tokenization import build_tokenizer
from benchbuild.zoo import build_model, load_entry

pytestmark = [pytest.mark.gpu, pytest.mark.shared]

SMALL = {"d_model": 64, "num_heads": 4, "d_ff": 128, "encoder_layers": 2, "decoder_layers": 2}


@pytest.fixture(scope="module")
def members_and_sources(shared_data):
    """Four zoo Transformers of different seeds over a BPE vocabulary of the IWSLT14 German and English, and 40
    German sentences of ReaCT's cg_test to translate."""
    react = shared_data / "react"
    read = lambda name: (react / name).read_text(encoding="utf-8").splitlines()
    tokenizer = build_tokenizer(read("valid.de")[:3000] + read("valid.en")[:3000], "bpe", 1000)
    entry = load_entry("transformer")
    members = []
    for seed in range(4):
        torch.manual_seed(seed)
        members.append(build_model(entry, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                   bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                                   overrides=SMALL).eval())
    return members, tokenizer, read("cg_test.de")[:40]


def ensemble(members, tokenizer, device: str, batched: bool | None = None) -> Ensemble:
    """An ensemble of copies of `members` (an Ensemble moves its members to its device)."""
    return Ensemble([copy.deepcopy(member) for member in members], tokenizer, device=device, batched=batched)


def test_stacked_members_on_cuda_decode_and_score_like_the_member_loop_and_the_cpu(members_and_sources,
                                                                                    ieee_float32):
    members, tokenizer, sources = members_and_sources
    stacked = ensemble(members, tokenizer, "cuda")
    looped = ensemble(members, tokenizer, "cuda", batched=False)
    assert stacked.batched and not looped.batched  # stacking is the default on a GPU

    rmi, hypotheses = ensemble_rmi(stacked, sources, beam=3, batch_size=16, max_new_tokens=12)
    looped_rmi, looped_hypotheses = ensemble_rmi(looped, sources, beam=3, batch_size=16, max_new_tokens=12)
    assert looped_hypotheses == hypotheses
    assert looped_rmi == pytest.approx(rmi, abs=1e-5)
    assert all(value > 0 for value in rmi)

    on_cpu = ensemble(members, tokenizer, "cpu", batched=False)
    assert on_cpu.score(sources, hypotheses).tolist() == pytest.approx(rmi, abs=1e-4)
    scored = stacked.score(sources, hypotheses)
    assert scored.device.type == "cpu" and scored.tolist() == pytest.approx(rmi, abs=1e-5)
