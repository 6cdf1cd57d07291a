"""Stage 7 of ReaCT: reverse mutual information and the ensemble's decoding and batched scoring."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from benchbuild.react.uncertainty import (GPU_SCORE_BUDGET, SCORE_BUDGET, Ensemble, ensemble_rmi, mean_log_probs,
                                         reverse_mutual_information, score_budget)
from benchbuild.training.tokenization import word_level_tokenizer
from benchbuild.zoo.transformer import TransformerConfig, TransformerForSeq2Seq


def test_two_member_example_by_hand():
    p1, p2 = [0.5, 0.5], [0.9, 0.1]
    mean = [0.7, 0.3]
    expected = sum(mean[v] * (math.log(mean[v]) - (math.log(p1[v]) + math.log(p2[v])) / 2) for v in range(2))
    kl = lambda p, q: sum(a * math.log(a / b) for a, b in zip(p, q))  # noqa: E731
    assert expected == pytest.approx((kl(mean, p1) + kl(mean, p2)) / 2)
    log_probs = torch.tensor([[p1], [p2]], dtype=torch.float64).log()
    assert reverse_mutual_information(log_probs).item() == pytest.approx(expected, rel=1e-12)
    # 0.7·(ln .7 − (ln .5 + ln .9)/2) + 0.3·(ln .3 − (ln .5 + ln .1)/2) = 0.02981 + 0.08817
    assert expected == pytest.approx(0.11797, abs=1e-5)


def test_zero_when_all_members_agree():
    distribution = torch.softmax(torch.randn(4, 7, 11, generator=torch.Generator().manual_seed(0)), dim=-1).log()
    agreeing = distribution.expand(5, 4, 7, 11)
    assert torch.allclose(reverse_mutual_information(agreeing), torch.zeros(4, 7), atol=1e-6)


@settings(max_examples=50, deadline=None)
@given(members=st.integers(1, 6), vocabulary=st.integers(2, 9), seed=st.integers(0, 10_000),
       temperature=st.floats(0.1, 20.0))
def test_never_negative(members, vocabulary, seed, temperature):
    logits = torch.randn(members, 3, vocabulary, generator=torch.Generator().manual_seed(seed)) * temperature
    rmi = reverse_mutual_information(torch.log_softmax(logits, dim=-1))
    assert (rmi >= 0).all()


def test_mean_log_probs_is_the_log_of_the_average_distribution():
    log_probs = torch.log_softmax(torch.randn(3, 5, generator=torch.Generator().manual_seed(1)), dim=-1)
    assert torch.allclose(mean_log_probs(log_probs).exp(), log_probs.exp().mean(dim=0), atol=1e-6)


TEXTS = ["a b c d", "e f g", "a c e g h", "b d f", "h g"]


@pytest.fixture(scope="module")
def tiny_members():
    """Three tiny Transformers (seeds 0-2, no dropout) trained for 8 steps to copy TEXTS: far enough that their
    greedy and beam translations of every text end in `</s>`, not so far that beam search finds nothing better than
    greedy decoding or that the members agree (their RMI stays above 0)."""
    tokenizer = word_level_tokenizer(TEXTS)
    encoded = tokenizer(TEXTS, return_tensors="pt", padding=True)
    labels = encoded["input_ids"].masked_fill(encoded["attention_mask"] == 0, -100)
    members = []
    for seed in range(3):
        torch.manual_seed(seed)
        config = TransformerConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                   bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                                   d_model=16, num_heads=2, d_ff=32, encoder_layers=1, decoder_layers=1,
                                   dropout=0.0, attention_dropout=0.0)
        member = TransformerForSeq2Seq(config)
        optimizer = torch.optim.Adam(member.parameters(), lr=0.01)
        for _ in range(8):
            member(**encoded, labels=labels).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        members.append(member.eval())
    return members, tokenizer


def test_batched_members_score_exactly_like_a_loop_over_members(tiny_members):
    members, tokenizer = tiny_members
    batched, looped = Ensemble(members, tokenizer, batched=True), Ensemble(members, tokenizer, batched=False)
    hypotheses = [[5, 6, 2], [7, 2], [5, 5, 5, 5, 2], [2], [8, 9, 2]]
    assert torch.allclose(batched.score(TEXTS, hypotheses), looped.score(TEXTS, hypotheses), atol=1e-5)
    assert batched.translate(TEXTS, beam=3, max_new_tokens=6) == looped.translate(TEXTS, beam=3, max_new_tokens=6)


def test_greedy_follows_the_argmax_of_the_mean_distribution(tiny_members):
    members, tokenizer = tiny_members
    ensemble = Ensemble(members, tokenizer)
    [hypothesis] = ensemble.translate(["a b c d"], beam=1, max_new_tokens=5)
    encoded = tokenizer(["a b c d"], return_tensors="pt")
    prefix = [tokenizer.bos_token_id]
    with torch.no_grad():
        for _ in range(5):
            decoder = torch.tensor([prefix])
            averaged = torch.stack([torch.softmax(member(**encoded, decoder_input_ids=decoder).logits[0, -1], dim=-1)
                                    for member in members]).mean(dim=0)
            prefix.append(int(averaged.argmax()))
            if prefix[-1] == tokenizer.eos_token_id:
                break
    assert hypothesis == prefix[1:]


def test_beam_search_finds_a_hypothesis_at_least_as_likely_as_greedy(tiny_members):
    members, tokenizer = tiny_members
    ensemble = Ensemble(members, tokenizer)

    def normalized_log_prob(source, hypothesis):
        input_ids, mask = ensemble._source_batch([source])
        decoder = torch.tensor([[tokenizer.bos_token_id, *hypothesis[:-1]]])
        log_p = mean_log_probs(ensemble.member_log_probs(ensemble.encode(input_ids, mask), mask, decoder))[0]
        return sum(log_p[t, token].item() for t, token in enumerate(hypothesis)) / len(hypothesis)

    gains = []
    for source in TEXTS:
        [greedy] = ensemble.translate([source], beam=1, max_new_tokens=6)
        [beam] = ensemble.translate([source], beam=4, max_new_tokens=6)
        assert greedy[-1] == beam[-1] == tokenizer.eos_token_id, source  # both finished: their scores compare
        gains.append(normalized_log_prob(source, beam) - normalized_log_prob(source, greedy))
    assert min(gains) >= -1e-5, gains
    assert max(gains) > 1e-3, f"beam search never beat greedy decoding here: {gains}"


def test_ensemble_rmi_keeps_input_order_and_is_deterministic(tiny_members):
    members, tokenizer = tiny_members
    ensemble = Ensemble(members, tokenizer)
    first, hypotheses = ensemble_rmi(ensemble, TEXTS, beam=2, batch_size=2, max_new_tokens=6)
    again, _ = ensemble_rmi(ensemble, list(reversed(TEXTS)), beam=2, batch_size=3, max_new_tokens=6)
    assert first == pytest.approx(list(reversed(again)), abs=1e-5)
    assert all(value > 0 for value in first)
    single = ensemble.score([TEXTS[2]], [hypotheses[2]])
    assert single.item() == pytest.approx(first[2], abs=1e-5)


def test_members_with_a_cache_decode_one_token_a_step_and_find_what_recomputing_the_prefix_finds(tiny_members):
    members, tokenizer = tiny_members
    cached = Ensemble(members, tokenizer, batched=False)
    recomputing = Ensemble(members, tokenizer, batched=False)
    recomputing.caches = False
    assert cached.caches  # the zoo Transformer keeps a key/value cache
    fed: list[int] = []
    hooks = [member.embedding.register_forward_hook(lambda module, args, output: fed.append(args[0].size(1)))
             for member in members]
    try:
        for beam in (1, 3):
            fed.clear()
            hypotheses = cached.translate(TEXTS, beam=beam, max_new_tokens=12)
            decoder_inputs = [width for width in fed if width != max(len(ids) for ids in tokenizer(TEXTS)["input_ids"])]
            assert set(decoder_inputs) == {1}  # past the encoder, every member call reads one new token
            assert hypotheses == recomputing.translate(TEXTS, beam=beam, max_new_tokens=12)
    finally:
        for hook in hooks:
            hook.remove()


def test_the_scoring_budget_is_the_cpus_on_cpu_and_grows_with_a_gpus_free_memory_up_to_its_cap():
    """On an H200 the CPU's budget cut 10 `mt` members to batches of 2 sentences (24x slower than 64): on a GPU a batch
    may take a sixteenth of the free memory per float32 copy, within [SCORE_BUDGET, GPU_SCORE_BUDGET]."""
    assert score_budget("cpu") == score_budget(torch.device("cpu"), free_bytes=10**12) == SCORE_BUDGET == 2 ** 24
    gib = 2 ** 30
    assert score_budget("cuda:0", free_bytes=140 * gib) == GPU_SCORE_BUDGET == 2 ** 28  # an H200: capped at 1 GiB
    assert score_budget("cuda", free_bytes=8 * gib) == 8 * gib // 64 == 2 ** 27  # 8 GiB free: 512 MiB a copy
    assert score_budget("cuda", free_bytes=gib // 2) == SCORE_BUDGET  # never below the CPU's
