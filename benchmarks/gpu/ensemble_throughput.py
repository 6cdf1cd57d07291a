"""ReaCT ensemble scoring throughput on one GPU: K members of the catalogue's `mt` size stacked into one `vmap`ped
pass against the member-by-member loop, in bf16; sentences/s and the fraction of the GPU's bf16 peak.

Issue "GPU", item 4 (goal: stacked >= 3x the loop and >= 25% of bf16 peak). Members are freshly initialised zoo
`transformer`s with `[recipe.mt.architecture]` (weights do not change the cost) over a BPE vocabulary of the recipe's
size; each scores ReaCT's cg_test sentences teacher-forced on their references (`Ensemble.score`: encoder, decoder,
log-softmax and the RMI arithmetic), in length-sorted batches, for each `--batch-sizes` value and for the batch size
that `ensemble_rmi`'s score budget (`score_budget`) gives (what `build-react` uses; a batch smaller than all of `--batch-sizes`
scores every k-th sentence of the length order, about 16 calls' worth). `--precision bf16` casts the members' weights to
bfloat16; `autocast` keeps float32 weights under `torch.autocast`; `fp32` is plain float32.

FLOPs are the model's useful forward FLOPs (2 per multiply-add) over the real, unpadded tokens of each sentence
(S source, T target tokens; d, d_ff, V, L_enc, L_dec from the architecture), per member:
  encoder  L_enc * (S * (8 d^2 + 4 d d_ff) + 4 S^2 d)
  decoder  L_dec * (T * (12 d^2 + 4 d d_ff) + 4 d^2 S + 2 T^2 d + 4 T S d)     (causal self-attention: half of 4 T^2 d)
  output   2 d V T
What `Ensemble.score` also does (a 1-token decoder pass in `encode`, padding, the RMI) is not counted as useful.

    python3 benchmarks/gpu/ensemble_throughput.py [--members 10] [--sentences 3000] [--batch-sizes 32,64,128]
        [--precision bf16] [--peak-tflops 989] [--profile]
    .venv/bin/python benchmarks/gpu/ensemble_throughput.py --smoke     # CPU, 2 tiny members: checks the script
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time
from contextlib import nullcontext
from pathlib import Path

import torch

from benchbuild.device import resolve_device
from benchbuild.react.uncertainty import Ensemble, score_budget
from benchbuild.zoo.recipe import resolve_recipe
from benchbuild.training.tokenization import build_tokenizer
from benchbuild.zoo import build_model, load_entry
from benchbuild.zoo.catalogue import resolved_architecture

ROOT = Path(__file__).resolve().parent.parent.parent
SMOKE_SIZES = {"d_model": 32, "num_heads": 4, "d_ff": 64, "encoder_layers": 1, "decoder_layers": 1}
H100_SXM_BF16_DENSE_TFLOPS = 989.0


def shared_data() -> Path:
    """`$BENCHBUILD_SHARED/data`, else `../shared/data` beside the checkout (the tests' rule)."""
    return Path(os.environ.get("BENCHBUILD_SHARED", ROOT.parent / "shared")) / "data"


def forward_flops(architecture: dict, vocabulary: int, source: int, target: int) -> float:
    """Useful forward FLOPs of one member on one sentence pair of `source` and `target` tokens (module docstring)."""
    d, d_ff = architecture["d_model"], architecture["d_ff"]
    encoder = architecture["encoder_layers"] * (source * (8 * d * d + 4 * d * d_ff) + 4 * source * source * d)
    decoder = architecture["decoder_layers"] * (target * (12 * d * d + 4 * d * d_ff) + 4 * d * d * source
                                                + 2 * target * target * d + 4 * target * source * d)
    return float(encoder + decoder + 2 * d * vocabulary * target)


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--sentences", type=int, default=3000, help="ReaCT cg_test sentences scored per round")
    parser.add_argument("--batch-sizes", default="32,64,128", help="sentences per Ensemble.score call, comma-separated")
    parser.add_argument("--precision", choices=("bf16", "autocast", "fp32"), default="bf16")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per variant (median reported)")
    parser.add_argument("--peak-tflops", type=float, default=H100_SXM_BF16_DENSE_TFLOPS,
                        help="the GPU's dense bf16 peak (default: H100 SXM)")
    parser.add_argument("--profile", action="store_true", help="torch.profiler over the stacked variant's largest "
                        "batch size: where the time goes")
    parser.add_argument("--smoke", action="store_true", help="CPU, 2 members 32 wide, 24 sentences, one round: "
                        "checks the script, measures nothing")
    args = parser.parse_args()
    sizes = {}
    if args.smoke:
        args.device, args.members, args.sentences, args.batch_sizes, args.rounds = "cpu", 2, 24, "8,12", 1
        sizes = SMOKE_SIZES
    device = resolve_device(args.device)
    batch_sizes = [int(size) for size in args.batch_sizes.split(",")]

    entry = load_entry("transformer")
    architecture = {**resolved_architecture(entry, "mt"), **sizes}
    recipe = resolve_recipe(entry.recipes, "mt")
    react = shared_data() / "react"
    read = lambda name: (react / name).read_text(encoding="utf-8").splitlines()  # noqa: E731
    vocabulary_size = 500 if args.smoke else recipe.bpe_vocab_size
    lines = 1000 if args.smoke else None
    corpus = read("valid.de")[:lines] + read("valid.en")[:lines]
    tokenizer = build_tokenizer(corpus, recipe.tokenizer_kind, vocabulary_size)
    sources, references = read("cg_test.de")[:args.sentences], read("cg_test.en")[:args.sentences]
    hypotheses = tokenizer(references)["input_ids"]
    source_lengths = [len(ids) for ids in tokenizer(sources)["input_ids"]]
    order = sorted(range(len(sources)), key=lambda index: (len(hypotheses[index]), source_lengths[index], index))
    vocabulary = len(tokenizer)

    def useful_flops(sentences: list[int]) -> float:
        return args.members * sum(forward_flops(architecture, vocabulary, source_lengths[index], len(hypotheses[index]))
                                  for index in sentences)

    longest = max(len(ids) for ids in hypotheses)
    budget = score_budget(device)
    budget_batch = max(1, budget // (args.members * longest * vocabulary))

    members = []
    for seed in range(args.members):
        torch.manual_seed(seed)
        member = build_model(entry, vocab_size=vocabulary, pad_token_id=tokenizer.pad_token_id,
                             bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                             overrides={key: value for key, value in architecture.items() if key != "kind"})
        members.append(member.to(torch.bfloat16) if args.precision == "bf16" else member)
    parameters = sum(p.numel() for p in members[0].parameters())
    name = torch.cuda.get_device_name(device) if device.startswith("cuda") else "CPU"
    print(f"{args.members} members of transformer [recipe.mt] ({parameters / 1e6:.1f}M parameters each: "
          f"{ {k: v for k, v in architecture.items() if k != 'kind'} }), vocabulary {vocabulary:,}, "
          f"{len(sources):,} cg_test sentences (source {sum(source_lengths):,} tokens, target "
          f"{sum(map(len, hypotheses)):,} tokens), {args.precision}, {name}, torch {torch.__version__}")
    print(f"useful forward FLOPs per round: {useful_flops(order) / 1e12:.3f} TFLOP; peak {args.peak_tflops:g} TFLOP/s; "
          f"ensemble_rmi's score budget here ({budget:,} elements) gives batches of {budget_batch} sentences",
          flush=True)

    variants = {"stacked (vmap)": Ensemble([copy.deepcopy(m) for m in members], tokenizer, device=device, batched=True),
                "member loop": Ensemble(members, tokenizer, device=device, batched=False)}
    autocast = (torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)
                if args.precision == "autocast" else nullcontext())

    def score_all(ensemble: Ensemble, batch: int, sentences: list[int]) -> torch.Tensor:
        with autocast:
            scores = [ensemble.score([sources[i] for i in sentences[start:start + batch]],
                                     [hypotheses[i] for i in sentences[start:start + batch]])
                      for start in range(0, len(sentences), batch)]
        synchronize(device)
        return torch.cat(scores)

    rows = []
    for batch in sorted(set(batch_sizes + [budget_batch])):
        # Small batches take many calls: they score every k-th sentence of the length order, ~16 calls' worth.
        sentences = order[::max(1, len(order) // (16 * batch))] if batch < min(batch_sizes) else order
        flops = useful_flops(sentences)
        outputs, rates = {}, {}
        for label, ensemble in variants.items():
            if not args.smoke:
                score_all(ensemble, batch, sentences)  # warm-up: kernels, the allocator's pools
            seconds = []
            for _ in range(args.rounds):
                started = time.perf_counter()
                outputs[label] = score_all(ensemble, batch, sentences)
                seconds.append(time.perf_counter() - started)
            wall = statistics.median(seconds)
            rates[label] = len(sentences) / wall
            tflops = flops / wall / 1e12
            rows.append((batch, label, rates[label], tflops))
            share = 100 * tflops / args.peak_tflops
            print(f"batch {batch:>4}  {label:<15} {len(sentences):>5} sentences {wall:8.3f} s  "
                  f"{rates[label]:9.1f} sentences/s  {tflops:8.2f} TFLOP/s  {share:6.2f}% of peak", flush=True)
        difference = (outputs["stacked (vmap)"] - outputs["member loop"]).abs().max().item()
        print(f"batch {batch:>4}  stacked / loop: {rates['stacked (vmap)'] / rates['member loop']:.2f}x; "
              f"largest RMI difference {difference:.2e}", flush=True)

    best = max((row for row in rows if row[1] == "stacked (vmap)"), key=lambda row: row[2])
    loop_at_best = next(row for row in rows if row[0] == best[0] and row[1] == "member loop")
    speedup, fraction = best[2] / loop_at_best[2], best[3] / args.peak_tflops
    print(f"best stacked: batch {best[0]}, {best[2]:.1f} sentences/s, {speedup:.2f}x the member loop, "
          f"{100 * fraction:.2f}% of bf16 peak; goal (>= 3x and >= 25%): "
          f"{'reached' if speedup >= 3 and fraction >= 0.25 else 'not reached'}")

    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
        batch = max(batch_sizes)
        with profile(activities=activities) as profiler:
            score_all(variants["stacked (vmap)"], batch, order)
        sort = "self_device_time_total" if device.startswith("cuda") else "self_cpu_time_total"
        print(f"profile of the stacked variant, batch {batch}, sorted by {sort}:")
        print(profiler.key_averages().table(sort_by=sort, row_limit=25))


if __name__ == "__main__":
    main()
