"""The zoo's `syntactic_attention` against 002's own code (jlrussin/syntactic_attention @ f8219ca, imported as it is
from `<shared>/reference/syntactic_attention/`): the same weights give the same log-probabilities, the same loss and
the same greedy actions, one Adam step with train_test.py's settings gives the same weights, 200 updates follow the
same loss curve, and the initial draw is theirs.

Our model reads one shared vocabulary (`zoo --model syntactic_attention` lists it); theirs an instruction and an
action vocabulary. The converter maps each of their rows to the row of the same token in ours, and their `<SOS>` /
`<EOS>` to our `<s>` / `</s>`. Their softmax runs over the 8 rows of their action vocabulary; ours, under the
architecture key `output_vocabulary = "targets"`, over the tokens training finds in the train targets with `<s>` and
`</s>` (`training.plan.output_tokens`): the same 8 tokens, so the loss is theirs
(`test_our_loss_is_theirs_and_the_shared_vocabulary_one_is_not`).
"""

from __future__ import annotations

import functools
import json

import pytest
import torch
import torch.nn.functional as F
from reference_code import default_dtype, import_reference, reference_folder
from small_inputs import shared_root
from scipy import stats

from benchbuild.training.plan import RunOptions, output_tokens
from benchbuild.training.tokenization import word_level_tokenizer
from benchbuild.zoo import build_model, load_entry

pytestmark = [pytest.mark.reference, pytest.mark.shared]

SPECIAL = {"<SOS>": "<s>", "<EOS>": "</s>", "<NULL>": "<pad>"}


@pytest.fixture(scope="module")
def official():
    folder = reference_folder("syntactic_attention")
    model_module = import_reference(folder, "SyntacticAttention", "reference_002_model")
    data_module = import_reference(folder, "data", "reference_002_data")
    vocab = json.loads((folder / "vocab.json").read_text())
    return model_module, data_module, vocab


@pytest.fixture(scope="module")
def scan_files(official):
    folder = shared_root() / "data" / "scan" / "add_prim_split"
    return folder / "tasks_train_addprim_jump.txt", folder / "tasks_test_addprim_jump.txt"


@pytest.fixture(scope="module")
def tokenizer(scan_files):
    """Our word tokenizer over the sources and targets of the add-jump training file, as `train` builds it."""
    texts = []
    for line in scan_files[0].read_text().splitlines():
        source, target = line[len("IN: "):].split(" OUT: ")
        texts += [source, target]
    return word_level_tokenizer(texts)


@functools.cache
def _scored_tokens(tokenizer, scan_file) -> tuple[int, ...]:
    rows = []
    for line in scan_file.read_text().splitlines():
        source, target = line[len("IN: "):].split(" OUT: ")
        rows.append({"source": source, "target": target})
    return tuple(output_tokens(load_entry("syntactic_attention"), RunOptions(), tokenizer, rows))


def scored_tokens(tokenizer, scan_file) -> list[int]:
    """What training's plan makes the output layer score (`output_tokens`) on the add-jump training file (computed
    once per tokenizer: the draw test builds many models)."""
    return list(_scored_tokens(tokenizer, scan_file))


def ours(tokenizer, dropout: float = 0.0, **overrides):
    """Our model as training builds it: its softmax over the train targets' tokens (`output_tokens`)."""
    train_file = shared_root() / "data" / "scan" / "add_prim_split" / "tasks_train_addprim_jump.txt"
    return build_model(load_entry("syntactic_attention"), vocab_size=len(tokenizer),
                       pad_token_id=tokenizer.pad_token_id,
                       bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                       overrides={"dropout": dropout, "output_tokens": scored_tokens(tokenizer, train_file),
                                  **overrides})


def our_ids(tokenizer, tokens_to_idx: dict) -> torch.Tensor:
    """For each of their ids in order, the id of the same token in our vocabulary."""
    by_index = sorted(tokens_to_idx.items(), key=lambda item: item[1])
    return torch.tensor([tokenizer.convert_tokens_to_ids(SPECIAL.get(token, token)) for token, _ in by_index])


def official_state_dict(model, tokenizer, vocab) -> dict[str, torch.Tensor]:
    """Our parameters under their names and shapes: the converter."""
    into, out = our_ids(tokenizer, vocab["in_token_to_idx"]), our_ids(tokenizer, vocab["out_token_to_idx"])
    state = {"encoder.W_m.weight": model.translation_embedding.weight[into],
             "encoder.W_x.weight": model.alignment_embedding.weight[into],
             "encoder.SOS_embed.weight": model.start_role.weight, "encoder.EOS_embed.weight": model.end_role.weight,
             "encoder.fc0.weight": model.initial_query.weight, "encoder.fc0.bias": model.initial_query.bias,
             "decoder.out.weight": model.output.weight[out], "decoder.out.bias": model.output.bias[out]}
    for theirs, mine in (("encoder.rnn1", model.context_lstm), ("encoder.rnn2", model.alignment_lstm),
                         ("decoder.rnn", model.decoder_lstm)):
        state.update({f"{theirs}.{name}": parameter for name, parameter in mine.named_parameters()})
    return {name: tensor.detach().clone() for name, tensor in state.items()}


def official_model(official, vocab, dropout: float = 0.0, max_len=None):
    model_module = official[0]
    return model_module.Seq2SeqSynAttn(len(vocab["in_token_to_idx"]), 120, 200, len(vocab["out_token_to_idx"]), "LSTM",
                                       1, dropout, False, False, False, max_len, torch.device("cpu"))


def official_rows(official, vocab, path, count: int):
    """The first `count` examples of a canonical SCAN file as their ScanDataset gives them (ids in their vocab)."""
    dataset = official[1].ScanDataset(str(path), vocab)
    return [dataset[index] for index in range(count)]


def our_batch(tokenizer, examples):
    """Our padded batch of the same examples: sources and labels as `train` tokenizes them (`</s>` appended)."""
    sources = [" ".join(text[1:-1]) for _, _, text, _ in examples]
    targets = [" ".join(actions[1:-1]) for _, _, _, actions in examples]
    encoded = tokenizer(sources, padding=True, return_tensors="pt")
    labels = tokenizer(targets, padding=True, return_tensors="pt")
    return encoded.input_ids, encoded.attention_mask, labels.input_ids.masked_fill(labels.attention_mask == 0, -100)


@pytest.fixture
def float64():
    """Their encoder makes its context tensor with torch.zeros (the default dtype): float64 runs need it float64."""
    with default_dtype(torch.float64):
        yield


def paired(official, tokenizer, vocab, dropout: float = 0.0):
    torch.manual_seed(0)
    mine = ours(tokenizer, dropout).double()
    theirs = official_model(official, vocab, dropout).double()
    theirs.load_state_dict(official_state_dict(mine, tokenizer, vocab))
    return mine, theirs


def official_log_probs(theirs, example) -> torch.Tensor:
    """Their decoder's log-softmax over the actions for one example (train_test.py's batch of one): (steps, actions)."""
    instruction, actions = [torch.stack(example[0])], [torch.stack(example[1])]
    log_probs, _ = theirs(instruction, actions)
    return log_probs[0].T


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_the_same_weights_give_the_same_log_probabilities(official, tokenizer, scan_files, mode, float64):
    """40 real add-jump test rows in one padded batch of ours (sources 3-10 words, targets up to 48 actions), each
    beside their model on that row alone: float64, dropout off, training and evaluation mode."""
    vocab = official[2]
    mine, theirs = paired(official, tokenizer, vocab)
    mine.train(mode == "train")
    theirs.train(mode == "train")
    examples = official_rows(official, vocab, scan_files[1], 40)
    input_ids, mask, labels = our_batch(tokenizer, examples)
    assert len(set(mask.sum(1).tolist())) > 3 and len(set(labels.ne(-100).sum(1).tolist())) > 5
    out = our_ids(tokenizer, vocab["out_token_to_idx"])
    with torch.no_grad():
        logits = mine(input_ids=input_ids, attention_mask=mask, labels=labels).logits
        for row, example in enumerate(examples):
            expected = official_log_probs(theirs, example)
            steps = int(labels[row].ne(-100).sum())
            assert expected.shape[0] == steps
            got = logits[row, :steps, out].log_softmax(-1)
            assert (got - expected).abs().max().item() <= 1e-6


def test_one_adam_step_with_clipping_gives_the_same_weights(official, tokenizer, scan_files, float64):
    """train_test.py: Adam(lr 0.001), NLL over the actions averaged over tokens, clip_grad_norm_ 5.0, batch of one.
    Our side takes the same loss over its logits restricted to the actions."""
    vocab = official[2]
    mine, theirs = paired(official, tokenizer, vocab)
    out = our_ids(tokenizer, vocab["out_token_to_idx"])
    example = official_rows(official, vocab, scan_files[0], 7)[6]
    input_ids, mask, labels = our_batch(tokenizer, [example])
    for model in (mine, theirs):
        model.optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    for _ in range(3):
        logits = mine(input_ids=input_ids, attention_mask=mask, labels=labels).logits[0, :, out]
        targets = torch.tensor([out.tolist().index(i) for i in labels[0].tolist()])
        loss = F.nll_loss(logits.log_softmax(-1), targets)
        mine.optimizer.zero_grad()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(mine.parameters(), max_norm=5.0)
        mine.optimizer.step()

        log_probs, true_actions = theirs([torch.stack(example[0])], [torch.stack(example[1])])
        their_loss = torch.nn.NLLLoss(reduction="mean", ignore_index=-100)(log_probs, true_actions)
        theirs.optimizer.zero_grad()
        their_loss.backward()
        their_norm = torch.nn.utils.clip_grad_norm_(list(theirs.parameters()), max_norm=5.0)
        theirs.optimizer.step()
        assert abs(loss.item() - their_loss.item()) <= 1e-9 and abs(norm.item() - their_norm.item()) <= 1e-9
    assert norm.item() > 0.1
    converted = official_state_dict(mine, tokenizer, vocab)
    for name, parameter in theirs.named_parameters():
        assert (converted[name] - parameter.detach()).abs().max().item() <= 1e-6, name


def test_the_tokens_training_scores_are_their_action_vocabulary(official, tokenizer, scan_files):
    vocab = official[2]
    assert scored_tokens(tokenizer, scan_files[0]) == sorted(our_ids(tokenizer, vocab["out_token_to_idx"]).tolist())


def test_our_loss_is_theirs_and_the_shared_vocabulary_one_is_not(official, tokenizer, scan_files, float64):
    """Our cross-entropy over the model's logits equals their NLL over the actions; with output_vocabulary = "all"
    (the softmax over every token of the shared vocabulary, instruction words included: what the zoo trained before)
    it does not: the difference that left 4 or 5 of 8 add-jump seeds at the action marginals."""
    vocab = official[2]
    mine, theirs = paired(official, tokenizer, vocab)
    example = official_rows(official, vocab, scan_files[0], 1)[0]
    input_ids, mask, labels = our_batch(tokenizer, [example])
    shared = ours(tokenizer, output_tokens=None).double()
    shared.load_state_dict(mine.state_dict())
    with torch.no_grad():
        ours_loss = F.cross_entropy(mine(input_ids=input_ids, attention_mask=mask, labels=labels).logits[0], labels[0])
        shared_loss = F.cross_entropy(shared(input_ids=input_ids, attention_mask=mask, labels=labels).logits[0],
                                      labels[0])
        log_probs, true_actions = theirs([torch.stack(example[0])], [torch.stack(example[1])])
        their_loss = torch.nn.NLLLoss(ignore_index=-100)(log_probs, true_actions)
    assert abs(ours_loss.item() - their_loss.item()) <= 1e-6
    assert len(tokenizer) > len(vocab["out_token_to_idx"]) and shared_loss.item() > their_loss.item() + 1e-3


def test_greedy_actions_equal_their_argmax_on_200_real_sources(official, tokenizer, scan_files):
    """Their prediction (the argmax of each step, as check_accuracy reads it) and our `generate` (greedy)
    on 200 add-jump test sources, with the random weights scaled by 4 so that the attention is sharp and the actions
    vary by source and step, and ours choosing among the actions only (their output layer has no other rows)."""
    vocab = official[2]
    mine, theirs = paired(official, tokenizer, vocab)
    mine = mine.float()
    out = our_ids(tokenizer, vocab["out_token_to_idx"])
    with torch.no_grad():
        for parameter in mine.parameters():
            parameter.mul_(4)
        # their output layer has a row per action only; ours scores the same tokens (output_tokens)
    mine.eval()
    # max_len None: their loop runs as many steps as the row's true action sequence (check_accuracy's reading), which
    # is enough to compare up to their first <EOS> or the whole length, and a quarter of 59 steps per row
    theirs = official_model(official, vocab).eval()
    converted = official_state_dict(mine, tokenizer, vocab)
    theirs.load_state_dict({name: tensor.float() for name, tensor in converted.items()})
    examples = official_rows(official, vocab, scan_files[1], 200)
    input_ids, mask, _ = our_batch(tokenizer, examples)
    with torch.no_grad():
        generated = mine.generate(input_ids=input_ids, attention_mask=mask, max_length=60, do_sample=False, num_beams=1)
    to_theirs = {int(ours_id): index for index, ours_id in enumerate(out.tolist())}
    end = vocab["out_token_to_idx"]["<EOS>"]
    distinct = set()
    for row, example in enumerate(examples):
        with torch.no_grad():
            log_probs, _ = theirs([torch.stack(example[0])], [torch.stack(example[1])])
        their_ids = log_probs[0].argmax(0).tolist()
        their_ids = their_ids[:their_ids.index(end) + 1] if end in their_ids else their_ids
        our_tokens = generated[row, 1:].tolist()
        our_tokens = our_tokens[:our_tokens.index(tokenizer.eos_token_id) + 1] \
            if tokenizer.eos_token_id in our_tokens else our_tokens
        assert [to_theirs[token] for token in our_tokens[:len(their_ids)]] == their_ids, row
        distinct.add(tuple(their_ids))
    assert len(distinct) > 20


def test_the_initial_draw_is_theirs_tensor_by_tensor(official, tokenizer):
    """Each of their tensors against ours under the converter, drawn from other seeds: a two-sample Kolmogorov-Smirnov
    test per tensor (a wrong gain, fan or distribution is rejected at these sizes; the smallest, their output bias of 8,
    is pooled over 40 draws)."""
    vocab = official[2]
    torch.manual_seed(11)
    mine = official_state_dict(ours(tokenizer), tokenizer, vocab)
    torch.manual_seed(12)
    theirs = dict(official_model(official, vocab).named_parameters())
    assert set(mine) == set(theirs)
    for name, tensor in theirs.items():
        assert tensor.shape == mine[name].shape, name
        if tensor.numel() < 1000:
            continue
        result = stats.ks_2samp(mine[name].flatten().numpy(), tensor.detach().flatten().numpy())
        assert result.pvalue > 1e-4, (name, result)
    small_mine = torch.cat([official_state_dict(ours(tokenizer), tokenizer, vocab)["decoder.out.bias"]
                            for _ in range(40)])
    small_theirs = torch.cat([official_model(official, vocab).decoder.out.bias.detach() for _ in range(40)])
    assert stats.ks_2samp(small_mine.numpy(), small_theirs.numpy()).pvalue > 1e-4


def test_two_hundred_updates_follow_their_loss_curve(official, tokenizer, scan_files, float64):
    """200 Adam updates (lr 0.001, clip 5.0, batch of one, train_test.py's loop) on the first 200 add-jump training
    rows, both models at a small size (m = x = 16) so that it runs in seconds: every loss within 1e-5 of theirs."""
    vocab = official[2]
    torch.manual_seed(3)
    mine = ours(tokenizer, d_semantic=16, hidden_size=16).double()
    theirs = official[0].Seq2SeqSynAttn(len(vocab["in_token_to_idx"]), 16, 16, len(vocab["out_token_to_idx"]), "LSTM",
                                        1, 0.0, False, False, False, None, torch.device("cpu")).double()
    theirs.load_state_dict(official_state_dict(mine, tokenizer, vocab))
    optimizers = [torch.optim.Adam(model.parameters(), lr=0.001) for model in (mine, theirs)]
    ours_losses, their_losses = [], []
    for example in official_rows(official, vocab, scan_files[0], 200):
        input_ids, mask, labels = our_batch(tokenizer, [example])
        # our training loss as it is: the cross-entropy over the model's (masked) logits
        loss = F.cross_entropy(mine(input_ids=input_ids, attention_mask=mask, labels=labels).logits[0], labels[0])
        log_probs, true_actions = theirs([torch.stack(example[0])], [torch.stack(example[1])])
        their_loss = torch.nn.NLLLoss(ignore_index=-100)(log_probs, true_actions)
        for model, optimizer, value in ((mine, optimizers[0], loss), (theirs, optimizers[1], their_loss)):
            optimizer.zero_grad()
            value.backward()
            torch.nn.utils.clip_grad_norm_(list(model.parameters()), max_norm=5.0)
            optimizer.step()
        ours_losses.append(loss.item())
        their_losses.append(their_loss.item())
    assert sum(their_losses[-20:]) < sum(their_losses[:20]) * 0.9  # it learns (2.10 -> 1.76): the curve is not flat
    assert max(abs(a - b) for a, b in zip(ours_losses, their_losses)) <= 1e-5


def test_the_imported_mt_files_are_the_rows_their_mt_dataset_reads(official, tmp_path):
    """002's Table 3 rows: `benchbuild import syntactic_attention_mt` gives, split for split, the sources and targets
    their MTDataset reads from the files train_test.py is given (--train_data_file data/MT/train, --val_data_file
    data/MT/test_no_unk.txt, --test_data_file data/MT/test), in their order; the daxy sentences are test rows."""
    from commands import benchbuild_in_process

    from benchbuild.benchmark import load_splits, read_build_info

    folder = reference_folder("syntactic_attention") / "data" / "MT"
    result = benchbuild_in_process("import", "syntactic_attention_mt", folder, "--out", tmp_path / "mt")
    assert result.returncode == 0, result.stderr
    info, splits = read_build_info(tmp_path / "mt"), load_splits(tmp_path / "mt")
    assert (info.family, info.name) == ("lake_baroni_en_fr", "lake_baroni_en_fr/syntactic_attention_mt")
    vocab = {"in_token_to_idx": {}, "out_token_to_idx": {}}  # a vocab given: MTDataset builds none
    for split, file in (("train", "train"), ("validation", "test_no_unk.txt"), ("test", "test")):
        theirs = official[1].MTDataset(str(folder / file), vocab)
        rows = splits[split]
        assert len(rows) == len(theirs.text_instructions) > 0
        assert rows["source"] == [" ".join(words[1:-1]) for words in theirs.text_instructions]
        assert rows["target"] == [" ".join(words[1:-1]) for words in theirs.text_actions]
    assert sum("daxy" in source for source in splits["test"]["source"]) == 8
    assert not any("daxy" in source for source in splits["train"]["source"])
