"""SCAN `simple` on one GPU: steps/s and seconds until the zoo `transformer` (its SCAN recipe) reaches 99% test exact
match; then a stock `transformers` BART of the same sizes (the zoo's `hf` model) on the same data for the same steps.

Issue "GPU", item 2. Training runs in segments of `--segment-steps` steps: each resumes the run folder (a resumed run
follows the uninterrupted loss curve), and after each the test split is scored by greedy exact match in one
teacher-forced pass (`greedy_matches`, which equals greedy decoding). Seconds are `run.json`'s `elapsed_s`: training
plus validation (once per segment), without the segment restarts and the test scoring. The last checkpoint of each
model is finally decoded by `evaluate_run` (beam 1), the number a user of `benchbuild eval` would see.

    python3 benchmarks/gpu/scan_speed.py [--device cuda] [--work DIR] [--segment-steps 250] [--max-steps 8000]
        [--max-minutes 3] [--target 99]
    .venv/bin/python benchmarks/gpu/scan_speed.py --smoke      # CPU, 2 segments of 5 steps: checks the script
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from benchbuild.benchmark import load_splits
from benchbuild.device import resolve_device
from benchbuild.evaluation.evaluate import evaluate_run
from benchbuild.scan.build import build_scan
from benchbuild.scan.parameters import ScanParameters
from benchbuild.training.loop import train
from benchbuild.zoo.loading import load_model
from benchbuild.training.validation import greedy_matches
from benchbuild.zoo import load_entry
from benchbuild.zoo.catalogue import resolved_architecture

SMOKE_SIZES = {"d_model": 32, "num_heads": 4, "d_ff": 64, "encoder_layers": 1, "decoder_layers": 1}


def bart_of_the_same_sizes(architecture: dict) -> dict:
    """The `hf` (BART) architecture keys matching a zoo Transformer's sizes, dropouts included."""
    return {"d_model": architecture["d_model"], "encoder_layers": architecture["encoder_layers"],
            "decoder_layers": architecture["decoder_layers"],
            "encoder_attention_heads": architecture["num_heads"], "decoder_attention_heads": architecture["num_heads"],
            "encoder_ffn_dim": architecture["d_ff"], "decoder_ffn_dim": architecture["d_ff"],
            "dropout": architecture["dropout"], "attention_dropout": architecture["attention_dropout"],
            "activation_dropout": architecture.get("activation_dropout", architecture["dropout"])}


def machine(device: str) -> str:
    if device.startswith("cuda"):
        return (f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
                f"{platform.node()}")
    return f"CPU {platform.machine()} {platform.node()}, torch {torch.__version__}, {torch.get_num_threads()} threads"


def smoke_slice(data: Path, out: Path, train_rows: int = 400, test_rows: int = 100) -> Path:
    """The first rows of a built SCAN benchmark as a benchmark folder of its own (splits and build.json, no card)."""
    import datasets

    from benchbuild.benchmark import Benchmark, BuildInfo, CardFacts

    splits = load_splits(data)
    rows = {"train": splits["train"].select(range(train_rows)), "test": splits["test"].select(range(test_rows))}
    info = BuildInfo(family="scan", name="simple", parameters={"rows": {k: len(v) for k, v in rows.items()}})
    card = CardFacts(pretty_name="SCAN simple (slice)", languages=["en"], license="BSD")
    benchmark = Benchmark.from_splits(rows, info, card)
    datasets.DatasetDict(benchmark.splits).save_to_disk(str(out))
    (out / "build.json").write_text(benchmark.info.to_json(), encoding="utf-8")
    return out


@dataclass(frozen=True)
class Segments:
    """How both models train and are scored: on `device`, with catalogue recipe `recipe` and its `overrides`, in
    segments of `steps` steps, scoring the test rows after each (`batch` at a time) against `target` percent."""

    device: str
    recipe: str
    overrides: dict
    steps: int
    sources: list[str]
    targets: list[str]
    batch: int
    target: float


def train_in_segments(model: str, data: Path, run: Path, segments: Segments, *, steps: int,
                      architecture: dict | None, stop_at_target: bool, max_minutes: float | None) -> list[dict]:
    """Train `model` to `steps` in segments, scoring the test rows after each; stops early at the target (when
    `stop_at_target`) or once training and validation took `max_minutes`. Returns one record per segment."""
    from transformers import AutoTokenizer

    curve: list[dict] = []
    done = 0
    while done < steps:
        done = min(done + segments.steps, steps)
        started = time.perf_counter()
        train(model, data, run, device=segments.device, max_steps=done, recipe=segments.recipe,
              overrides={**segments.overrides, "eval_every": segments.steps}, architecture_overrides=architecture,
              progress=False, overwrite=not curve)
        wall = time.perf_counter() - started
        record = json.loads((run / "run.json").read_text(encoding="utf-8"))
        network = load_model(run).to(segments.device)
        matches = greedy_matches(network, AutoTokenizer.from_pretrained(run), segments.sources, segments.targets,
                                 batch_size=segments.batch, device=segments.device)
        accuracy = 100.0 * sum(matches) / len(matches)
        seconds = record["elapsed_s"]
        curve.append({"steps": done, "elapsed_s": seconds, "segment_wall_s": round(wall, 1),
                      "validation_exact_match": record["validation_exact_match"], "test_exact_match": accuracy})
        # A recipe that keeps its last step (`select = "last"`) on a split without validation rows validates on none.
        validation = record["validation_exact_match"]
        validated = "validation   none" if validation is None else f"validation {validation:6.2f}%"
        print(f"  {model}: {done:>6} steps  {seconds:>7.1f} s  {done / max(seconds, 1e-9):6.1f} steps/s  "
              f"{validated}  test {accuracy:6.2f}%", flush=True)
        if (stop_at_target and accuracy >= segments.target) or (max_minutes and seconds >= 60 * max_minutes):
            break
    return curve


def summary(name: str, run: Path, curve: list[dict], target: float) -> dict:
    reached = next((point for point in curve if point["test_exact_match"] >= target), None)
    last = curve[-1]
    record = json.loads((run / "run.json").read_text(encoding="utf-8"))
    return {"model": name, "device": record["device"], "mixed_precision": record["mixed_precision"],
            "steps": last["steps"], "elapsed_s": last["elapsed_s"],
            "steps_per_s": round(last["steps"] / max(last["elapsed_s"], 1e-9), 2),
            f"seconds_to_{target:g}%": reached["elapsed_s"] if reached else None,
            f"steps_to_{target:g}%": reached["steps"] if reached else None,
            "final_test_exact_match_teacher_forced": last["test_exact_match"], "curve": curve}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--recipe", default="scan", help="the catalogue recipe both models train with")
    parser.add_argument("--work", type=Path, default=Path("/tmp/benchbuild-gpu/scan"))
    parser.add_argument("--segment-steps", type=int, default=250)
    parser.add_argument("--max-steps", type=int, default=8000, help="the transformer's step cap")
    parser.add_argument("--max-minutes", type=float, default=3.0, help="the transformer's training-time cap")
    parser.add_argument("--target", type=float, default=99.0, help="test exact match (%%) to reach")
    parser.add_argument("--eval-batch", type=int, default=2048)
    parser.add_argument("--test-rows", type=int, default=None, help="score only the first N test rows")
    parser.add_argument("--no-bart", action="store_true", help="skip the BART comparison")
    parser.add_argument("--smoke", action="store_true", help="CPU, 32-wide models, 400 train rows, batches of 32, 2 "
                        "segments of 5 steps, no final decoding: checks the script, measures nothing")
    args = parser.parse_args()
    overrides, sizes = {}, {}
    if args.smoke:
        args.device, args.segment_steps, args.max_steps = "cpu", 5, 10
        args.work, overrides, sizes = args.work.parent / "scan-smoke", {"batch_size": 32}, SMOKE_SIZES
    device = resolve_device(args.device)

    data = args.work / "simple"
    if not (data / "build.json").is_file():
        for name, benchmark in build_scan(ScanParameters(split=["simple"])):
            benchmark.save(args.work / name, overwrite=True)
    if args.smoke and not (args.work / "simple-slice" / "build.json").is_file():
        smoke_slice(data, args.work / "simple-slice")
    data = args.work / "simple-slice" if args.smoke else data
    test = load_splits(data)["test"]
    rows = len(test) if args.test_rows is None else min(args.test_rows, len(test))
    scored = test[:rows]
    sources, targets = list(scored["source"]), list(scored["target"])
    architecture = {**resolved_architecture(load_entry("transformer"), args.recipe), **sizes}
    train_rows = len(load_splits(data)["train"])
    print(f"SCAN simple ({train_rows:,} train rows; {rows:,} test rows scored) on {machine(device)}")
    shown = {key: value for key, value in architecture.items() if key != "kind"}
    print(f"transformer, [recipe.{args.recipe}]: {shown}", flush=True)

    segments = Segments(device=device, recipe=args.recipe, overrides=overrides, steps=args.segment_steps,
                        sources=sources, targets=targets, batch=args.eval_batch, target=args.target)
    runs = {"transformer": args.work / "run-transformer", "hf": args.work / "run-bart"}
    curve = train_in_segments("transformer", data, runs["transformer"], segments, steps=args.max_steps,
                              architecture=sizes or None, stop_at_target=True, max_minutes=args.max_minutes)
    results = [summary("transformer", runs["transformer"], curve, args.target)]
    if not args.no_bart:
        bart = bart_of_the_same_sizes(architecture)
        print(f"hf (stock transformers BART, same sizes, same {curve[-1]['steps']} steps): {bart}", flush=True)
        bart_curve = train_in_segments("hf", data, runs["hf"], segments, steps=curve[-1]["steps"], architecture=bart,
                                       stop_at_target=False, max_minutes=None)
        results.append(summary("hf (BART)", runs["hf"], bart_curve, args.target))
    for result, run in zip(results, runs.values()):
        if args.smoke:
            result["decoded_test_exact_match"] = "skipped (--smoke)"
            continue
        started = time.perf_counter()
        metrics = evaluate_run(run, data, split="test", beam=1, batch_size=1024, device=device,
                               out=run / "test-eval")
        result["decoded_test_exact_match"] = metrics["exact_match"]
        result["decode_seconds"] = round(time.perf_counter() - started, 1)
    for result in results:
        result["curve"] = [f"{point['steps']}: {point['test_exact_match']:.2f}% at {point['elapsed_s']:.1f} s"
                           for point in result["curve"]]
    print(json.dumps({"machine": machine(device), "target_exact_match": args.target, "results": results}, indent=2))


if __name__ == "__main__":
    main()
