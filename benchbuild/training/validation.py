"""Model selection during training: which rows validate a run, and the scores a checkpoint gets on them: greedy exact
match and the loss from one teacher-forced pass per batch (`teacher_forced`), so that validating often stays
affordable, and BLEU of beam-5 decoding where a recipe selects by it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from benchbuild import metrics
from benchbuild.benchmark import split_rows_as_dicts
from benchbuild.errors import BenchbuildError
from benchbuild.zoo.loading import target_encoder
from benchbuild.zoo.decoding import decoding_limit, generate_predictions
from benchbuild.zoo.recipe import HeldOutFrom, Selection, held_out_count, holds_out

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

HELD_OUT_FRACTION = 0.1
VALIDATION_BEAM = 5  # 000 App. A.2 and CoGnition's train.sh: fairseq's --eval-bleu-args '{"beam": 5}'
NO_VALIDATION = "none"  # run.json's `validation` of a run that validates on nothing


def split_validation(splits: Mapping[str, Any], validation_split: str | None, seed: int,
                     held_out: float = HELD_OUT_FRACTION, *, held_out_from: HeldOutFrom = "random",
                     select: Selection = "best_validation", file_order: bool = False
                     ) -> tuple[list[dict], list[dict], str]:
    """(train rows, validation rows, how validation was chosen): the named split, else `validation`, else, when
    `select` compares validation scores, a `held_out` fraction of train (`held_out_rows`; `file_order`: whether the
    train split keeps the order of a file it was read from, `keeps_file_order`), else no rows at all (a run under
    `last` then trains on all of train). A test split is never used for model selection."""
    train_rows = split_rows_as_dicts(splits["train"])
    if validation_split is not None:
        if "test" in validation_split:
            raise BenchbuildError(f"validation split {validation_split!r} is a test split: model selection must "
                                  "not peek at test data")
        if validation_split not in splits:
            raise BenchbuildError(f"no split {validation_split!r} to validate on (splits: {', '.join(splits)})")
        return train_rows, split_rows_as_dicts(splits[validation_split]), validation_split
    if "validation" in splits:
        return train_rows, split_rows_as_dicts(splits["validation"]), "validation"
    if not holds_out(splits, validation_split, select):
        return train_rows, [], NO_VALIDATION
    if len(train_rows) < 2:
        raise BenchbuildError(f"the train split has {len(train_rows)} row{'' if len(train_rows) == 1 else 's'}: too few "
                              "to hold out a validation part (it needs 2); train on more rows, give a split to "
                              "validate on (--validation-split NAME), or select the last checkpoint without "
                              "validating (--set select=last)")
    from_end = takes_last_rows(held_out_from, file_order)
    chosen = set(held_out_rows(len(train_rows), held_out, "end" if from_end else "random", seed))
    kept = [row for index, row in enumerate(train_rows) if index not in chosen]
    validation = [row for index, row in enumerate(train_rows) if index in chosen]
    if from_end:
        return kept, validation, f"train-last-{held_out * 100:g}%"
    return kept, validation, f"train-heldout-{held_out * 100:g}%-seed-{seed}"


def takes_last_rows(held_out_from: HeldOutFrom, file_order: bool) -> bool:
    """Whether a hold-out takes the last rows of train: `end` always; `file_end` (002's official code, whose train file
    is the published, shuffled SCAN file) only where train keeps a file's order, else a seeded random share, since
    the last rows of a grammar-built split are not a random fifth (addprim_jump's are its 1,467 bare "jump" rows)."""
    return held_out_from == "end" or (held_out_from == "file_end" and file_order)


# Builds that read files yet lay their rows out in another order: `build-scan`'s splittings drawn with a canonical
# index (`simple`, `length_cutoff_*`) read the index but write the rows in the grammar's order, so their last fifth
# is a block of the grammar (every "turn opposite left after ..." command, say), not a random fifth of a file.
_OTHER_ORDER_SOURCES = ("grammar + canonical index",)


def keeps_file_order(info) -> bool:
    """Whether a benchmark's rows are a file's rows in the file's order: the build read files (`inputs`), drew
    nothing (no seed) and kept their order, as `build-scan --official` and `import` do; a grammar-built, sampled or
    grammar-ordered split does not."""
    return bool(info.inputs) and info.seed is None and info.parameters.get("source") not in _OTHER_ORDER_SOURCES


MIN_WORD_ROWS = 10  # a word in fewer train rows may fall wholly into a random hold-out by chance (p <= 0.2^10)


@dataclass(frozen=True)
class WordCoverage:
    """A source word of train: the train rows that contain it, and how many of them a run still trains on after its
    hold-out."""

    word: str
    train_rows: int
    kept: int

    def to_dict(self) -> dict[str, Any]:
        return {"word": self.word, "train_rows": self.train_rows, "kept": self.kept}


def word_coverage(kept: Sequence[dict], held: Sequence[dict], *, least: int = 3,
                  min_rows: int = MIN_WORD_ROWS) -> tuple[list[WordCoverage], list[WordCoverage]]:
    """(the `least` source words, of those in at least `min_rows` train rows, that the fewest rows kept contain;
    the words in at least `min_rows` train rows that the hold-out takes every row of). Words are whitespace tokens of
    the `source` column; a row counts once per word."""
    def rows_with(rows: Sequence[dict]) -> Counter:
        return Counter(word for row in rows for word in set(row["source"].split()))

    in_kept, in_held = rows_with(kept), rows_with(held)
    counts = [WordCoverage(word, in_kept[word] + in_held[word], in_kept[word]) for word in in_kept | in_held
              if in_kept[word] + in_held[word] >= min_rows]
    counts.sort(key=lambda coverage: (coverage.kept, coverage.train_rows, coverage.word))
    return counts[:least], [coverage for coverage in counts if coverage.kept == 0]


def hidden_words_message(hidden: Sequence[WordCoverage], validation_name: str) -> str:
    """The one-line refusal of a hold-out that hides words from training."""
    first = hidden[0]
    more = f" (and {len(hidden) - 1} more word(s): {', '.join(c.word for c in hidden[1:4])})" if len(hidden) > 1 else ""
    return (f"the held-out rows ({validation_name}) take all {first.train_rows:,} training rows with "
            f"{first.word!r}{more}: the model would never see it; hold out other rows (held_out_from = \"random\"), "
            "or --set allow_hidden_words=true to train so on purpose")



def held_out_rows(rows: int, held_out: float, held_out_from: HeldOutFrom, seed: int) -> list[int]:
    """The indices of the train rows held out to validate on: round(held_out × rows) of them (at least one), the last
    ones (`end`, as 002's official code) or a draw seeded by `seed` (`random`)."""
    held = held_out_count(rows, held_out)
    if held_out_from == "end":
        return list(range(rows - held, rows))
    return sorted(np.random.default_rng(seed).permutation(rows)[:held].tolist())




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
                      label_smoothing: float = 0.0, bleu: bool = False, beam: int = VALIDATION_BEAM,
                      length_rule: tuple[float, int] | None = None) -> ValidationScores:
    """Exact match and loss from one teacher-forced pass (`teacher_forced`); BLEU (sacrebleu's corpus score, its
    tokenizer chosen by `metrics.bleu`) of decoding with a beam of `beam` (the recipe's) when `bleu`, each output
    capped by the recipe's `length_rule` (fairseq's max_len_a, max_len_b) or else by the longest reference. A run
    without validation rows (`NO_VALIDATION`) has no scores, not zeros: it does not call this."""
    if not sources:
        raise ValueError("no validation rows to score")
    matched, token_loss, tokens = 0, 0.0, 0
    for batch in teacher_forced(network, tokenizer, sources, targets, batch_size=batch_size):
        matched += sum(batch.matches())
        token_loss += F.cross_entropy(batch.logits.float().flatten(0, 1), batch.labels.flatten(), ignore_index=-100,
                                      reduction="sum", label_smoothing=label_smoothing).item()
        tokens += int(batch.labels.ne(-100).sum())
    bleu_score = None
    if bleu:
        predictions = generate_predictions(network, tokenizer, sources, beam=beam, batch_size=batch_size,
                                           max_new_tokens=decoding_limit(target_encoder(tokenizer), targets),
                                           length_rule=length_rule)
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
    target_ids = tokenizer(text_target=list(targets))["input_ids"]
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
