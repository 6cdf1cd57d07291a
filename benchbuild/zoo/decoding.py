"""Decoding: batched `generate()` (greedy or beam search, predictions in input order), for evaluation and for model
selection by BLEU. Model selection by exact match or loss needs no decoding: one teacher-forced pass gives both
(`benchbuild.training.validation`)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from benchbuild.errors import BenchbuildError

# The longest source or output a zoo model takes, in tokens with `</s>`: fairseq's max_source_positions and
# max_target_positions default, beyond which its training refuses a row (`filter_by_size`) and its decoding stops.
# Longer rows are refused by name before training or decoding (`check_row_lengths`), not sent to an attention whose
# memory grows with the square of the length.
MAX_TOKENS = 1024


@torch.no_grad()
def generate_predictions(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, sources: Sequence[str], *,
                         beam: int = 1, batch_size: int = 64, max_new_tokens: int | Sequence[int] = 128,
                         length_rule: tuple[float, int] | None = None,
                         device: torch.device | str | None = None, progress: bool = False) -> list[str]:
    """Decode every source; batches group sources of similar length, so padding stays small. `progress` shows a
    rich progress bar over sentences on stderr.

    Each output stops at `</s>` or after `max_new_tokens` tokens (one number, or one per source: `row_limits`; a
    batch decodes to its rows' largest and each output is then cut at its own, so no output depends on its batch),
    or, with `length_rule` (a, b), after `fairseq_limit(a, b, longest source of the batch)` tokens: fairseq's
    `--max-len-a a --max-len-b b`. A source longer than `MAX_TOKENS` tokens is refused before the first batch."""
    if beam < 1:
        raise ValueError(f"beam must be at least 1; got {beam}")
    device = torch.device(device) if device is not None else next(model.parameters()).device
    lengths = [len(ids) for ids in tokenizer(list(sources), add_special_tokens=True)["input_ids"]]
    longest = max(range(len(lengths)), key=lengths.__getitem__, default=None)
    if longest is not None and lengths[longest] > MAX_TOKENS:
        raise BenchbuildError(f"source {longest + 1:,} is {lengths[longest]:,} tokens long, more than the "
                              f"{MAX_TOKENS:,} a zoo model takes (fairseq's max_source_positions): cut or drop it")
    limits = [max_new_tokens] * len(sources) if isinstance(max_new_tokens, int) else list(max_new_tokens)
    was_training = model.training
    model.eval()
    order = sorted(range(len(sources)), key=lambda index: (lengths[index], index))
    predictions: list[str] = [""] * len(sources)
    bar = _SentenceProgress(len(sources)) if progress else None
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        encoded = tokenizer([sources[index] for index in chunk], return_tensors="pt", padding=True).to(device)
        cap = (fairseq_limit(*length_rule, encoded["input_ids"].size(1)) if length_rule is not None
               else max(limits[index] for index in chunk))
        generated = model.generate(
            input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"], do_sample=False,
            num_beams=beam, early_stopping=beam > 1,
            max_new_tokens=cap,  # zoo models store no output length: each call passes one
            decoder_start_token_id=tokenizer.bos_token_id, bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        )
        # Position 0 is the decoder's start token; a row's own cap counts the tokens after it.
        outputs = [ids if length_rule is not None else ids[:1 + limits[index]] for index, ids in zip(chunk, generated)]
        for index, text in zip(chunk, tokenizer.batch_decode(outputs, skip_special_tokens=True)):
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
    """Longest reference in tokens (with `</s>`) plus `margin`, at most `MAX_TOKENS`: no longer output can be an
    exact match, so the cap leaves exact match unchanged while sparing a cacheless model from decoding runaway outputs
    to a far limit."""
    return min(max((len(ids) for ids in tokenizer(references)["input_ids"]), default=1) + margin, MAX_TOKENS)


def row_limits(tokenizer, references: list[str], margin: int = 8) -> list[int]:
    """Each row's own cap: its reference in tokens (with `</s>`) plus `margin`, at most `MAX_TOKENS`. Exact match is
    the same as under `decoding_limit`, and one long reference no longer makes every row decode that far."""
    return [min(len(ids) + margin, MAX_TOKENS) for ids in tokenizer(references)["input_ids"]]


def check_row_lengths(what: str, **sides: Sequence[str]) -> None:
    """Refuse, naming the first, a row of `what` whose text on a side (`source=[...]`, `target=[...]`) has more words
    than `MAX_TOKENS`: it has at least as many tokens, more than a zoo model takes. Cheap (a split of words), so it
    runs before any model or run folder is touched; rows of fewer words but more tokens are refused once tokenized."""
    for side, texts in sides.items():
        for number, text in enumerate(texts, start=1):
            words = len(str(text).split())
            if words > MAX_TOKENS:
                raise BenchbuildError(f"{what} row {number:,}: its {side} has {words:,} words, more than the "
                                      f"{MAX_TOKENS:,} tokens a zoo model takes (fairseq's max_{side}_positions); cut "
                                      "or drop the row and build the benchmark again")
