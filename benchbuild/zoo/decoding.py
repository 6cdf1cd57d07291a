"""Decoding: batched `generate()` (greedy or beam search, predictions in input order), for evaluation and for model
selection by BLEU. Model selection by exact match or loss needs no decoding: one teacher-forced pass gives both
(`benchbuild.training.validation`)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase


@torch.no_grad()
def generate_predictions(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, sources: Sequence[str], *,
                         beam: int = 1, batch_size: int = 64, max_new_tokens: int = 128,
                         length_rule: tuple[float, int] | None = None,
                         device: torch.device | str | None = None, progress: bool = False) -> list[str]:
    """Decode every source; batches group sources of similar length, so padding stays small. `progress` shows a
    rich progress bar over sentences on stderr.

    Each output stops at `</s>` or after `max_new_tokens` tokens, or, with `length_rule` (a, b), after
    `fairseq_limit(a, b, longest source of the batch)` tokens: fairseq's `--max-len-a a --max-len-b b`."""
    if beam < 1:
        raise ValueError(f"beam must be at least 1; got {beam}")
    device = torch.device(device) if device is not None else next(model.parameters()).device
    was_training = model.training
    model.eval()
    lengths = [len(ids) for ids in tokenizer(list(sources), add_special_tokens=True)["input_ids"]]
    order = sorted(range(len(sources)), key=lambda index: (lengths[index], index))
    predictions: list[str] = [""] * len(sources)
    bar = _SentenceProgress(len(sources)) if progress else None
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        encoded = tokenizer([sources[index] for index in chunk], return_tensors="pt", padding=True).to(device)
        if length_rule is not None:
            max_new_tokens = fairseq_limit(*length_rule, encoded["input_ids"].size(1))
        generated = model.generate(
            input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"], do_sample=False,
            num_beams=beam, early_stopping=beam > 1,
            max_new_tokens=max_new_tokens,  # zoo models store no output length: each call passes one
            decoder_start_token_id=tokenizer.bos_token_id, bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        )
        for index, text in zip(chunk, tokenizer.batch_decode(generated, skip_special_tokens=True)):
            predictions[index] = " ".join(text.split())
        if bar is not None:
            bar.advance(len(chunk))
    if bar is not None:
        bar.stop()
    model.train(was_training)
    return predictions


class _SentenceProgress:
    """A rich progress bar over decoded sentences, on stderr."""

    def __init__(self, total: int):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(TextColumn("decoding"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                                 console=Console(stderr=True))
        self.progress.start()
        self.task = self.progress.add_task("decode", total=total)

    def advance(self, count: int) -> None:
        self.progress.update(self.task, advance=count)

    def stop(self) -> None:
        self.progress.stop()


def length_rule(recipe: Mapping[str, Any]) -> tuple[float, int] | None:
    """A recipe's fairseq output-length cap (`max_len_a`, `max_len_b`: `TrainingRecipe.to_dict()` or the recipe a
    run.json records), or None when it sets no `max_len_b`."""
    if recipe.get("max_len_b") is None:
        return None
    return float(recipe.get("max_len_a", 0.0)), int(recipe["max_len_b"])


def fairseq_limit(max_len_a: float, max_len_b: int, source_length: int) -> int:
    """Tokens of text a fairseq decoding of a batch whose padded sources are `source_length` tokens long (with `</s>`)
    may produce: its SequenceGenerator sets max_len = int(a × src_len + b) and forces `</s>` after max_len tokens.
    As `generate`'s `max_new_tokens` it gives the same texts: an output stopped at the cap reads as fairseq's forced
    end (beam search scores that end without the `</s>` fairseq adds, so a beam may rank such hypotheses slightly
    differently)."""
    return int(max_len_a * source_length + max_len_b)


def decoding_limit(tokenizer, references: list[str], margin: int = 8) -> int:
    """Longest reference in tokens (with `</s>`) plus `margin`: no longer output can be an exact match, so the
    cap leaves exact match unchanged while sparing a cacheless model from decoding runaway outputs to a far limit."""
    return max((len(ids) for ids in tokenizer(references)["input_ids"]), default=1) + margin
