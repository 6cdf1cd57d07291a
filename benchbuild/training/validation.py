"""Model selection during training: which rows validate a run, and the scores a checkpoint gets on them: greedy exact
match and the loss from one teacher-forced pass per batch (`teacher_forced`), so that validating often stays
affordable, and BLEU of beam-5 decoding where a recipe selects by it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from benchbuild import metrics
from benchbuild.errors import BenchbuildError
from benchbuild.zoo.decoding import decoding_limit, generate_predictions

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

HELD_OUT_FRACTION = 0.1
VALIDATION_BEAM = 5  # 000 App. A.2 and CoGnition's train.sh: fairseq's --eval-bleu-args '{"beam": 5}'


def split_validation(splits: Mapping[str, Any], validation_split: str | None, seed: int,
                     held_out: float = HELD_OUT_FRACTION) -> tuple[list[dict], list[dict], str]:
    """(train rows, validation rows, how validation was chosen): the named split, else `validation`, else a
    seeded `held_out` fraction of train. A test split is never used for model selection."""
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
    held = max(1, round(held_out * len(train_rows)))
    chosen = set(np.random.default_rng(seed).permutation(len(train_rows))[:held].tolist())
    kept = [row for index, row in enumerate(train_rows) if index not in chosen]
    validation = [row for index, row in enumerate(train_rows) if index in chosen]
    return kept, validation, f"train-heldout-{held_out * 100:g}%-seed-{seed}"


@dataclass(frozen=True)
class ValidationScores:
    """A checkpoint's scores on the validation rows: greedy exact match in percent, the mean token loss (the
    training criterion's, label smoothing included) and, when asked for, corpus BLEU of beam-5 decoding."""

    exact_match: float
    loss: float
    bleu: float | None = None

    def value(self, metric: str) -> float:
        """The score named by a recipe's `validate_by`."""
        value = getattr(self, metric)
        if value is None:
            raise ValueError(f"validation computed no {metric}")
        return value

    def log_fields(self) -> dict[str, float]:
        """The `train_log.jsonl` fields of a validation line."""
        fields = {"validation_exact_match": self.exact_match, "validation_loss": self.loss}
        return fields if self.bleu is None else {**fields, "validation_bleu": self.bleu}


def validation_scores(network, tokenizer, sources: list[str], targets: list[str], batch_size: int, *,
                      label_smoothing: float = 0.0, bleu: bool = False) -> ValidationScores:
    """Exact match and loss from one teacher-forced pass (`teacher_forced`); BLEU (sacrebleu's corpus score, its
    tokenizer chosen by `metrics.bleu`) of beam-5 decoding when `bleu`. No validation rows: exact match 0, loss
    and BLEU 0."""
    if not sources:
        return ValidationScores(0.0, 0.0, 0.0 if bleu else None)
    matched, token_loss, tokens = 0, 0.0, 0
    for batch in teacher_forced(network, tokenizer, sources, targets, batch_size=batch_size):
        matched += sum(batch.matches())
        token_loss += F.cross_entropy(batch.logits.float().flatten(0, 1), batch.labels.flatten(), ignore_index=-100,
                                      reduction="sum", label_smoothing=label_smoothing).item()
        tokens += int(batch.labels.ne(-100).sum())
    bleu_score = None
    if bleu:
        predictions = generate_predictions(network, tokenizer, sources, beam=VALIDATION_BEAM, batch_size=batch_size,
                                           max_new_tokens=decoding_limit(tokenizer, targets))
        bleu_score = metrics.bleu(predictions, targets)["score"]
    return ValidationScores(100.0 * matched / len(sources), token_loss / max(tokens, 1), bleu_score)


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
    matches = [False] * len(sources)
    for batch in teacher_forced(model, tokenizer, sources, targets, batch_size=batch_size, device=device):
        for index, ok in zip(batch.rows, batch.matches()):
            matches[index] = ok
    return matches


@dataclass(frozen=True)
class TeacherForcedBatch:
    """One batch of `teacher_forced`: its rows' indices, the logits, the labels (-100 past each target's `</s>`)
    and whether each row's target decodes back to its text."""

    rows: list[int]
    logits: torch.Tensor
    labels: torch.Tensor
    producible: list[bool]

    def matches(self) -> list[bool]:
        """Whether greedy decoding reproduces each row's target (see `greedy_matches`)."""
        correct = ((self.logits.argmax(-1) == self.labels) | (self.labels == -100)).all(dim=-1).tolist()
        return [ok and producible for ok, producible in zip(correct, self.producible)]


@torch.no_grad()
def teacher_forced(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, sources: Sequence[str],
                   targets: Sequence[str], *, batch_size: int = 64,
                   device: torch.device | str | None = None) -> Iterator[TeacherForcedBatch]:
    """The model (in eval mode) fed each target's own prefix, in batches of targets of similar length."""
    device = torch.device(device) if device is not None else next(model.parameters()).device
    was_training = model.training
    model.eval()
    target_ids = tokenizer(list(targets))["input_ids"]
    producible = [" ".join(tokenizer.decode(ids, skip_special_tokens=True).split()) == " ".join(text.split())
                  for ids, text in zip(target_ids, targets)]
    order = sorted(range(len(sources)), key=lambda index: (len(target_ids[index]), index))
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
        yield TeacherForcedBatch(chunk, logits, labels, [producible[index] for index in chunk])
    model.train(was_training)
