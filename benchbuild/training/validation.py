"""Model selection during training: which rows validate a run, and greedy exact match on them, computed in one
teacher-forced pass per batch (`greedy_matches`) so that validating often stays affordable."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import torch

from benchbuild.errors import BenchbuildError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

HELD_OUT_FRACTION = 0.1


def split_validation(splits: Mapping[str, Any], validation_split: str | None, seed: int
                     ) -> tuple[list[dict], list[dict], str]:
    """(train rows, validation rows, how validation was chosen): the named split, else `validation`, else a
    seeded 10% of train held out. A test split is never used for model selection."""
    train_rows = list(splits["train"])
    if validation_split is not None:
        if "test" in validation_split:
            raise BenchbuildError(f"validation split {validation_split!r} is a test split: model selection must "
                                  "not peek at test data")
        if validation_split not in splits:
            raise BenchbuildError(f"no split {validation_split!r} to validate on (splits: {', '.join(splits)})")
        return train_rows, list(splits[validation_split]), validation_split
    if "validation" in splits:
        return train_rows, list(splits["validation"]), "validation"
    if len(train_rows) < 2:
        raise BenchbuildError("the train split needs at least 2 rows to hold out a validation part")
    held = max(1, round(HELD_OUT_FRACTION * len(train_rows)))
    chosen = set(np.random.default_rng(seed).permutation(len(train_rows))[:held].tolist())
    kept = [row for index, row in enumerate(train_rows) if index not in chosen]
    validation = [row for index, row in enumerate(train_rows) if index in chosen]
    return kept, validation, f"train-heldout-{int(HELD_OUT_FRACTION * 100)}%-seed-{seed}"


def validation_exact_match(network, tokenizer, sources: list[str], targets: list[str], batch_size: int) -> float:
    """Greedy exact match in percent (teacher-forced, see `greedy_matches`); 0 without validation rows."""
    if not sources:
        return 0.0
    matches = greedy_matches(network, tokenizer, sources, targets, batch_size=batch_size)
    return 100.0 * sum(matches) / len(matches)


@torch.no_grad()
def greedy_matches(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, sources: Sequence[str],
                   targets: Sequence[str], *, batch_size: int = 64,
                   device: torch.device | str | None = None) -> list[bool]:
    """Whether greedy decoding would reproduce each target exactly, from one teacher-forced pass per batch.

    Greedy decoding emits the target iff, fed the target's own prefix, the model's argmax is the next target
    token at every position through `</s>` (each step sees exactly the prefix it would have generated). This
    needs one forward pass instead of one per output token, which makes model selection by accuracy affordable.
    A target whose tokens do not decode back to its text (an unknown word) can never be produced, so it never
    matches — as with `generate()`.
    """
    device = torch.device(device) if device is not None else next(model.parameters()).device
    was_training = model.training
    model.eval()
    target_ids = tokenizer(list(targets))["input_ids"]
    producible = [" ".join(tokenizer.decode(ids, skip_special_tokens=True).split()) == " ".join(text.split())
                  for ids, text in zip(target_ids, targets)]
    order = sorted(range(len(sources)), key=lambda index: (len(target_ids[index]), index))
    matches = [False] * len(sources)
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        encoded = tokenizer([sources[index] for index in chunk], return_tensors="pt", padding=True).to(device)
        length = max(len(target_ids[index]) for index in chunk)
        labels = torch.full((len(chunk), length), -100, dtype=torch.long)
        decoder_input_ids = torch.full((len(chunk), length), tokenizer.pad_token_id, dtype=torch.long)
        for row, index in enumerate(chunk):
            ids = target_ids[index]
            labels[row, :len(ids)] = torch.tensor(ids)
            decoder_input_ids[row, :len(ids)] = torch.tensor([tokenizer.bos_token_id, *ids[:-1]])
        labels, decoder_input_ids = labels.to(device), decoder_input_ids.to(device)
        logits = model(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"],
                       decoder_input_ids=decoder_input_ids).logits
        correct = ((logits.argmax(-1) == labels) | (labels == -100)).all(dim=-1).tolist()
        for index, ok in zip(chunk, correct):
            matches[index] = ok and producible[index]
    model.train(was_training)
    return matches
