"""Does 002's loss over the actions alone make our Syntactic Attention seeds train that stay at the action marginals
under ours (the cross-entropy over the whole shared vocabulary)?

The zoo's `syntactic_attention` equals 002's code weight for weight, step for step, but for one thing its reference
tests pin (tests/reference/test_syntactic_attention_002.py): our loss normalises over every token of one shared
vocabulary (instruction words included), 002's over the actions, `<SOS>` and `<EOS>`. This trains seed S as `benchbuild
train` does (the same plan, initial draw, batches and dropout masks: the loss consumes no random numbers) for
`--steps` updates with the loss over the target tokens only, and prints the run's logged mean losses, to set beside
the same seed's run under our loss (benchbuild/ledger.toml, benchmarks/RESULTS.md "002 Table 1 on addprim_jump").

    OMP_NUM_THREADS=1 nice -n 19 .venv/bin/python benchmarks/sa_action_loss.py --data out/scan/addprim_jump \\
        --seed 1 --steps 11736 --out runs/sa_action_loss/seed1
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import torch.nn.functional as F

import benchbuild.training.loop as loop
from benchbuild.training.plan import RunOptions, plan_run


def target_token_ids(plan) -> torch.Tensor:
    """The ids of every token a target of the rows trained on holds (the actions and `</s>`) and of `<s>`: 002's
    output vocabulary (data.py: `<SOS>`, the six actions, `<EOS>`)."""
    ids = {token for encoded in plan.train_encoded.targets for token in encoded} | {plan.tokenizer.bos_token_id}
    return torch.tensor(sorted(ids), dtype=torch.long)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--steps", type=int, default=11736)
    parser.add_argument("--out", required=True)
    parser.add_argument("--loss", choices=["actions", "vocabulary"], default="actions")
    arguments = parser.parse_args()
    options = RunOptions(seed=arguments.seed, max_steps=arguments.steps, device="cpu", progress=False)
    plan = plan_run("syntactic_attention", arguments.data, arguments.out, options)
    actions = target_token_ids(plan)
    print(f"seed {arguments.seed}: loss over {arguments.loss} ({len(actions)} target tokens of "
          f"{len(plan.tokenizer)} in the vocabulary)", flush=True)
    if arguments.loss == "actions":
        position = torch.full((len(plan.tokenizer),), -100, dtype=torch.long)
        position[actions] = torch.arange(len(actions))

        def over_actions(logits, labels, recipe):
            mapped = torch.where(labels >= 0, position.to(labels.device)[labels.clamp(min=0)], labels)
            return F.cross_entropy(logits[..., actions.to(logits.device)].float().reshape(-1, len(actions)),
                                   mapped.reshape(-1), ignore_index=-100, label_smoothing=recipe.label_smoothing,
                                   reduction="sum")

        loop._summed_loss = over_actions
    loop.train("syntactic_attention", arguments.data, arguments.out, seed=arguments.seed, max_steps=arguments.steps,
               device="cpu", progress=False)
    logged = [json.loads(line) for line in (Path(arguments.out) / "train_log.jsonl").read_text().splitlines()]
    for line in logged:
        if "loss" in line:
            print(f"seed {arguments.seed} ({arguments.loss}): mean loss to step {line['step']:,}: {line['loss']:.4f}")


if __name__ == "__main__":
    main()
