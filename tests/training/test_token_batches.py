"""Token batches (fairseq's `--max-tokens` and `--update-freq`): within the budget, every row once an epoch, the same
in a Dask worker as here, resumable at any step, and an update whose gradient is that of its rows as one batch."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from commands import benchbuild, log_without_times, refused, sha256
from small_inputs import scan_grammar_rows, tiny_transformer_entry, write_benchmark

from benchbuild.training.batching import EncodedSplit, TokenBatches, encode_rows
from benchbuild.training.loop import backward_batch, train
from benchbuild.zoo.recipe import TrainingRecipe

BUDGET = 1024  # padded tokens a batch: about 20 rows of the WMT sample


@pytest.fixture(scope="module")
def wmt(shared_data) -> EncodedSplit:
    """The 10,000 WMT en-de sample pairs under a BPE vocabulary of 2,000 learnt from them: rows of 2 to 154 tokens."""
    from benchbuild.training.tokenization import build_tokenizer

    folder = shared_data / "wmt14-ende-sample"
    english = (folder / "train.en").read_text(encoding="utf-8").splitlines()
    german = (folder / "train.de").read_text(encoding="utf-8").splitlines()
    rows = [{"source": source, "target": target} for source, target in zip(english, german)]
    tokenizer = build_tokenizer(english + german, "bpe", 2000)
    return encode_rows(tokenizer, rows)


def padded_tokens(encoded: EncodedSplit, batch: list[int]) -> int:
    return len(batch) * max(max(len(encoded.sources[i]), len(encoded.targets[i])) for i in batch)


def test_an_epoch_stays_within_the_budget_and_visits_every_row_once(wmt):
    batches = TokenBatches.pack(wmt, BUDGET, None, seed=0)
    rows = len(wmt.sources)
    for epoch in (0, 1, 7):
        visited = batches.epoch(epoch)
        assert len(visited) == len(batches) and max(padded_tokens(wmt, batch) for batch in visited) <= BUDGET
        assert sorted(index for batch in visited for index in batch) == list(range(rows))
    assert batches.epoch(0) != batches.epoch(1)
    assert sorted(map(tuple, batches.epoch(0))) == sorted(map(tuple, batches.epoch(1))), "one cut, reordered"
    # Greedy: each batch closed only because the next row in packing order would have overflowed it.
    in_packing_order = [batches.batch(number) for number in range(len(batches))]
    assert all(padded_tokens(wmt, batch + following[:1]) > BUDGET
               for batch, following in zip(in_packing_order, in_packing_order[1:]))
    # Packed from rows sorted by length, the batches pad little: 91% of their padded tokens are real (with the
    # longer of source and target counted for each row).
    real = sum(max(len(s), len(t)) for s, t in zip(wmt.sources, wmt.targets))
    assert real / sum(padded_tokens(wmt, batch) for batch in in_packing_order) > 0.88


def test_batch_size_caps_the_rows_of_a_token_batch(wmt):
    capped = TokenBatches.pack(wmt, BUDGET, 8, seed=0)
    assert max(len(batch) for batch in capped.epoch(0)) == 8 < max(
        len(batch) for batch in TokenBatches.pack(wmt, BUDGET, None, seed=0).epoch(0))
    assert max(padded_tokens(wmt, batch) for batch in capped.epoch(0)) <= BUDGET


def test_the_steps_of_an_update_run_through_the_stream_of_epochs(wmt):
    batches = TokenBatches.pack(wmt, BUDGET, None, seed=3)
    stream = batches.epoch(0) + batches.epoch(1)
    steps = [batches.of_step(step, 2) for step in range(len(stream) // 2)]
    assert [batch for step in steps for batch in step] == stream[:len(steps) * 2]
    assert batches.of_step(len(batches) // 2 + 1, 2) == stream[(len(batches) // 2 + 1) * 2:(len(batches) // 2 + 2) * 2]


def _token_batches_in_a_worker(seed: int, encoded: EncodedSplit) -> tuple[int, list[list[int]], list[list[int]]]:
    batches = TokenBatches.pack(encoded, BUDGET, None, seed)
    return os.getpid(), batches.epoch(2), batches.of_step(1000, 2)


@pytest.mark.distributed
def test_batches_are_the_same_in_a_dask_worker_for_a_seed_and_differ_for_another(wmt, dask_scheduler):
    from benchbuild.engine import EngineParameters, open_engine

    with open_engine(EngineParameters(engine="dask", scheduler=dask_scheduler)) as engine:
        results = list(engine.map(_token_batches_in_a_worker, [5, 6], shared=(engine.share(wmt),)))
    assert os.getpid() not in {pid for pid, _, _ in results}
    here = TokenBatches.pack(wmt, BUDGET, None, seed=5)
    assert results[0][1:] == (here.epoch(2), here.of_step(1000, 2))
    assert results[1][1] != results[0][1] and results[1][2] != results[0][2]
    assert sorted(map(sorted, results[1][1])) != sorted(map(sorted, results[0][1])), "another seed cuts otherwise"


SMALL_NO_DROPOUT = {"d_model": 16, "num_heads": 2, "d_ff": 32, "encoder_layers": 1, "decoder_layers": 1,
                    "dropout": 0.0, "attention_dropout": 0.0}


class Ids:
    pad_token_id, bos_token_id = 0, 1


def tiny_network(model: str = "transformer"):
    from benchbuild.zoo import build_model, load_entry

    torch.manual_seed(0)
    return build_model(load_entry(model), vocab_size=2000, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                       overrides=SMALL_NO_DROPOUT)


def gradient(network) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in network.named_parameters() if p.grad is not None}


def test_an_update_of_two_token_batches_has_the_gradient_of_its_rows_as_one_batch(wmt):
    """fairseq divides the update's summed token loss by its summed target tokens: two batches of unequal target
    tokens give the gradient of their rows' mean token loss, not the mean of the two batches' means."""
    from accelerate import Accelerator

    accelerator, network = Accelerator(cpu=True), tiny_network()
    update = TokenBatches.pack(wmt, 256, None, seed=0).of_step(0, 2)
    rows = [index for batch in update for index in batch]
    assert len({sum(len(wmt.targets[i]) for i in batch) for batch in update}) == 2, "unequal target tokens"
    by_tokens = TrainingRecipe(steps=1, learning_rate=1e-3, label_smoothing=0.1, batch_tokens=256, update_freq=2)
    one_batch = TrainingRecipe(steps=1, learning_rate=1e-3, label_smoothing=0.1, batch_size=len(rows),
                               micro_batches=1, length_groups=1)
    network.zero_grad()
    loss = backward_batch(accelerator, network, wmt, rows, Ids, by_tokens, update).item()
    in_parts = gradient(network)
    network.zero_grad()
    whole_loss = backward_batch(accelerator, network, wmt, rows, Ids, one_batch).item()
    whole = gradient(network)
    assert loss == pytest.approx(whole_loss, rel=1e-5) and whole.keys() == in_parts.keys() and len(whole) >= 8
    for name, expected in whole.items():
        torch.testing.assert_close(in_parts[name], expected, rtol=1e-4, atol=1e-7)


class ProcessOfMany:
    """A real CPU Accelerator seen as process `index` of `count`: what `backward_batch` reads of accelerate's state.
    Running every process's share in turn on one network sums their gradients, as the all-reduce does before its
    mean."""

    def __init__(self, accelerator, index: int, count: int):
        self.accelerator, self.process_index, self.num_processes = accelerator, index, count

    def __getattr__(self, name):
        return getattr(self.accelerator, name)


@pytest.mark.parametrize("update_freq,processes", [(3, 2), (1, 2)])
def test_processes_share_an_updates_batches_and_their_mean_gradient_is_the_updates(wmt, update_freq, processes):
    """Process p takes batches p, p + P, …; one without a batch (update_freq 1 on 2 processes) adds a zero gradient
    and no loss."""
    from accelerate import Accelerator

    accelerator, network = Accelerator(cpu=True), tiny_network()
    update = TokenBatches.pack(wmt, 256, None, seed=1).of_step(4, update_freq)
    rows = [index for batch in update for index in batch]
    recipe = TrainingRecipe(steps=1, learning_rate=1e-3, batch_tokens=256, update_freq=update_freq)
    network.zero_grad()
    alone = backward_batch(accelerator, network, wmt, rows, Ids, recipe, update).item()
    expected = gradient(network)
    network.zero_grad()
    shares = [backward_batch(ProcessOfMany(accelerator, index, processes), network, wmt, rows, Ids, recipe,
                             update).item() for index in range(processes)]
    if update_freq < processes:
        assert shares[update_freq:] == [0.0] * (processes - update_freq)
    assert sum(shares) == pytest.approx(alone, rel=1e-5)
    for name, summed in gradient(network).items():
        torch.testing.assert_close(summed / processes, expected[name], rtol=1e-4, atol=1e-7)


STEPS, EVAL_EVERY, KILLED_AT = 30, 10, 25
TOKEN_MODEL = tiny_transformer_entry("tiny_token_transformer", "scan", steps=STEPS, batch_tokens=40, update_freq=2,
                                     learning_rate=3e-3, eval_every=EVAL_EVERY)


@pytest.fixture(scope="module")
def scan_inputs(tmp_path_factory) -> tuple[Path, Path]:
    """(model file, benchmark folder): a one-layer Transformer batching 40 tokens twice an update, and 200 train and
    50 test SCAN rows of at most four actions (2 to 8 tokens, the longer of source and target: 5 to 20 rows a batch)."""
    folder = tmp_path_factory.mktemp("token-inputs")
    model = folder / "tiny_token_transformer.toml"
    model.write_text(TOKEN_MODEL, encoding="utf-8")
    rows = scan_grammar_rows(250, 4, seed=1)
    return model, write_benchmark(folder / "scan", {"train": rows[:200], "test": rows[200:]}, "scan", "tiny")




def test_a_killed_token_batched_run_resumes_to_the_bytes_of_an_uninterrupted_one(scan_inputs, tmp_path):
    import transformers

    from benchbuild.benchmark import load_splits
    from benchbuild.training.validation import split_validation

    model, data = scan_inputs
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    train(model, data, whole, seed=0, device="cpu", progress=False)
    train(model, data, killed, seed=0, device="cpu", progress=False, max_steps=KILLED_AT)
    shutil.rmtree(killed / "checkpoints" / f"step-{KILLED_AT:08d}")  # killed after logging step 25, before saving it
    result = train(model, data, killed, seed=0, device="cpu", progress=False)
    assert (result.resumed_from, result.steps) == (20, STEPS)
    assert log_without_times(killed) == log_without_times(whole)
    final = Path("checkpoints", f"step-{STEPS:08d}", "model.safetensors")
    for weights in (Path("model.safetensors"), final):
        assert sha256(killed / weights) == sha256(whole / weights), weights

    record = json.loads((whole / "run.json").read_text())
    assert (record["recipe"]["batch_tokens"], record["recipe"]["update_freq"]) == (40, 2)
    rows, _, _ = split_validation(load_splits(data), None, 0)
    tokenizer = transformers.AutoTokenizer.from_pretrained(whole)
    per_epoch = len(TokenBatches.pack(encode_rows(tokenizer, rows), 40, None, 0))
    assert record["token_batches_per_epoch"] == per_epoch and STEPS * 2 > per_epoch, "the run crosses an epoch"


def test_a_budget_of_zero_tokens_is_refused_before_anything_is_written(scan_inputs, tmp_path):
    from typer.testing import CliRunner

    from benchbuild.cli import app
    from benchbuild.errors import BenchbuildError

    model, data = scan_inputs
    result = CliRunner().invoke(app, ["train", "--model", str(model), "--data", str(data), "--out",
                                      str(tmp_path / "run"), "--set", "batch_tokens=0"])
    assert isinstance(result.exception, BenchbuildError)
    assert str(result.exception) == "--set batch_tokens must be positive (at least 1); got 0"
    assert not (tmp_path / "run").exists()


def test_a_row_longer_than_the_budget_is_refused_in_one_line_before_training(scan_inputs, tmp_path):
    model, data = scan_inputs
    done = benchbuild("train", "--model", model, "--data", data, "--out", tmp_path / "run", "--device", "cpu",
                      "--set", "batch_tokens=6")
    refused(done, "do not fit in batch_tokens = 6 alone", "the longest has 8 tokens", "--set batch_tokens=8")
    assert not (tmp_path / "run").exists(), "no run is left behind that the corrected rerun would differ from"
    result = train(model, data, tmp_path / "run", seed=0, device="cpu", progress=False, max_steps=2,
                   overrides={"batch_tokens": 8})
    assert result.steps == 2


def test_epochs_of_token_batches_are_counted_in_updates_once_the_batches_are_known():
    from benchbuild.zoo.recipe import epoch_in_token_batches, planned_steps, validation_interval

    recipe = TrainingRecipe(learning_rate=1e-3, batch_tokens=600, update_freq=3, epochs=2.5, eval_every_epochs=0.5)
    assert epoch_in_token_batches(recipe)
    # 2.5 epochs of 41 batches are 102.5 batches: 35 updates of 3 (the last one running into the next epoch's).
    assert planned_steps(recipe, {"train": 1000}, token_batches=41) == 35
    assert validation_interval(recipe, {"train": 1000}, token_batches=41) == 7  # ceil(20.5 / 3)
    with pytest.raises(ValueError, match="token batches of an epoch"):
        planned_steps(recipe, {"train": 1000})
    rows_batched = TrainingRecipe(learning_rate=1e-3, batch_size=16, epochs=2.5)
    assert not epoch_in_token_batches(rows_batched)
    # Rows, not batches: 900 of the 1,000 trained on (10% held out to validate on), ceil(2.5 × 900 / 16).
    assert planned_steps(rows_batched, {"train": 1000}, token_batches=41) == 141


def test_a_run_of_epochs_in_token_batches_trains_their_updates_and_validates_each_epoch(scan_inputs, tmp_path):
    import transformers

    from benchbuild.benchmark import load_splits
    from benchbuild.training.plan import token_batches_per_epoch
    from benchbuild.training.validation import split_validation

    model, data = scan_inputs
    run = tmp_path / "run"
    result = train(model, data, run, seed=3, device="cpu", progress=False,
                   overrides={"epochs": 3, "eval_every_epochs": 1})
    record = json.loads((run / "run.json").read_text())
    rows, _, _ = split_validation(load_splits(data), None, 3)
    tokenizer = transformers.AutoTokenizer.from_pretrained(run)
    per_epoch = len(TokenBatches.pack(encode_rows(tokenizer, rows), 40, None, 3))
    assert per_epoch > 5 and record["token_batches_per_epoch"] == per_epoch
    updates = -(-3 * per_epoch // 2)  # three epochs of batches, two a step (update_freq 2)
    assert result.steps == record["step_budget"] == record["recipe_steps"] == updates != STEPS
    assert record["validation_every"] == -(-per_epoch // 2)
    # Counted before any run exists (sweep --dry-run): the same number.
    recipe = TrainingRecipe(learning_rate=3e-3, batch_tokens=40, update_freq=2, epochs=3)
    assert token_batches_per_epoch(data, recipe, seed=3) == per_epoch


def test_a_row_cap_with_a_budget_no_batch_reaches_cuts_batches_of_that_many_rows_of_similar_length(wmt):
    """fairseq's `--max-sentences` alone (000's SCAN batches of 256): rows in length order, cut every N rows."""
    batches = TokenBatches.pack(wmt, 10 ** 9, 256, seed=0)
    rows = len(wmt.sources)
    assert len(batches) == -(-rows // 256)
    sizes = [len(batches.batch(number)) for number in range(len(batches))]
    assert sizes[:-1] == [256] * (len(batches) - 1) and sizes[-1] == rows - 256 * (len(batches) - 1)
    lengths = [len(wmt.sources[index]) for number in range(len(batches)) for index in batches.batch(number)]
    assert lengths == sorted(lengths), "packed in source-length order"


def test_a_recipe_needs_a_batch_size_or_a_token_budget_and_update_freq_needs_tokens():
    from benchbuild.errors import BenchbuildError

    with pytest.raises(BenchbuildError, match="no batch size"):
        TrainingRecipe(learning_rate=1e-3, steps=10)
    with pytest.raises(BenchbuildError, match="'update_freq' = 4 counts token batches"):
        TrainingRecipe(learning_rate=1e-3, steps=10, batch_size=32, update_freq=4)
    assert TrainingRecipe(learning_rate=1e-3, steps=10, batch_tokens=600, update_freq=16).batch_size is None
