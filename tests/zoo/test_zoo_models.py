"""Behaviour every catalogue model shares: it learns, decodes causally, generates, saves and loads."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForSeq2SeqLM

from tiny_zoo import BOS, ENTRIES, EOS, exact_match, zoo_network, train_until_exact

pytestmark = pytest.mark.shared
BY_NAME = pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])


@BY_NAME
def test_learns_thirty_scan_rows_to_full_exact_match(entry, scan_rows):
    model = zoo_network(entry, len(scan_rows.vocabulary))
    accuracy, steps = train_until_exact(model, scan_rows)
    assert accuracy == 1.0, f"{entry.name}: {accuracy:.0%} after {steps} steps"
    assert exact_match(model, scan_rows, num_beams=3) == 1.0


@BY_NAME
def test_decoder_output_at_step_t_ignores_later_target_tokens(entry, scan_rows):
    model = zoo_network(entry, len(scan_rows.vocabulary)).eval()
    input_ids, attention_mask, labels = scan_rows.batch()
    decoder_ids = model.prepare_decoder_input_ids_from_labels(labels)
    changed = decoder_ids.clone()
    changed[:, 3:] = torch.randint(3, len(scan_rows.vocabulary), changed[:, 3:].shape, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        before = model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_ids).logits
        after = model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=changed).logits
    torch.testing.assert_close(before[:, :3], after[:, :3])
    if entry.architecture["kind"] == "syntactic_attention":  # 002 Eq. 3: its decoder reads no target word at all
        torch.testing.assert_close(before, after)
    else:
        assert not torch.allclose(before[:, 3:], after[:, 3:])


@BY_NAME
def test_greedy_generate_equals_a_step_by_step_argmax_loop(entry, scan_rows):
    model = zoo_network(entry, len(scan_rows.vocabulary)).eval()
    input_ids, attention_mask, _ = scan_rows.batch()
    input_ids, attention_mask = input_ids[:6], attention_mask[:6]
    with torch.no_grad():
        generated = model.generate(input_ids=input_ids, attention_mask=attention_mask, max_length=9,
                                   do_sample=False, num_beams=1)
        prefix = torch.full((input_ids.size(0), 1), BOS)
        finished = torch.zeros(input_ids.size(0), dtype=torch.bool)
        for _ in range(8):
            logits = model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=prefix).logits
            token = logits[:, -1].argmax(-1)
            token = token.masked_fill(finished, model.config.pad_token_id)
            prefix = torch.cat([prefix, token[:, None]], dim=1)
            finished |= token.eq(EOS)
            if finished.all():
                break
    assert generated.tolist() == prefix.tolist()


@BY_NAME
def test_save_then_load_gives_identical_logits(entry, scan_rows, tmp_path):
    model = zoo_network(entry, len(scan_rows.vocabulary)).eval()
    input_ids, attention_mask, labels = scan_rows.batch()
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file()
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is type(model)
    with torch.no_grad():
        expected = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        got = loaded(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    assert torch.equal(expected.logits, got.logits)
    assert torch.equal(expected.loss, got.loss)


@BY_NAME
def test_loss_is_mean_token_cross_entropy_over_unmasked_labels(entry, scan_rows):
    model = zoo_network(entry, len(scan_rows.vocabulary)).eval()
    input_ids, attention_mask, labels = scan_rows.batch()
    with torch.no_grad():
        output = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    keep = labels.ne(-100)
    log_probs = output.logits.log_softmax(-1)
    expected = -log_probs.gather(-1, labels.clamp(min=0)[..., None])[..., 0][keep].mean()
    assert output.logits.shape == (*labels.shape, len(scan_rows.vocabulary))
    torch.testing.assert_close(output.loss, expected)
