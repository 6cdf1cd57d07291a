"""The plan of a training run: everything `train` decides before its first step, computed once, checked once,
written to `run.json` once, and handed to the loop (`loop`), which only executes it — the split of `transformers`'
`TrainingArguments` and `Trainer`, or nanoGPT's configuration before its loop.

`plan_run` resolves the recipe (`zoo.recipe`), checks it against the model and the benchmark (dictionaries, row
lengths, budgets, settling, the hold-out), draws the validation rows, builds the run's dictionaries from the train
split, encodes the rows it trains on (packed in token batches when the recipe asks), and derives the step budget and
the validation interval. It reads the model entry and the benchmark and writes nothing: a refused plan leaves no run
folder behind, and a stack plans all its runs before any folder is claimed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchbuild.benchmark import BuildInfo, load_splits, read_build_info, split_rows_as_dicts
from benchbuild.errors import BenchbuildError
from benchbuild.training.batching import EncodedSplit, TokenBatches, check_split_lengths, encode_rows
from benchbuild.training.tokenization import build_dictionaries, build_tokenizer
from benchbuild.zoo.loading import token_ids
from benchbuild.training.validation import (hidden_words_message, holds_out, keeps_file_order, split_validation,
                                           word_coverage)
from benchbuild.zoo.recipe import (TrainingRecipe, default_recipe, epoch_in_token_batches, planned_steps,
                                   resolve_recipe, validation_interval)


@dataclass(frozen=True)
class RunOptions:
    """How to train, besides which model on which benchmark into which folder: `train`'s keyword arguments."""

    seed: int = 0
    max_steps: int | None = None
    max_minutes: float | None = None
    stop_when_settled: bool = False
    device: str = "auto"
    recipe: str | None = None
    overrides: dict | None = None
    architecture_overrides: dict | None = None
    validation_split: str | None = None
    progress: bool = True
    overwrite: bool = False
    stacked: bool = False  # trained in a stack (`training.stack`): part of the run's identity, so never resumed alone

    def arguments(self) -> dict[str, Any]:
        """What `run.json` records of them (`arguments`, and the command line `reproduce` reruns)."""
        return {"seed": self.seed, "max_steps": self.max_steps, "max_minutes": self.max_minutes,
                **({"stop_when_settled": True} if self.stop_when_settled else {}),
                "device": self.device, "recipe": self.recipe, "overrides": self.overrides or {},
                "architecture_overrides": self.architecture_overrides or {}, "validation_split": self.validation_split}


@dataclass(frozen=True)
class RunPlan:
    """A run as planned: the resolved recipe and everything derived from it, before anything is written."""

    model: str | Path  # as given: a catalogue name or a .toml path
    data: Path
    out: Path
    options: RunOptions
    entry: Any  # the catalogue entry, its architecture under the recipe family's (`[recipe.X.architecture]`)
    info: BuildInfo
    family: str  # the recipe family
    recipe: TrainingRecipe
    train_rows: list[dict]
    validation_rows: list[dict]
    validation_name: str  # a split's name, the hold-out of train (`train-heldout-10%-seed-3`), or NO_VALIDATION
    held_out_words: list[dict] | None  # the source words the fewest trained rows hold, for a hold-out of train
    identity: dict[str, Any]  # what decides whether a rerun resumes this run or is refused (`run_folder.open_run`)
    tokenizer: Any  # the run's dictionaries, built from the whole train split
    train_encoded: EncodedSplit
    token_batches: TokenBatches | None  # the rows trained on in token batches, when the recipe has batch_tokens
    recipe_steps: int  # the recipe's budget (`steps`, or `epochs` counted in steps)
    budget: int  # the steps this run trains to: `--max-steps`, else the recipe's
    eval_every: int  # steps between validations: `eval_every`, or `eval_every_epochs` in steps
    output_tokens: list[int] | None = None  # what the output layer scores under output_vocabulary = "targets"

    def record(self) -> dict[str, Any]:
        """The plan's part of `run.json`."""
        return {"seed": self.options.seed, "recipe_family": self.family, "recipe": self.recipe.to_dict(),
                "recipe_steps": self.recipe_steps, "step_budget": self.budget, "select": self.recipe.select,
                "validate_by": self.recipe.validate_by, "ties": self.recipe.ties,
                "time_budget_minutes": self.options.max_minutes,
                "architecture_overrides": self.options.architecture_overrides or {},
                "validation": self.validation_name, "validation_rows": len(self.validation_rows),
                "train_rows": len(self.train_rows), "validation_every": self.eval_every,
                **({} if self.held_out_words is None else {"held_out_words": self.held_out_words}),
                **({} if self.token_batches is None else {"token_batches_per_epoch": len(self.token_batches)})}


def plan_run(model: str | Path, data: str | Path, out: str | Path, options: RunOptions) -> RunPlan:
    """The plan of training catalogue model `model` on benchmark `data` into `out` with `options`, every check made:
    a bad request is refused here, before the run folder is touched."""
    from benchbuild import zoo

    zoo.register()
    entry = zoo.load_entry(model)
    data, out = Path(data), Path(out)
    info = read_build_info(data)
    splits = load_splits(data)
    family = options.recipe or default_recipe(entry.recipes, entry.reported, info.family, info.name, info.splits)
    recipe = resolve_recipe(entry.recipes, family, options.overrides, source=str(entry.path))
    entry = dataclasses.replace(entry, architecture={**entry.architecture, **recipe.architecture})
    if "train" not in splits:
        raise BenchbuildError(f"{data} has no train split (splits: {', '.join(splits)})")
    check_split_lengths(data, splits, {"train", options.validation_split or "validation"})
    check_set_by_training(entry, options.architecture_overrides)
    check_dictionaries(entry, recipe, options.architecture_overrides)
    split_rows = {name: split.rows for name, split in info.splits.items()}
    # Epochs of token batches are counted in steps once the rows are packed, below.
    by_token_epochs = epoch_in_token_batches(recipe)
    recipe_steps = None if by_token_epochs else planned_steps(recipe, split_rows, options.validation_split)
    check_budgets(options.max_steps if options.max_steps is not None else recipe_steps, options.max_minutes)
    check_settling(recipe, options.stop_when_settled)
    train_rows, validation_rows, validation_name = split_validation(
        splits, options.validation_split, options.seed, recipe.held_out, held_out_from=recipe.held_out_from,
        select=recipe.select, file_order=keeps_file_order(info))
    held_out_words = (check_hold_out(train_rows, validation_rows, validation_name, recipe)
                      if holds_out(splits, options.validation_split, recipe.select) else None)
    if not validation_rows and recipe.select == "best_validation":
        raise BenchbuildError(f"validation split {validation_name!r} of {data} has no rows: select = best_validation "
                              "needs rows to compare checkpoints on; give another --validation-split or --set "
                              "select=last")
    identity = {
        "model": entry.name, "architecture": entry.architecture,
        "architecture_overrides": options.architecture_overrides or {},
        "benchmark": {name: split.fingerprint for name, split in info.splits.items()}, "seed": options.seed,
        "recipe_family": family, "validation": validation_name, "recipe": recipe_identity(recipe),
        # A stacked run draws its dropout masks from its own stream (`zoo.attention.stacking`), not torch's generator.
        **({"trainer": "stacked"} if options.stacked else {}),
    }
    tokenizer = run_tokenizer(splits["train"], recipe)
    train_encoded = encode_rows(tokenizer, train_rows)
    token_batches = (None if recipe.batch_tokens is None else
                     TokenBatches.pack(train_encoded, recipe.batch_tokens, recipe.batch_size, options.seed))
    per_epoch = None if token_batches is None else len(token_batches)
    if by_token_epochs:
        recipe_steps = planned_steps(recipe, split_rows, options.validation_split, per_epoch)
    return RunPlan(
        model=model, data=data, out=out, options=options, entry=entry, info=info, family=family, recipe=recipe,
        train_rows=train_rows, validation_rows=validation_rows, validation_name=validation_name,
        held_out_words=held_out_words, identity=identity, tokenizer=tokenizer, train_encoded=train_encoded,
        token_batches=token_batches, recipe_steps=recipe_steps,
        budget=recipe_steps if options.max_steps is None else options.max_steps,
        eval_every=validation_interval(recipe, split_rows, options.validation_split, per_epoch),
        output_tokens=output_tokens(entry, options, tokenizer, splits["train"], recipe))


def output_tokens(entry, options: RunOptions, tokenizer, train_split,
                  recipe: TrainingRecipe | None = None) -> list[int] | None:
    """Under the architecture key `output_vocabulary = "targets"` (Syntactic Attention, as 002's code scores a
    separate action vocabulary): the ids of every token the train split's targets hold, with `<s>` and `</s>`; the
    model's softmax runs over these alone. None for every other model. Label smoothing, which spreads probability
    over every token of the vocabulary, is refused beside it."""
    architecture = {**entry.architecture, **(options.architecture_overrides or {})}
    if architecture.get("output_vocabulary", "all") != "targets":
        return None
    if recipe is not None and recipe.label_smoothing > 0:
        raise BenchbuildError(f"{entry.name}: label_smoothing = {recipe.label_smoothing} spreads probability over "
                              "every token, but output_vocabulary = 'targets' scores the target tokens alone: set "
                              "label_smoothing=0, or --set 'architecture={output_vocabulary=\"all\"}'")
    targets = [row["target"] for row in split_rows_as_dicts(train_split)]
    ids = {token for encoded in token_ids(tokenizer, targets, target=True) for token in encoded}
    return sorted(ids | {tokenizer.bos_token_id, tokenizer.eos_token_id})


def run_tokenizer(train_split, recipe: TrainingRecipe):
    """The run's tokenizer: built from the whole train split (sources and targets), so held-out rows, seeds,
    processes and resumed runs all see the same dictionaries: one joint vocabulary, or, under `dictionaries =
    "separate"`, a source and a target dictionary (`tokenization.build_dictionaries`)."""
    train_split = split_rows_as_dicts(train_split)
    if recipe.dictionaries == "separate":
        return build_dictionaries(
            [row["source"] for row in train_split], [row["target"] for row in train_split],
            source_kind=recipe.source_tokenizer_kind, target_kind=recipe.target_tokenizer_kind,
            bpe_vocab_size=recipe.bpe_vocab_size, segment_source=recipe.segment_source,
            segment_target=recipe.segment_target)
    texts = [text for row in train_split for text in (row["source"], row["target"])]
    return build_tokenizer(texts, recipe.tokenizer_kind, recipe.bpe_vocab_size)


def token_batches_per_epoch(data: str | Path, recipe: TrainingRecipe, seed: int = 0,
                            validation_split: str | None = None) -> int:
    """The token batches of an epoch of a run of `recipe` (one with `batch_tokens`) on benchmark `data`: its
    tokenizer built and the rows it would train on packed as `plan_run` packs them (what `planned_steps` needs for a
    budget in epochs before a run exists, as `sweep --dry-run` estimates it)."""
    splits = load_splits(Path(data))
    train_rows, _, _ = split_validation(splits, validation_split, seed, recipe.held_out,
                                        held_out_from=recipe.held_out_from, select=recipe.select,
                                        file_order=keeps_file_order(read_build_info(data)))
    tokenizer = run_tokenizer(splits["train"], recipe)
    return len(TokenBatches.pack(encode_rows(tokenizer, train_rows), recipe.batch_tokens, recipe.batch_size, seed))


# Architecture keys a run's data sets (`loop._network` passes them), never an entry or `--architecture`.
SET_BY_TRAINING = {
    "source_vocab_size": "the run's source dictionary's size, set by training (recipe key dictionaries = 'separate')",
    "output_tokens": "the run's target tokens, set by training (architecture key output_vocabulary = 'targets')",
}


def check_set_by_training(entry, architecture_overrides: dict | None) -> None:
    """Refused before the run folder is touched: an architecture key that training derives from the run's data."""
    for key, what in SET_BY_TRAINING.items():
        if key in {**entry.architecture, **(architecture_overrides or {})}:
            raise BenchbuildError(f"{entry.name}: {key} is {what}, not an architecture key to give")


# The model kinds whose encoder can embed a source dictionary of its own (`source_vocab_size`).
SEPARATE_DICTIONARY_KINDS = ("transformer",)


def check_dictionaries(entry, recipe: TrainingRecipe, architecture_overrides: dict | None = None) -> None:
    """Separate dictionaries need a model with an encoder embedding of its own, and an encoder and a decoder of
    different widths need separate dictionaries (one table cannot serve both): refused before the run folder or a
    tokenizer is written, so the corrected rerun (`--set dictionaries=...`) needs no --overwrite."""
    kind = entry.architecture.get("kind")
    if recipe.dictionaries == "separate" and kind not in SEPARATE_DICTIONARY_KINDS:
        raise BenchbuildError(f"{entry.name}: separate source and target dictionaries (recipe key dictionaries = "
                              f"'separate') need a model whose encoder embeds the source dictionary on its own, and "
                              f"a {kind} model has one embedding: train it with --set dictionaries=joint")
    if recipe.dictionaries != "separate" and kind == "transformer":
        from benchbuild.zoo.transformer import TransformerConfig

        architecture = {key: value for key, value in {**entry.architecture, **(architecture_overrides or {})}.items()
                        if key != "kind"}
        config = TransformerConfig(**architecture)
        encoder, decoder = config.sizes(decoder=False)[0], config.sizes(decoder=True)[0]
        if encoder != decoder:
            raise BenchbuildError(f"{entry.name}: encoder_d_model = {encoder} and d_model = {decoder} differ, but one "
                                  "dictionary means one embedding table for both: train it with --set "
                                  "dictionaries=separate")


def check_budgets(steps: int | None, minutes: float | None) -> None:
    """The step budget (None: counted after packing, always at least 1) and the time budget are positive."""
    if steps is not None and steps < 1:
        raise BenchbuildError(f"the step budget must be at least 1; got {steps}")
    if minutes is not None and not minutes > 0:
        raise BenchbuildError(f"the time budget must be a positive number of minutes; got {minutes}")


# The metrics whose best possible score is known, so that a validation reaching it settles the selection.
CEILINGS = {"exact_match": 100.0, "bleu": 100.0}


def check_settling(recipe: TrainingRecipe, stop_when_settled: bool) -> None:
    """`--stop-when-settled` only for a recipe whose selection a validation can make final (`bookkeeping.settled`)."""
    if stop_when_settled and not (recipe.select == "best_validation" and recipe.ties == "earliest"
                                  and recipe.validate_by in CEILINGS):
        raise BenchbuildError(
            f"--stop-when-settled: this recipe (select = {recipe.select!r}, validate_by = {recipe.validate_by!r}, "
            f"ties = {recipe.ties!r}) lets a later checkpoint replace any selected one, so no validation settles it; "
            "it needs select = \"best_validation\", ties = \"earliest\" and validate_by exact_match or bleu")


def check_hold_out(train_rows: list[dict], validation_rows: list[dict], validation_name: str,
                   recipe: TrainingRecipe) -> list[dict]:
    """For a run that validates on rows held out of train: refuse a hold-out that takes every training row of a
    source word (unless the recipe's `allow_hidden_words`), and return what run.json records as `held_out_words`:
    the source words the fewest rows still trained on contain, with their counts."""
    least, hidden = word_coverage(train_rows, validation_rows)
    if hidden and not recipe.allow_hidden_words:
        raise BenchbuildError(hidden_words_message(hidden, validation_name))
    return [coverage.to_dict() for coverage in least]


# Recipe keys outside a run's identity, so changing them resumes the run: the budget (`steps`, `epochs`: a longer
# budget continues a run); what only picks the root's checkpoint (`select`, `validate_by`, `ties`: run folders from
# before they existed resume, and `bookkeeping.check_selection` guards a change of rule); what happens after training
# (`score_train`). The recipe's `architecture` is part of the identity's "architecture", `held_out` and
# `held_out_from` of its "validation".
_OUTSIDE_IDENTITY = ("steps", "epochs", "select", "validate_by", "ties", "held_out", "held_out_from", "score_train",
                     "allow_hidden_words", "architecture")
# Keys added to the identity after run folders existed: at their default they stay out, so those folders resume.
_ADDED_LATER = ("eval_every_epochs", "beam", "max_len_a", "max_len_b", "batch_tokens", "update_freq",
                "dictionaries", "source_tokens", "target_tokens", "segment_source", "segment_target", "precision")


def recipe_identity(recipe: TrainingRecipe) -> dict[str, Any]:
    """The recipe's part of a run's identity: the keys that change how it trains."""
    defaults = {field.name: field.default for field in dataclasses.fields(TrainingRecipe)}
    return {key: value for key, value in recipe.to_dict().items()
            if key not in _OUTSIDE_IDENTITY and not (key in _ADDED_LATER and value == defaults[key])}
