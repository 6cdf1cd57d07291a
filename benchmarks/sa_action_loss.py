"""Does 002's loss over the actions alone make our Syntactic Attention seeds train that stay at the action marginals
under the cross-entropy over the whole shared vocabulary?

The zoo's `syntactic_attention` equals 002's code weight for weight and step for step
(tests/reference/test_syntactic_attention_002.py); until 2026-12-05 but for one thing: its softmax ran over every token
of one shared vocabulary (instruction words included), 002's over the actions, `<SOS>` and `<EOS>`. The architecture
key `output_vocabulary` now says which (`targets`, 002's, the default; `all`, the old one). This trains seed S as
`benchbuild train` does (the same plan, initial draw, batches and dropout masks: the loss consumes no random numbers)
for `--steps` updates under either and prints the run's logged mean losses, to set the two beside each other.

    OMP_NUM_THREADS=1 nice -n 19 .venv/bin/python benchmarks/sa_action_loss.py --data out/scan/addprim_jump \\
        --seed 1 --steps 11736 --loss actions --out runs/sa_action_loss/actions/seed1
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import benchbuild.training.loop as loop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--steps", type=int, default=11736)
    parser.add_argument("--out", required=True)
    parser.add_argument("--loss", choices=["actions", "vocabulary"], default="actions")
    arguments = parser.parse_args()
    vocabulary = {"actions": "targets", "vocabulary": "all"}[arguments.loss]
    loop.train("syntactic_attention", arguments.data, arguments.out, seed=arguments.seed, max_steps=arguments.steps,
               device="cpu", progress=False, architecture_overrides={"output_vocabulary": vocabulary})
    logged = [json.loads(line) for line in (Path(arguments.out) / "train_log.jsonl").read_text().splitlines()]
    for line in logged:
        if "loss" in line:
            print(f"seed {arguments.seed} ({arguments.loss}): mean loss to step {line['step']:,}: {line['loss']:.4f}")


if __name__ == "__main__":
    main()
