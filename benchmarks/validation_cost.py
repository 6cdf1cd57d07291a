"""What a validation costs under each `validate_by`: exact match + loss (one teacher-forced pass) vs BLEU (that pass
plus beam-5 decoding of every validation row), in one run on the same model and rows.

A freshly initialised zoo Transformer (weights barely change the teacher-forced cost; an untrained model decodes to
the length limit, the worst case for BLEU) over IWSLT14 De-En validation pairs from ../shared with a BPE vocabulary
built on them. Sizes: `--size catalogue` (128-d, 3+3 layers) or `--size iwslt` (000 App. A.2: 512-d, 4 heads,
1024 FFN, 6+6).

    .venv/bin/python benchmarks/validation_cost.py [--rows 256] [--size catalogue] [--device cpu] [--threads 2]
        [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from benchbuild.training.tokenization import bpe_tokenizer
from benchbuild.training.validation import validation_scores
from benchbuild.zoo.transformer import TransformerConfig, TransformerForSeq2Seq

# `$BENCHBUILD_SHARED/data`, else `../shared/data` beside the checkout (the tests' rule; benchmarks/gpu/run.sh sets it).
SHARED = Path(os.environ.get("BENCHBUILD_SHARED", Path(__file__).resolve().parent.parent.parent / "shared")) / "data"
SIZES = {"catalogue": dict(d_model=128, num_heads=8, d_ff=256, encoder_layers=3, decoder_layers=3),
         "iwslt": dict(d_model=512, num_heads=4, d_ff=1024, encoder_layers=6, decoder_layers=6)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--size", choices=sorted(SIZES), default="catalogue")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--batch-size", type=int, default=256, help="the recipes' eval_batch_size")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    sources, targets = _pairs(args.rows)
    tokenizer = bpe_tokenizer(sources + targets, vocab_size=2000)
    torch.manual_seed(0)
    config = TransformerConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                               bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                               **SIZES[args.size])
    model = TransformerForSeq2Seq(config).to(args.device).eval()

    timings: dict[str, list[float]] = {"exact match + loss": [], "+ BLEU (beam 5)": []}
    for _ in range(args.rounds):  # alternating, so drift in the machine's speed hits both alike
        for label, bleu in (("exact match + loss", False), ("+ BLEU (beam 5)", True)):
            started = time.perf_counter()
            validation_scores(model, tokenizer, sources, targets, args.batch_size, label_smoothing=0.1, bleu=bleu)
            timings[label].append(time.perf_counter() - started)

    print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} "
          f"threads, device {args.device}; {args.size} Transformer, {len(sources)} IWSLT14 validation rows, "
          f"batch {args.batch_size}, {args.rounds} rounds (median)")
    reference = statistics.median(timings["exact match + loss"])
    for label, seconds in timings.items():
        median = statistics.median(seconds)
        print(f"  {label:<20} {median:8.2f} s  {len(sources) / median:8.1f} rows/s  {median / reference:6.1f}x")


def _pairs(count: int) -> tuple[list[str], list[str]]:
    """The first `count` IWSLT14 De-En validation pairs: (German sources, English targets)."""
    return tuple((SHARED / "react" / f"valid.{language}").read_text(encoding="utf-8").splitlines()[:count]
                 for language in ("de", "en"))


if __name__ == "__main__":
    main()
