"""Test exact match along one run, every `--every` steps (issue #43, experiment 4: does 000's SAG + T5 on jump peak far
above its final value?). `train` never validates on a test split (model selection must not peek at it), so this
script trains the run in segments of `--every` steps (each resumes the run folder: a resumed run follows the
uninterrupted loss curve) and after each scores the test split with the checkpoint at the run folder's root (under
the recipe's `select = "last"`: the latest weights) by greedy exact match from one teacher-forced pass per batch
(`greedy_matches`, equal to greedy decoding). The curve goes to `OUT/test_curve.jsonl`, one line per point; rerun the
same command to go on after a stop (points already scored are kept).

    python benchmarks/exact_match_curve.py --model sag_t5 --data out/scan/addprim_jump --out runs/issue43/curve-seed0 \\
        [--seed 0] [--every 500] [--steps 14327] [--device cpu]
    python benchmarks/exact_match_curve.py --smoke --work DIR    # a tiny model, 2 points of 2 steps: checks the script
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from benchbuild.benchmark import load_splits
from benchbuild.device import cpu_threads
from benchbuild.training.loop import train
from benchbuild.training.validation import greedy_matches
from benchbuild.zoo.loading import load_model, load_tokenizer

CURVE_FILE = "test_curve.jsonl"


def scored_points(out: Path) -> dict[int, dict]:
    path = out / CURVE_FILE
    if not path.is_file():
        return {}
    return {point["step"]: point for point in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def scored_exact_match(out: Path, sources: list[str], targets: list[str], device: str, batch_size: int) -> float:
    network = load_model(out).to(device).eval()
    matches = greedy_matches(network, load_tokenizer(out), sources, targets, batch_size=batch_size)
    return 100.0 * sum(matches) / len(matches)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="sag_t5")
    parser.add_argument("--data", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--every", type=int, default=500)
    parser.add_argument("--steps", type=int, default=None, help="the budget (default: the recipe's)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--smoke", action="store_true", help="a 32-wide model on SCAN simple's first rows, two points "
                        "of 2 steps each, in --work: checks the script, measures nothing")
    parser.add_argument("--work", type=Path, default=Path("/tmp/test-curve-smoke"))
    args = parser.parse_args()
    architecture, overrides = None, None
    if args.smoke:
        from benchbuild.scan.build import build_scan
        from benchbuild.scan.parameters import ScanParameters

        for name, benchmark in build_scan(ScanParameters(split=["simple"])):
            benchmark.save(args.work / name, overwrite=True)
        args.data, args.out, args.every, args.steps = args.work / "simple", args.work / "run", 2, 4
        architecture = {"d_model": 32, "num_heads": 4, "d_ff": 64, "encoder_layers": 1, "decoder_layers": 1}
        overrides = {"batch_size": 16}
    test = load_splits(args.data)["test"]
    sources, targets = list(test["source"]), list(test["target"])
    if args.smoke:
        sources, targets = sources[:32], targets[:32]
    done = scored_points(args.out)
    with cpu_threads(torch.get_num_threads()):
        step = args.every
        while True:
            if args.steps is not None:
                step = min(step, args.steps)
            if step not in done:
                started = time.perf_counter()
                result = train(args.model, args.data, args.out, seed=args.seed, max_steps=step, device=args.device,
                               progress=False, overrides=overrides, architecture_overrides=architecture)
                match = scored_exact_match(args.out, sources, targets, args.device, args.batch_size)
                point = {"step": result.steps, "test_exact_match": round(match, 4),
                         "seconds": round(time.perf_counter() - started, 1)}
                with open(args.out / CURVE_FILE, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps(point) + "\n")
                print(f"step {point['step']:,}: test exact match {match:.2f}% ({point['seconds']} s)", flush=True)
            if args.steps is None:
                args.steps = json.loads((args.out / "run.json").read_text(encoding="utf-8"))["recipe_steps"]
            if step >= args.steps:
                break
            step += args.every

if __name__ == "__main__":
    main()
