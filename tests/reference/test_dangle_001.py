"""Dangle, R-Dangle_shr and R-Dangle_sep against 001's own code (mswellhao/Dangle @ 27223eb, imported as it is from
`<shared>/reference/dangle/fairseq`): transformer_rdangle_kv_shared.py at --chunk-size 1 (Dangle) and 2 (R-Dangle_shr,
our interval 2) and transformer_rdangle_kv_sep.py, built by their own option parser from run_react.sh's flags (tiny:
width 32, 2 cross-boundary layers of 8 heads, 1 source layer, 2 decoder layers; --shared-encoder-layers 0 and, for
kv_sep, --encoder-layers 0, the layers our entries have no counterpart of), on real ReaCT rows: the same weights give
the same logits in training mode (their teacher-forced pass over every re-encoding point) and in evaluation mode,
and one update with their criterion, clipping and Adam gives the same weights.

Our Dangles read one vocabulary through one table; their ReaCT runs have a German and an English dictionary and two
tables ([fidelity.mt] "embeddings"). Here both read one dictionary (ReaCT's German and English dictionaries joined);
for the logits their two tables both get our one, for the update they share one (--share-all-embeddings). Their
decoder starts from `</s>`, so ours is given `</s>` as its start (test_fairseq_transformer_001.py pins that).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from fairseq_001 import (OUR_NO_DROPOUT, encoded, import_fairseq, load_into, official_args, official_model,
                         official_state_dict, our_batch, ours, perturbed, their_batch)
from reference_code import default_dtype, reference_folder

from benchbuild.training.loop import _summed_loss

pytestmark = [pytest.mark.reference, pytest.mark.shared]

MODELS = ["dangle", "rdangle_shr", "rdangle_sep"]


@pytest.fixture(scope="module")
def official():
    return import_fairseq(reference_folder("dangle") / "fairseq")


@pytest.fixture(scope="module")
def dictionary(official):
    """ReaCT's German dictionary with the English one's words after it (fairseq's Dictionary, their ids)."""
    folder = reference_folder("dangle") / "ReaCT_data" / "bpe_data"
    joined = official.Dictionary.load(str(folder / "dict.de.txt"))
    english = official.Dictionary.load(str(folder / "dict.en.txt"))
    for index in range(english.nspecial, len(english)):
        joined.add_symbol(english[index], english.count[index])
    return joined


@pytest.fixture(scope="module")
def rows():
    """ReaCT test pairs of at most 16 pieces a side (the re-encoding pass grows with the square of the target)."""
    folder = reference_folder("dangle") / "ReaCT_data" / "bpe_data"
    sources, targets = ((folder / f"test.{side}").read_text().splitlines() for side in ("de", "en"))
    return [(s, t) for s, t in zip(sources, targets) if len(s.split()) <= 16 and len(t.split()) <= 16]


def paired(official, name, dictionary, extra: list[str] = (), seed: int = 0):
    """Ours (float64, dropout off, norms and distance tables perturbed) and theirs with the converted weights."""
    torch.manual_seed(seed)
    mine = perturbed(ours(name, dictionary, dictionary, OUR_NO_DROPOUT).double())
    args = official_args(official, name, extra=list(extra))
    with default_dtype(torch.float64):
        theirs = official_model(official, args, dictionary, dictionary)
    load_into(theirs, official_state_dict(mine))
    return mine, theirs, args


def forward(model, batch) -> torch.Tensor:
    return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                 decoder_input_ids=batch["decoder_input_ids"]).logits


@pytest.mark.parametrize("name", MODELS)
def test_the_same_weights_give_the_same_logits(official, dictionary, rows, name):
    """8 real rows (sources 4-16 pieces, left-padded in theirs, right-padded in ours; targets of 8-17 tokens, so
    rows re-encode different numbers of times), float64, dropout off, in evaluation and training mode: every logit
    at a real target position within 1e-6 (their attention's softmax runs in float32, fairseq's utils.softmax)."""
    mine, theirs, args = paired(official, name, dictionary)
    assert args.chunk_size == mine.config.interval
    split = encoded((dictionary, dictionary), rows[::50][:8])
    batch, theirs_batch = our_batch(split, dictionary), their_batch(official, split, dictionary)
    assert len(set(batch["attention_mask"].sum(1).tolist())) >= 6
    assert len(set(batch["decoder_attention_mask"].sum(1).tolist())) >= 5
    real = batch["labels"].ne(-100)
    for training in (False, True):
        mine.train(training)
        theirs.train(training)
        with torch.no_grad(), default_dtype(torch.float64):
            expected = theirs(**theirs_batch["net_input"])[0]
            assert (forward(mine, batch)[real] - expected[real]).abs().max().item() <= 1e-6


@pytest.mark.parametrize("name", ["dangle", "rdangle_sep"])
def test_an_update_with_their_settings_gives_the_same_weights(official, dictionary, rows, name):
    """(R-Dangle_shr's update runs Dangle's code at another interval, which the logits compare.) One update on 5 real
    rows of at most 12 pieces from the same weights (norms and tables perturbed by 3, so that the gradient norm
    exceeds the clip), float64, their side as run_react.sh's update runs in their code (label_smoothed_cross_entropy,
    ε 0.1, summed, the gradients divided by the token count, --clip-norm 2.0, their Adam with (0.9, 0.98), eps 1e-8,
    weight decay 1e-4, at lr 5e-4), ours with training's `_summed_loss` over the token count, torch's
    clip_grad_norm_ and their Adam (torch's AdamW moves gradient components near ε further:
    test_fairseq_transformer_001.py). Their clip_grad_norm_ refuses float64 under today's torch (a float32 norm);
    torch's, the same formula, runs in its place. Losses within 1e-6 relative, gradient norms within 1e-5 relative,
    every clipped gradient (norm 2) within 1e-5 (float32 rounding of both softmaxes, grown through the re-encoding),
    and every weight whose gradient component exceeds 1e-4 within 1e-6 (below that, that rounding decides Adam's
    first step)."""
    torch.manual_seed(0)
    mine = perturbed(ours(name, dictionary, dictionary, OUR_NO_DROPOUT).double(), scale=3.0).train()
    args = official_args(official, name, extra=["--share-all-embeddings"])
    assert (args.clip_norm, args.weight_decay, eval(args.adam_betas), args.label_smoothing) == (
        2.0, 1e-4, (0.9, 0.98), 0.1)
    with default_dtype(torch.float64):
        theirs = official_model(official, args, dictionary, dictionary).train()
    assert theirs.encoder.embed_tokens is theirs.decoder.embed_tokens
    load_into(theirs, official_state_dict(mine))
    adam = dict(lr=5e-4, betas=eval(args.adam_betas), eps=args.adam_eps, weight_decay=args.weight_decay)
    optimizers = [official.adam.Adam(model.parameters(), **adam) for model in (mine, theirs)]
    criterion = official.criterion.LabelSmoothedCrossEntropyCriterion(
        task=SimpleNamespace(target_dictionary=dictionary), sentence_avg=False, label_smoothing=args.label_smoothing)
    split = encoded((dictionary, dictionary), [row for row in rows[3::31] if len(row[1].split()) <= 12][:5])
    batch, theirs_batch = our_batch(split, dictionary), their_batch(official, split, dictionary)
    tokens = int(batch["labels"].ne(-100).sum())
    with default_dtype(torch.float64):
        their_loss, sample_size, _ = criterion(theirs, theirs_batch)
    assert sample_size == tokens
    loss = _summed_loss(forward(mine, batch), batch["labels"], SimpleNamespace(label_smoothing=args.label_smoothing))
    assert abs(loss.item() - their_loss.item()) <= 1e-6 * loss.item()
    norms = []
    for model, optimizer, value in ((mine, optimizers[0], loss), (theirs, optimizers[1], their_loss)):
        (value / tokens).backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_norm)))
    assert norms[1] > args.clip_norm and abs(norms[0] - norms[1]) <= 1e-5 * norms[1]
    gradients = {name_: parameter.grad.clone() for name_, parameter in theirs.named_parameters()}
    our_gradients = official_state_dict(mine, of=lambda parameter: parameter.grad)
    for optimizer in optimizers:
        optimizer.step()
    converted = official_state_dict(mine)
    for name_, parameter in theirs.named_parameters():
        assert (our_gradients[name_] - gradients[name_]).abs().max() <= 1e-5, name_
        clear = gradients[name_].abs() > 1e-4
        assert bool(((converted[name_] - parameter.detach())[clear].abs() <= 1e-6).all()), name_
