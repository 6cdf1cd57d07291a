"""`build-react` end to end on one GPU on the shared data, 10 members of the default member architecture (the zoo
`transformer`'s `mt` recipe: 000 App. A.2's IWSLT model) trained a few hundred steps each: wall time per stage.

Issue "GPU", item 5. The inputs are the README's small run (IWSLT14 valid as the training corpus, IWSLT14 test as
validation, pools: ReaCT's cg_test and the WMT14 sample), built with an empty stage cache. Stages are timed by
wrapping `benchbuild.react.build`'s stage functions: normalization (`_read`), candidates (OOV filter, n-gram
dictionary lookups, compositional degree, top of the pool: `_candidates`), ensemble training (`_train_ensemble`;
each member's training and validation seconds from its `run.json` too), uncertainty (beam decoding and RMI:
`_uncertainty`), the rest of `build_react` (the n-gram dictionary, selection, the splits' degrees, Table 2, the
card) and `Benchmark.save`.

    python3 benchmarks/gpu/react_stages.py [--device cuda] [--members 10] [--max-steps 300] [--pool-size 1000]
    .venv/bin/python benchmarks/gpu/react_stages.py --smoke     # CPU, 2 members 32 wide, 10 steps: checks the script
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import time
from pathlib import Path

import torch

from benchbuild.device import resolve_device
from benchbuild.react import build
from benchbuild.react.parameters import ReactParameters

ROOT = Path(__file__).resolve().parent.parent.parent
SMOKE_SIZES = {"d_model": 32, "num_heads": 2, "d_ff": 64, "encoder_layers": 1, "decoder_layers": 1}
STAGES = {"_read": "normalization", "_candidates": "candidates (OOV filter, degree, top of the pool)",
          "_train_ensemble": "ensemble training", "_uncertainty": "uncertainty (beam + RMI)"}


def shared_data() -> Path:
    """`$BENCHBUILD_SHARED/data`, else `../shared/data` beside the checkout (the tests' rule)."""
    return Path(os.environ.get("BENCHBUILD_SHARED", ROOT.parent / "shared")) / "data"


def corpora(data: Path) -> dict[str, object]:
    """The README's small run: IWSLT14 valid to train on, IWSLT14 test to validate on, cg_test and WMT14 as pools."""
    react, wmt = data / "react", data / "wmt14-ende-sample"
    return {"train_src": react / "valid.de", "train_tgt": react / "valid.en", "valid_src": react / "test.de",
            "valid_tgt": react / "test.en", "pool_src": [react / "cg_test.de", wmt / "train.de"],
            "pool_tgt": [react / "cg_test.en", wmt / "train.en"]}


def smoke_parameters(work: Path) -> ReactParameters:
    """A run that only checks the script: the README's corpora without the validation corpus (10% of the training
    corpus held out instead), 2 members 32 wide, 10 steps, pool pairs of at most 16 tokens, beam 2."""
    files = corpora(shared_data())
    del files["valid_src"], files["valid_tgt"]
    return ReactParameters(
        **files, lowercase=True, max_length=16, pool_size=60, ensemble_size=2, max_steps=10,
        ensemble_architecture=[f"{key}={value}" for key, value in SMOKE_SIZES.items()],
        ensemble_set=["bpe_vocab_size=500", "batch_size=16"], beam=2, batch_size=64, drop_top=5, band=30, sample=10,
        allow_small=True, cache_dir=work / "cache", ensemble_dir=work / "members", device="cpu")


def timed_stages(seconds: dict[str, float]) -> None:
    """Wrap `build`'s stage functions so each call adds its wall time to `seconds` (build_react looks them up as
    module globals at call time, so the wrappers are what it calls)."""
    for function, stage in STAGES.items():
        original = getattr(build, function)

        @functools.wraps(original)
        def wrapper(*args, original=original, stage=stage, **kwargs):
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                seconds[stage] = seconds.get(stage, 0.0) + time.perf_counter() - started

        setattr(build, function, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--max-steps", type=int, default=300)
    parser.add_argument("--pool-size", type=int, default=1000)
    parser.add_argument("--drop-top", type=int, default=50)
    parser.add_argument("--band", type=int, default=500)
    parser.add_argument("--sample", type=int, default=200)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64, help="sentences decoded at once")
    parser.add_argument("--work", type=Path, default=Path("/tmp/benchbuild-gpu/react"))
    parser.add_argument("--smoke", action="store_true", help="CPU, 2 members 32 wide, 10 steps, small corpora "
                        "(smoke_parameters): checks the script, measures nothing")
    args = parser.parse_args()
    if args.smoke:
        args.work = args.work.parent / "react-smoke"
    shutil.rmtree(args.work, ignore_errors=True)  # an empty stage cache: every stage runs
    parameters = smoke_parameters(args.work) if args.smoke else ReactParameters(
        **corpora(shared_data()), lowercase=True, pool_size=args.pool_size, ensemble_size=args.members,
        max_steps=args.max_steps, beam=args.beam, batch_size=args.batch_size, drop_top=args.drop_top,
        band=args.band, sample=args.sample, allow_small=True, cache_dir=args.work / "cache",
        ensemble_dir=args.work / "members", device=args.device)
    device = resolve_device(parameters.device)
    name = torch.cuda.get_device_name(device) if device.startswith("cuda") else "CPU"
    print(f"build-react on {name} (torch {torch.__version__}): {parameters.ensemble_size} members of "
          f"{parameters.ensemble_model} [recipe.mt] {parameters.architecture_overrides or ''}, {parameters.max_steps} "
          f"steps each, pool {parameters.pool_size}, beam {parameters.beam}, sample {parameters.sample}", flush=True)

    seconds: dict[str, float] = {}
    timed_stages(seconds)
    started = time.perf_counter()
    benchmark = build.build_react(parameters, progress=False)
    built = time.perf_counter() - started
    saving = time.perf_counter()
    benchmark.save(args.work / "react")
    saved = time.perf_counter() - saving
    seconds["n-gram dictionary, selection, split degrees, Table 2 (rest)"] = built - sum(seconds.values())
    seconds["save"] = saved

    members = []
    for member in sorted(Path(parameters.ensemble_dir).glob("member-*")):
        run = json.loads((member / "run.json").read_text(encoding="utf-8"))
        members.append({"member": member.name, "steps": run["steps_done"], "elapsed_s": run["elapsed_s"],
                        "device": run["device"], "mixed_precision": run["mixed_precision"]})
    total = built + saved
    for stage, value in seconds.items():
        print(f"  {stage:<60} {value:8.1f} s  {100 * value / total:5.1f}%")
    print(f"  {'total':<60} {total:8.1f} s")
    print(json.dumps({"device": name, "stages_s": {k: round(v, 1) for k, v in seconds.items()},
                      "total_s": round(total, 1), "members": members,
                      "splits": {split: info.rows for split, info in benchmark.info.splits.items()}}, indent=2))


if __name__ == "__main__":
    main()
