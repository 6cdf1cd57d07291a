"""Time one training step of the zoo's `transformer` against `torch.nn.Transformer` of the same sizes, on CPU.

A step is forward + backward + AdamW step on the same SCAN-shaped batch (source 10, target 30 tokens, padding in
both). Both models get the same work: shared embeddings with the output layer tied, sinusoidal positions, key
padding masks, a causal decoder mask and the mean token cross-entropy. Steps alternate between the two models in
one run so that load from other processes hits both alike; the medians and their ratio are printed (goal ≤ 1.2).

Run: .venv/bin/python benchmarks/zoo_step_time.py [--steps 30] [--batch 128]
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from benchbuild.zoo import build_model, load_entry
from benchbuild.zoo.positions import sinusoid

PAD, BOS, EOS = 0, 1, 2


class TorchTransformer(nn.Module):
    """`torch.nn.Transformer` wrapped with the same embedding, positions, tied output and loss as the zoo model."""

    def __init__(self, vocab_size: int, d_model: int, heads: int, d_ff: int, layers: int, dropout: float):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model)
        nn.init.xavier_uniform_(self.embedding.weight)
        self.transformer = nn.Transformer(d_model, heads, layers, layers, d_ff, dropout, batch_first=True)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        positions = sinusoid(torch.arange(ids.size(1)), self.d_model)
        return self.embedding(ids) * math.sqrt(self.d_model) + positions

    def forward(self, input_ids, attention_mask, decoder_input_ids, labels):
        causal = nn.Transformer.generate_square_subsequent_mask(decoder_input_ids.size(1))
        padding = attention_mask.eq(0)
        hidden = self.transformer(self.embed(input_ids), self.embed(decoder_input_ids), tgt_mask=causal,
                                  src_key_padding_mask=padding, memory_key_padding_mask=padding, tgt_is_causal=True)
        logits = F.linear(hidden, self.embedding.weight)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=-100)


def scan_shaped_batch(batch: int, vocab: int, source_length: int = 10, target_length: int = 30):
    generator = torch.Generator().manual_seed(0)
    source = torch.randint(3, vocab, (batch, source_length), generator=generator)
    source_lengths = torch.randint(3, source_length + 1, (batch,), generator=generator)
    source[torch.arange(source_length)[None, :] >= source_lengths[:, None]] = PAD
    labels = torch.randint(3, vocab, (batch, target_length), generator=generator)
    target_lengths = torch.randint(2, target_length + 1, (batch,), generator=generator)
    labels[torch.arange(target_length)[None, :] >= target_lengths[:, None]] = -100
    decoder_input_ids = torch.cat([torch.full((batch, 1), BOS), labels[:, :-1].clamp(min=PAD)], dim=1)
    return source, source.ne(PAD).long(), decoder_input_ids, labels


def timed_step(step) -> float:
    started = time.perf_counter()
    step()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=128)
    arguments = parser.parse_args()

    entry = load_entry("transformer")
    sizes = {k: entry.architecture[k] for k in ("d_model", "num_heads", "d_ff", "encoder_layers", "dropout")}
    vocab = 24
    torch.manual_seed(0)
    ours = build_model(entry, vocab_size=vocab, pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS)
    reference = TorchTransformer(vocab, sizes["d_model"], sizes["num_heads"], sizes["d_ff"], sizes["encoder_layers"],
                                 sizes["dropout"])
    ours.train()
    reference.train()
    ours_optimizer = torch.optim.AdamW(ours.parameters(), lr=1e-3)
    reference_optimizer = torch.optim.AdamW(reference.parameters(), lr=1e-3)
    input_ids, attention_mask, decoder_input_ids, labels = scan_shaped_batch(arguments.batch, vocab)

    def ours_step():
        loss = ours(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids,
                    labels=labels).loss
        ours_optimizer.zero_grad()
        loss.backward()
        ours_optimizer.step()

    def reference_step():
        loss = reference(input_ids, attention_mask, decoder_input_ids, labels)
        reference_optimizer.zero_grad()
        loss.backward()
        reference_optimizer.step()

    for _ in range(3):  # warm-up: allocator, kernels
        ours_step()
        reference_step()
    ours_times, reference_times = [], []
    for index in range(arguments.steps):
        order = (ours_step, reference_step) if index % 2 == 0 else (reference_step, ours_step)
        for step in order:
            elapsed = timed_step(step)
            (ours_times if step is ours_step else reference_times).append(elapsed)

    ours_median, reference_median = statistics.median(ours_times), statistics.median(reference_times)
    print(f"machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()} "
          f"torch {torch.__version__} threads {torch.get_num_threads()}")
    print(f"sizes: {sizes}, batch {arguments.batch} x (source 10, target 30), {arguments.steps} steps each, interleaved")
    print(f"parameters: zoo transformer {sum(p.numel() for p in ours.parameters()):,}, "
          f"torch.nn.Transformer {sum(p.numel() for p in reference.parameters()):,}")
    print(f"zoo transformer step: median {ours_median * 1000:.1f} ms")
    print(f"torch.nn.Transformer step: median {reference_median * 1000:.1f} ms")
    print(f"ratio zoo / torch: {ours_median / reference_median:.2f} (goal: at most 1.2)")


if __name__ == "__main__":
    main()
