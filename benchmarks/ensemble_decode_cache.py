"""Ensemble beam search (ReaCT stage 7): members that keep a key/value cache fed one token a step vs recomputing the
whole prefix at every step (and the stacked vmap path, which cannot carry caches), in one run.

K freshly initialised zoo Transformers (the zoo's 128-d, 3+3 default, or `--size iwslt`) decode the first ReaCT
cg_test sentences of ../shared with a BPE vocabulary built on IWSLT14 valid; every hypothesis runs to the length
limit or `</s>` as the random members decide. The variants must find the same hypotheses (checked). Rounds alternate
the variants; medians are printed.

    .venv/bin/python benchmarks/ensemble_decode_cache.py [--members 3] [--sentences 32] [--beam 5]
        [--max-new-tokens 40] [--size catalogue] [--threads 1] [--rounds 2] [--device cpu]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from benchbuild.react.uncertainty import Ensemble
from benchbuild.training.tokenization import bpe_tokenizer
from benchbuild.zoo.transformer import TransformerConfig, TransformerForSeq2Seq

# `$BENCHBUILD_SHARED/data`, else `../shared/data` beside the checkout (the tests' rule; benchmarks/gpu/run.sh sets it).
SHARED = Path(os.environ.get("BENCHBUILD_SHARED", Path(__file__).resolve().parent.parent.parent / "shared")) / "data"
SIZES = {"catalogue": dict(d_model=128, num_heads=8, d_ff=256, encoder_layers=3, decoder_layers=3),
         "iwslt": dict(d_model=512, num_heads=4, d_ff=1024, encoder_layers=6, decoder_layers=6)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--sentences", type=int, default=32)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=40)
    parser.add_argument("--size", choices=sorted(SIZES), default="catalogue")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    react = SHARED / "react"
    sources = (react / "cg_test.de").read_text(encoding="utf-8").splitlines()[:args.sentences]
    tokenizer = bpe_tokenizer((react / "valid.de").read_text(encoding="utf-8").splitlines()
                              + (react / "valid.en").read_text(encoding="utf-8").splitlines(), vocab_size=8000)
    members = []
    for seed in range(args.members):
        torch.manual_seed(seed)
        members.append(TransformerForSeq2Seq(TransformerConfig(
            vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id, **SIZES[args.size])))
    recomputing = Ensemble(members, tokenizer, device=args.device, batched=False)
    recomputing.caches = False
    variants = {"cached, member by member": Ensemble(members, tokenizer, device=args.device, batched=False),
                "recomputing the prefix, member by member": recomputing,
                "recomputing the prefix, stacked (vmap)": Ensemble(members, tokenizer, device=args.device,
                                                                   batched=True)}
    print(f"{platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} threads, device "
          f"{args.device}; {args.members} members ({args.size}), vocabulary {len(tokenizer):,}, {len(sources)} "
          f"cg_test sentences in one batch, beam {args.beam}, <= {args.max_new_tokens} new tokens, "
          f"{args.rounds} rounds (median)")
    timings: dict[str, list[float]] = {name: [] for name in variants}
    found = {}
    for _ in range(args.rounds):
        for name, ensemble in variants.items():
            started = time.perf_counter()
            found[name] = ensemble.translate(sources, beam=args.beam, max_new_tokens=args.max_new_tokens)
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            timings[name].append(time.perf_counter() - started)
    reference = statistics.median(timings["recomputing the prefix, member by member"])
    for name, seconds in timings.items():
        median = statistics.median(seconds)
        print(f"  {name:<42} {median:7.2f} s  {len(sources) / median:7.1f} sentences/s  "
              f"{reference / median:5.2f}x")
    tokens = sum(len(hypothesis) for hypothesis in found["cached, member by member"]) / len(sources)
    print(f"same hypotheses: {len({str(hypotheses) for hypotheses in found.values()}) == 1} "
          f"(mean length {tokens:.1f} tokens)")


if __name__ == "__main__":
    main()
