"""What one training update costs on one CPU thread, for the models the CPU queue trains, against the core's own speed.

For each case: the update (forward, loss, backward, the recipe's gradient clipping, fused AdamW: what `train` does per
step) on real SCAN rows at the recipe's batch size and architecture; its median time on one thread; its FLOPs
(torch's FlopCounterMode, forward and backward); the ratio of the update's time to a 512×512 float32 matrix product
timed between the updates of the same run (the machine is shared and noisy: the ratio is what compares across runs);
the FLOP rate as a share of the matrix product's; and the profile's top operators by self time.

Cases: 002's `syntactic_attention` (recipe scan, batch 1) as it runs now, with its one-node loops' steps as torch
operators (`sa-torch-loops`: before the compiled loops of benchbuild.zoo.recurrent_kernels) and with its LSTMs back on
torch's oneDNN kernels (`sa-onednn`: the update before the unrolled cell and the one-node decoder loop);
`lstm_attention` (scan, batch 1) likewise (`lstm-torch-loops`; `lstm-onednn`: its 2-layer encoder one `nn.LSTM` call, its decoder one
`nn.LSTMCell` step at a time under plain autograd); the zoo `transformer` with 000's SCAN recipe (scan_000) and
003's (scan), 003's `universal_transformer` and `relative_universal_transformer` (scan), batch 256.

Run: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/update_cost.py [--updates 40]
      [--cases sa,sa-torch-loops,sa-onednn,lstm,lstm-torch-loops,lstm-onednn,t000,t003,ut,rut]
      [--profile]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import time
from pathlib import Path
from unittest import mock

import torch
from torch.utils.flop_counter import FlopCounterMode

from benchbuild.training.tokenization import word_level_tokenizer
from benchbuild.zoo import build_model, load_entry
from benchbuild.zoo import lstm_attention, recurrent, recurrent_kernels
from benchbuild.zoo.catalogue import resolved_architecture
from benchbuild.zoo.recipe import resolve_recipe

SHARED = Path(os.environ.get("BENCHBUILD_SHARED", Path(__file__).resolve().parents[2] / "shared"))
SCAN_TRAIN = SHARED / "data" / "scan" / "add_prim_split" / "tasks_train_addprim_jump.txt"

CASES = {  # name: (entry, recipe, the path: "now", "torch-loops" or "onednn")
    "sa": ("syntactic_attention", "scan", "now"),
    "sa-torch-loops": ("syntactic_attention", "scan", "torch-loops"),
    "sa-onednn": ("syntactic_attention", "scan", "onednn"),
    "lstm": ("lstm_attention", "scan", "now"),
    "lstm-torch-loops": ("lstm_attention", "scan", "torch-loops"),
    "lstm-onednn": ("lstm_attention", "scan", "onednn"),
    "t000": ("transformer", "scan_000", "now"),
    "t003": ("transformer", "scan", "now"),
    "ut": ("universal_transformer", "scan", "now"),
    "rut": ("relative_universal_transformer", "scan", "now"),
}
PATHS = {"now": contextlib.nullcontext, "torch-loops": lambda: torch_loops(), "onednn": lambda: onednn_lstms()}


@contextlib.contextmanager
def torch_loops():
    """The one-node recurrences with their steps as torch operators (benchbuild.zoo.recurrent before the compiled
    loops of recurrent_kernels, 2026-12-05): what a GPU and batches of more than a few rows still run."""
    with mock.patch.object(recurrent_kernels, "uses_kernels", lambda *tensors: False):
        yield


@contextlib.contextmanager
def onednn_lstms():
    """The recurrent layers as they ran before 2026-12-05: every LSTM through torch's own (oneDNN) kernels, packed,
    Syntactic Attention's decoder one `nn.LSTM` call per step and `lstm_attention`'s one `nn.LSTMCell` call per step,
    under plain autograd."""
    def packed(lstm, inputs, mask):
        from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

        lengths = mask.sum(1).clamp(min=1).cpu()
        output, final = lstm(pack_padded_sequence(inputs, lengths, batch_first=True, enforce_sorted=False))
        output, _ = pad_packed_sequence(output, batch_first=True, total_length=inputs.size(1))
        return output, final

    def loop(keys, mask, query, weight_ih, bias_ih, weight_hh, bias_hh, steps):
        state, weights = None, []
        for step in range(steps):
            alpha = recurrent.dot_attention(query, keys, mask)
            weights.append(alpha)
            if step + 1 < steps:
                context = torch.einsum("bl,bld->bd", alpha, keys)
                if state is None:
                    zero = keys.new_zeros(1, keys.size(0), weight_hh.size(1))
                    state = (zero, zero)
                # aten::lstm, what nn.LSTM calls: oneDNN on the CPU
                output, hidden, cell = torch.lstm(context[:, None], state, [weight_ih, weight_hh, bias_ih, bias_hh],
                                                  True, 1, 0.0, True, False, True)
                state, query = (hidden, cell), output[:, 0]
        return torch.stack(weights, dim=1)

    def attentive(cell, embedded, keys, mask):
        batch, width = keys.size(0), keys.size(-1)
        state, memory_cell, context = (keys.new_zeros(batch, width) for _ in range(3))
        states, weights = [], []
        for step in range(embedded.size(1)):
            state, memory_cell = cell(torch.cat([embedded[:, step], context], dim=-1), (state, memory_cell))
            alpha = recurrent.dot_attention(state, keys, mask)
            context = torch.einsum("bl,bld->bd", alpha, keys)
            states.append(state)
            weights.append(alpha)
        weights = torch.stack(weights, dim=1)
        return torch.cat([torch.stack(states, dim=1), torch.einsum("btl,bld->btd", weights, keys)], dim=-1), weights

    with mock.patch.object(recurrent, "unrolled_lstm", packed), mock.patch.object(recurrent, "stacked_lstm", packed), \
            mock.patch.object(recurrent.AttentionLoop, "apply", loop), \
            mock.patch.object(lstm_attention, "attentive_decoder", attentive):
        yield


def scan_rows(count: int) -> tuple[list[str], list[str]]:
    sources, targets = [], []
    for line in SCAN_TRAIN.read_text().splitlines()[:count]:
        source, target = line[len("IN: "):].split(" OUT: ")
        sources.append(source)
        targets.append(target)
    return sources, targets


def make_update(case: str, compile_model: bool = False):
    """The update of `case` on its recipe's batch, cycling through real rows: a function of the update's index; with
    `compile_model`, the forward pass through `torch.compile(network)` (benchmarks/compile_cost.py)."""
    name, family, _ = CASES[case]
    entry = load_entry(name)
    recipe = resolve_recipe(entry.recipes, family)
    sources, targets = scan_rows(4096)
    tokenizer = word_level_tokenizer(sources + targets)
    torch.manual_seed(0)
    architecture = {key: value for key, value in resolved_architecture(entry, family).items() if key != "kind"}
    network = build_model(entry, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                          bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                          overrides=architecture).train()
    optimizer = torch.optim.AdamW(network.parameters(), lr=recipe.learning_rate, weight_decay=0.0, fused=True)
    forward = torch.compile(network) if compile_model else network
    batches = []
    for start in range(0, len(sources), recipe.batch_size):
        encoded = tokenizer(sources[start:start + recipe.batch_size], padding=True, return_tensors="pt")
        labels = tokenizer(targets[start:start + recipe.batch_size], padding=True, return_tensors="pt")
        batches.append((encoded.input_ids, encoded.attention_mask,
                        labels.input_ids.masked_fill(labels.attention_mask == 0, -100)))
        if len(batches) == 64:
            break

    def update(index: int) -> None:
        input_ids, mask, labels = batches[index % len(batches)]
        loss = forward(input_ids=input_ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        if recipe.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(network.parameters(), recipe.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return update, recipe.batch_size, sum(p.numel() for p in network.parameters())


def matmul_seconds(a: torch.Tensor, b: torch.Tensor) -> float:
    started = time.perf_counter()
    for _ in range(5):
        torch.mm(a, b)
    return (time.perf_counter() - started) / 5


def measure(case: str, updates: int, profile: bool) -> dict:
    update, batch, parameters = make_update(case)
    patch = PATHS[CASES[case][2]]()
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    with patch:
        for index in range(3):  # warm-up
            update(index)
        with FlopCounterMode(display=False) as counter:
            update(3)
        flops = counter.get_total_flops()
        times, matmuls = [], []
        for index in range(updates):
            matmuls.append(matmul_seconds(a, b))
            started = time.perf_counter()
            update(4 + index)
            times.append(time.perf_counter() - started)
        top = []
        if profile:
            with torch.profiler.profile() as profiler:
                for index in range(5):
                    update(index)
            table = sorted(profiler.key_averages(), key=lambda event: -event.self_cpu_time_total)[:5]
            total = sum(event.self_cpu_time_total for event in profiler.key_averages())
            top = [f"{event.key} {100 * event.self_cpu_time_total / total:.0f}%" for event in table]
    step, matmul = statistics.median(times), statistics.median(matmuls)
    matmul_rate = 2 * 512 ** 3 / matmul
    return {"case": case, "batch": batch, "parameters": parameters, "ms": step * 1e3, "ratio": step / matmul,
            "gflop": flops / 1e9, "share": (flops / step) / matmul_rate, "matmul_ms": matmul * 1e3, "top": top}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=40)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--profile", action="store_true", help="also print each case's top 5 operators by self time")
    arguments = parser.parse_args()
    torch.set_num_threads(1)
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, python {platform.python_version()}, torch "
          f"{torch.__version__}, threads {torch.get_num_threads()}, load {os.getloadavg()[0]:.2f}")
    print(f"{'case':<10} {'batch':>5} {'params':>10} {'update ms':>10} {'x matmul':>9} {'GFLOP':>8} "
          f"{'% matmul rate':>13}")
    results = {}
    for case in arguments.cases.split(","):
        result = measure(case, arguments.updates, arguments.profile)
        results[case] = result
        print(f"{case:<10} {result['batch']:>5} {result['parameters']:>10,} {result['ms']:>10.1f} "
              f"{result['ratio']:>9.1f} {result['gflop']:>8.3f} {100 * result['share']:>12.1f}%")
        if result["top"]:
            print("           top: " + "; ".join(result["top"]))
    for model, name in (("sa", "syntactic_attention"), ("lstm", "lstm_attention")):
        for before in ("onednn", "torch-loops"):
            if model in results and f"{model}-{before}" in results:
                print(f"{name}: {before} / now = {results[f'{model}-{before}']['ratio'] / results[model]['ratio']:.2f}x "
                      "(ratios to the same run's matmul)")


if __name__ == "__main__":
    main()
