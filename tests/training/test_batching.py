"""Training batches: a pure function of (seed, step), split by length into micro-batches that change no gradient."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import torch

from benchbuild.training.batching import EncodedSplit, _best_cuts, batch_indices, collate, micro_batches
from benchbuild.training.loop import backward_batch, train


@pytest.fixture(scope="module")
def scan_simple(shared_data) -> EncodedSplit:
    """SCAN's simple-split training rows as stand-in ids: only the lengths matter here (words + `</s>`)."""
    sources, targets = [], []
    for line in (shared_data / "scan" / "simple_split" / "tasks_train_simple.txt").read_text().splitlines():
        command, actions = line[len("IN: "):].split(" OUT: ")
        sources.append([3] * len(command.split()) + [2])
        targets.append([4] * len(actions.split()) + [2])
    return EncodedSplit(sources=sources, targets=targets)


@pytest.mark.shared
def test_batches_are_a_pure_function_of_seed_and_step_and_cover_each_epoch(scan_simple):
    size = len(scan_simple.sources)
    steps = [5, 0, 70, 3, 5]
    once = [batch_indices(step, 256, size, 7) for step in steps]
    batch_indices(400, 256, size, 8)  # another seed in between must not matter
    assert [batch_indices(step, 256, size, 7) for step in steps] == once and once[0] == once[4]
    assert batch_indices(5, 256, size, 8) != once[0]
    first_epoch = [index for step in range(size // 256) for index in batch_indices(step, 256, size, 7)]
    assert len(set(first_epoch)) == len(first_epoch) == 256 * (size // 256)


@pytest.mark.shared
def test_micro_batches_partition_the_batch_by_length_and_cut_padding(scan_simple):
    batch = batch_indices(3, 256, len(scan_simple.sources), 0)
    parts = micro_batches(scan_simple, batch, 4)
    assert sorted(index for part in parts for index in part) == sorted(batch)
    assert len(parts) == 4 and all(parts)
    longest = [max(len(scan_simple.targets[index]) for index in part) for part in parts]
    assert longest == sorted(longest)

    def padded_target_tokens(groups):
        return sum(len(group) * max(len(scan_simple.targets[index]) for index in group) for group in groups)

    # SCAN actions run up to 48 words while most rows are short: sorted parts pad far less than the whole batch,
    # and the chosen cut points less than equal quarters.
    quarters = np.array_split(np.asarray(sorted(batch, key=lambda i: len(scan_simple.targets[i]))), 4)
    assert padded_target_tokens(parts) <= padded_target_tokens(quarters) < 0.6 * padded_target_tokens([batch])
    assert micro_batches(scan_simple, batch[:3], 4) == [[index] for index in sorted(
        batch[:3], key=lambda i: (len(scan_simple.targets[i]), len(scan_simple.sources[i])))]


def test_cut_points_minimise_the_padded_tokens_exactly():
    rng = np.random.default_rng(0)
    for _ in range(200):
        size = int(rng.integers(1, 9))
        parts = int(rng.integers(1, size + 1))
        lengths = np.sort(rng.integers(1, 20, size))
        cuts = _best_cuts(lengths, parts)

        def padded(bounds):
            return sum((end - start) * lengths[end - 1] for start, end in zip(bounds, bounds[1:]))

        best = min(padded([0, *inner, size]) for inner in itertools.combinations(range(1, size), parts - 1))
        assert cuts[0] == 0 and cuts[-1] == size and len(cuts) == parts + 1
        assert all(start < end for start, end in zip(cuts, cuts[1:]))
        assert padded(cuts) == best


def test_a_large_batch_is_cut_optimally_without_a_rows_squared_search():
    lengths = np.sort(np.random.default_rng(1).integers(1, 60, 200_000))
    cuts = _best_cuts(lengths, 4)  # 200,001² cells would need 320 GB: only the 59 length boundaries are searched
    assert len(cuts) == 5 and cuts[0] == 0 and cuts[-1] == len(lengths)
    rng = np.random.default_rng(2)
    for _ in range(50):  # cutting only where the length changes loses nothing against every position
        lengths = np.sort(rng.integers(1, 12, 40))
        parts = int(rng.integers(1, 6))
        full = [0] + [None] * 40  # fewest padded tokens of rows 0..j-1, over every cutting into k parts
        for _ in range(parts):
            full = [min((full[i] + (j - i) * lengths[j - 1] for i in range(j) if full[i] is not None), default=None)
                    for j in range(41)]
        cuts = _best_cuts(lengths, parts)
        assert len(cuts) == parts + 1 and all(start < end for start, end in zip(cuts, cuts[1:]))
        assert sum((end - start) * lengths[end - 1] for start, end in zip(cuts, cuts[1:])) == full[40]
    few = np.repeat([3, 9], 5000)  # two distinct lengths, more than 4,096 rows: one part per length
    assert _best_cuts(few, 4) == [0, 5000, 10000]


def test_collate_pads_shifts_targets_and_masks_labels():
    encoded = EncodedSplit(sources=[[5, 6, 2], [7, 2], [8, 9, 10, 2]], targets=[[11, 2], [12, 13, 14, 2], [15, 2]])
    batch = collate(encoded, [1, 2], pad_id=0, bos_id=1, device="cpu")
    assert batch["input_ids"].tolist() == [[7, 2, 0, 0], [8, 9, 10, 2]]
    assert batch["attention_mask"].tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    assert batch["decoder_input_ids"].tolist() == [[1, 12, 13, 14], [1, 15, 0, 0]]
    assert batch["decoder_attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    assert batch["labels"].tolist() == [[12, 13, 14, 2], [15, 2, -100, -100]]


SMALL_NO_DROPOUT = {
    "transformer": {"d_model": 32, "num_heads": 4, "d_ff": 64, "encoder_layers": 1, "decoder_layers": 1,
                    "dropout": 0.0, "attention_dropout": 0.0},
    "lstm_attention": {"d_embedding": 16, "hidden_size": 16, "num_layers": 1, "dropout": 0.0},
}


@pytest.mark.shared
@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
@pytest.mark.parametrize("model", ["transformer", "lstm_attention"])
def test_batch_parts_give_the_whole_batchs_gradient(scan_simple, model, label_smoothing):
    """Without dropout, 4 length-sorted parts give the gradient of the batch's mean token loss: accumulated one
    forward pass at a time (`micro_batches`, the LSTM) or in one pass as length groups (the Transformer)."""
    from accelerate import Accelerator

    from benchbuild.zoo.recipe import TrainingRecipe
    from benchbuild.zoo import build_model, load_entry

    class Ids:
        pad_token_id, bos_token_id = 0, 1

    torch.manual_seed(0)
    network = build_model(load_entry(model), vocab_size=8, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                          overrides=SMALL_NO_DROPOUT[model])
    assert network.accepts_length_groups == (model == "transformer")
    accelerator = Accelerator(cpu=True)
    batch = batch_indices(0, 64, len(scan_simple.sources), 0)
    gradients, losses = {}, {}
    for parts in (1, 4):
        recipe = TrainingRecipe(steps=1, batch_size=64, learning_rate=1e-3, label_smoothing=label_smoothing,
                                micro_batches=parts, length_groups=parts)
        network.zero_grad()
        losses[parts] = backward_batch(accelerator, network, scan_simple, batch, Ids, recipe).item()
        gradients[parts] = {name: p.grad.clone() for name, p in network.named_parameters() if p.grad is not None}
    assert len(micro_batches(scan_simple, batch, 4)) == 4
    assert losses[4] == pytest.approx(losses[1], rel=1e-5)
    assert gradients[1].keys() == gradients[4].keys() and len(gradients[1]) >= 8
    for name, gradient in gradients[1].items():
        torch.testing.assert_close(gradients[4][name], gradient, rtol=1e-4, atol=1e-7)


@pytest.mark.shared
@pytest.mark.parametrize("model", ["transformer", "relative_transformer", "sag_t5", "sag_conv", "sag_fixed_span",
                                   "fusion", "universal_transformer", "transformer_ped"])
def test_length_groups_in_one_pass_equal_one_forward_per_group(scan_simple, model):
    """The grouped forward of every Transformer switch gives each group's own logits at the real target
    positions (padding rows of the encoder and decoder stay out of every real position's computation)."""
    from benchbuild.zoo import build_model, load_entry

    torch.manual_seed(0)
    network = build_model(load_entry(model), vocab_size=16, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                          overrides={"d_model": 32, "num_heads": 4, "d_ff": 64}).eval()
    groups = [collate(scan_simple, part, 0, 1, "cpu")
              for part in micro_batches(scan_simple, batch_indices(0, 48, len(scan_simple.sources), 0), 5)]
    names = ("input_ids", "attention_mask", "decoder_input_ids")
    inputs = [{name: group[name] for name in names + ("decoder_attention_mask",)} for group in groups]
    assert len({group["decoder_input_ids"].shape[1] for group in groups}) > 2
    one_by_one = torch.cat([network(**{name: group[name] for name in names}).logits.reshape(-1, 16)
                            for group in inputs])
    grouped = network(length_groups=inputs).logits
    real = torch.cat([group["labels"].reshape(-1) for group in groups]).ne(-100)
    assert grouped.shape == (real.sum(), 16) and real.sum() > 100  # the real target positions only
    torch.testing.assert_close(grouped, one_by_one[real], rtol=1e-5, atol=1e-5)


@pytest.mark.shared
def test_a_micro_batched_run_follows_the_one_batch_loss_curve(tiny_scan, tiny_model, tmp_path):
    no_dropout = {"dropout": 0.0, "attention_dropout": 0.0, "activation_dropout": 0.0}
    curves = {}
    for parts in (1, 4):
        out = tmp_path / f"parts-{parts}"
        train(tiny_model, tiny_scan, out, seed=0, max_steps=6, device="cpu", progress=False,
              overrides={"length_groups": parts, "eval_every": 6}, architecture_overrides=no_dropout)
        lines = map(json.loads, (out / "train_log.jsonl").read_text().splitlines())
        curves[parts] = [line["loss"] for line in lines if "loss" in line]
    assert len(curves[1]) == 6
    np.testing.assert_allclose(curves[4], curves[1], rtol=1e-4)


@pytest.mark.shared
def test_two_processes_follow_the_one_process_loss_curve(tiny_scan, tiny_model, tmp_path):
    """`torchrun` with 2 CPU processes (gloo): each takes half of every batch, and the all-reduced update equals the
    one-process update, so without dropout the loss curves agree; only the main process writes the run folder."""
    import os
    import subprocess
    import sys

    from commands import benchbuild

    model = tmp_path / "tiny_no_dropout.toml"
    model.write_text(tiny_model.read_text().replace("dropout = 0.1", "dropout = 0.0\nattention_dropout = 0.0\n"
                                                    "activation_dropout = 0.0"), encoding="utf-8")
    command = ["train", "--model", str(model), "--data", str(tiny_scan), "--max-steps", "6", "--device", "cpu",
               "--set", "eval_every=3"]
    one, two = tmp_path / "one", tmp_path / "two"
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    alone = benchbuild(*command, "--out", one, environment=environment)
    assert alone.returncode == 0, alone.stderr
    launched = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                               "-m", "benchbuild", *command, "--out", str(two)], env=environment,
                              capture_output=True, text=True)
    assert launched.returncode == 0, launched.stderr[-2000:]
    curves = {}
    for run in (one, two):
        lines = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
        curves[run.name] = [line["loss"] for line in lines if "loss" in line]
    assert len(curves["two"]) == 6
    np.testing.assert_allclose(curves["two"], curves["one"], rtol=1e-4)
    record = json.loads((two / "run.json").read_text())
    assert record["status"] == "complete" and record["steps_done"] == 6 and record["processes"] == 2
    assert json.loads((one / "run.json").read_text())["processes"] == 1
