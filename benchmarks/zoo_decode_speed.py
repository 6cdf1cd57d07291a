"""Time `generate()` of the zoo's `transformer` with its key/value cache against recomputing the prefix, on CPU.

The first `--commands` SCAN commands of `tasks.txt` are greedy-decoded (or with `--beams` beams) by the catalogue
`transformer` (d_model 128, 8 heads, FFN 256, 3 + 3 layers; random weights, seed 0) in batches of `--batch`
commands sorted by length, as `benchbuild eval` does. Both paths must produce exactly `--length` tokens
(`min_length = max_length`), so they do the same work; each batch is decoded by both paths in alternating order,
so that load from other processes hits both alike. Prints both totals, commands per second, the ratio, and
whether the outputs are identical.

Run: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/zoo_decode_speed.py [--commands 1000] [--length 30]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import torch

from benchbuild.zoo import build_model, load_entry

PAD, BOS, EOS = 0, 1, 2
TASKS = Path("/work/shared/data/scan/tasks.txt")


def read_commands(path: Path, count: int) -> tuple[list[list[str]], list[str]]:
    """The first `count` commands of a SCAN `IN: ... OUT: ...` file and the word vocabulary of those lines."""
    commands, words = [], set()
    for line in path.read_text(encoding="utf-8").splitlines()[:count]:
        command, actions = line.removeprefix("IN: ").split(" OUT: ")
        commands.append(command.split())
        words.update(command.split(), actions.split())
    return commands, ["<pad>", "<s>", "</s>", *sorted(words)]


def batches(commands: list[list[str]], vocabulary: list[str], size: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(input_ids, attention_mask) per batch of `size` commands sorted by length, right-padded, each ending in EOS."""
    index = {word: number for number, word in enumerate(vocabulary)}
    ordered = sorted(commands, key=len)
    result = []
    for start in range(0, len(ordered), size):
        rows = [[index[word] for word in command] + [EOS] for command in ordered[start:start + size]]
        width = max(map(len, rows))
        input_ids = torch.tensor([row + [PAD] * (width - len(row)) for row in rows])
        result.append((input_ids, input_ids.ne(PAD).long()))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commands", type=int, default=1000)
    parser.add_argument("--length", type=int, default=30, help="output tokens per command, start token included")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--beams", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tasks", type=Path, default=TASKS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    commands, vocabulary = read_commands(args.tasks, args.commands)
    torch.manual_seed(0)
    model = build_model(load_entry("transformer"), vocab_size=len(vocabulary), pad_token_id=PAD,
                        bos_token_id=BOS, eos_token_id=EOS).eval()
    seconds = {True: 0.0, False: 0.0}
    outputs = {True: [], False: []}
    with torch.no_grad():
        for number, (input_ids, attention_mask) in enumerate(batches(commands, vocabulary, args.batch)):
            for use_cache in ((True, False) if number % 2 == 0 else (False, True)):
                started = time.perf_counter()
                generated = model.generate(input_ids=input_ids, attention_mask=attention_mask, do_sample=False,
                                           num_beams=args.beams, min_length=args.length, max_length=args.length,
                                           use_cache=use_cache)
                seconds[use_cache] += time.perf_counter() - started
                outputs[use_cache].append(generated)
    identical = all(torch.equal(a, b) for a, b in zip(outputs[True], outputs[False]))
    lengths = {tuple(generated.shape[1:]) for generated in outputs[True]}
    print(f"{len(commands)} SCAN commands from {args.tasks}, catalogue `transformer` (random weights), "
          f"batch {args.batch}, beams {args.beams}, {lengths} tokens per output; torch {torch.__version__}, "
          f"{torch.get_num_threads()} thread(s) (OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}), "
          f"{platform.processor() or platform.machine()}")
    for use_cache, label in ((False, "uncached (prefix recomputed)"), (True, "cached (key/value cache)")):
        print(f"{label:30s} {seconds[use_cache]:8.2f} s  {len(commands) / seconds[use_cache]:8.1f} commands/s")
    print(f"speed-up (uncached / cached time): {seconds[False] / seconds[True]:.2f}x; outputs identical: {identical}")


if __name__ == "__main__":
    main()
