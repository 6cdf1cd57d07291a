"""Ensemble uncertainty (ReaCT stage 7): all members scored in one batched pass vs member by member, in one run.

K freshly initialised zoo Transformers (weights do not change the cost) teacher-forced on the same (source,
hypothesis) batches; both variants compute the same sentence RMI (checked). Sizes: `--size catalogue` (the zoo's
default 128-d, 3+3 layers) or `--size iwslt` (fairseq transformer_iwslt_de_en: 512-d, 4 heads, 1024 FFN, 6+6).

    .venv/bin/python benchmarks/ensemble_batching.py [--members 10] [--sentences 256] [--size catalogue]
        [--device cpu] [--threads 1] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from benchbuild.react.uncertainty import Ensemble, ensemble_rmi
from benchbuild.training.tokenization import bpe_tokenizer
from benchbuild.zoo.transformer import TransformerConfig, TransformerForSeq2Seq

SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
SIZES = {"catalogue": dict(d_model=128, num_heads=8, d_ff=256, encoder_layers=3, decoder_layers=3),
         "iwslt": dict(d_model=512, num_heads=4, d_ff=1024, encoder_layers=6, decoder_layers=6)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--size", choices=sorted(SIZES), default="catalogue")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--naive-sentences", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--decode", action="store_true", help="also time greedy decoding + scoring (sentences/s)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    react = SHARED / "react"
    sources = (react / "cg_test.de").read_text(encoding="utf-8").splitlines()[:args.sentences]
    targets = (react / "cg_test.en").read_text(encoding="utf-8").splitlines()[:args.sentences]
    tokenizer = bpe_tokenizer((react / "valid.de").read_text(encoding="utf-8").splitlines()
                              + (react / "valid.en").read_text(encoding="utf-8").splitlines(), vocab_size=8000)
    members = []
    for seed in range(args.members):
        torch.manual_seed(seed)
        config = TransformerConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                   bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                                   **SIZES[args.size])
        members.append(TransformerForSeq2Seq(config))
    hypotheses = tokenizer(targets)["input_ids"]
    order = sorted(range(len(sources)), key=lambda i: len(hypotheses[i]))
    batches = [order[i:i + args.batch_size] for i in range(0, len(order), args.batch_size)]
    print(f"{args.members} members ({args.size}: {SIZES[args.size]}), vocabulary {len(tokenizer):,}, "
          f"{len(sources)} cg_test sentences in batches of {args.batch_size}, device {args.device}, "
          f"torch threads {torch.get_num_threads()}")

    ensembles = {"member by member": Ensemble(members, tokenizer, device=args.device, batched=False),
                 "all members at once (vmap)": Ensemble(members, tokenizer, device=args.device, batched=True)}
    naive_subset = order[:args.naive_sentences]

    def score_batches(ensemble: Ensemble, groups: list[list[int]]) -> torch.Tensor:
        scores = torch.cat([ensemble.score([sources[i] for i in group], [hypotheses[i] for i in group])
                            for group in groups])
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        return scores

    variants = {name: (ensemble, batches) for name, ensemble in ensembles.items()}
    variants["member by member, one sentence at a time"] = (ensembles["member by member"], [[i] for i in naive_subset])
    for ensemble, groups in variants.values():
        score_batches(ensemble, groups[:1])  # warm-up
    # Rounds alternate the variants, so load from other processes hits all of them alike; medians are reported.
    timings: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    outputs = {}
    for _ in range(args.rounds):
        for name, (ensemble, groups) in variants.items():
            started, cpu = time.perf_counter(), time.process_time()
            outputs[name] = score_batches(ensemble, groups)
            timings[name].append((time.perf_counter() - started, time.process_time() - cpu))
    rates = {}
    for name, (_, groups) in variants.items():
        sentences = sum(len(group) for group in groups)
        wall = statistics.median(t[0] for t in timings[name])
        cpu = statistics.median(t[1] for t in timings[name])
        rates[name] = (sentences / wall, sentences / cpu)
        print(f"{name}: {sentences} sentences, median of {args.rounds} rounds {wall:.2f} s wall "
              f"({rates[name][0]:.1f} sentences/s), {cpu:.2f} s CPU ({rates[name][1]:.1f} sentences/s)")
    loop, stacked, naive = outputs.values()
    same = torch.allclose(loop, stacked, atol=1e-4) and torch.allclose(naive, stacked[:len(naive)], atol=1e-4)
    print(f"same RMI: {same}")
    names = list(variants)
    for baseline in (names[0], names[2]):
        print(f"speed-up of {names[1]} over {baseline}: {rates[names[1]][0] / rates[baseline][0]:.2f}x wall, "
              f"{rates[names[1]][1] / rates[baseline][1]:.2f}x CPU")
    if args.decode:
        ensemble = Ensemble(members, tokenizer, device=args.device, batched=True)
        started = time.perf_counter()
        ensemble_rmi(ensemble, sources, beam=1, batch_size=args.batch_size, max_new_tokens=64)
        seconds = time.perf_counter() - started
        print(f"decode (greedy, ≤64 new tokens) + score with all members at once: {len(sources) / seconds:.1f} "
              "sentences/s")


if __name__ == "__main__":
    main()
