"""The training recipe of a catalogue entry (`[recipe.scan]`, `[recipe.mt]`, ...): its fields are the recipe keys;
which recipe trains a run (the entry's recipe for the benchmark, with the run's overrides); and what a recipe comes to
in steps on a benchmark (its budget, its validation interval, the rows it trains on), which training, the sweep and
the report all read."""

from __future__ import annotations

import math
import typing
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Any, Iterable, Literal, Mapping

from benchbuild.errors import BenchbuildError, did_you_mean
from benchbuild.papers import reported_on
from benchbuild.toml_schema import check_overrides, check_table, from_table

# The recipe names a catalogue entry may use. A family's name (`scan`, `mt`, `nounadj`) is the recipe of this
# model's own paper for that family of benchmarks (`nounadj`: the noun-adjective Europarl split, whose paper trains a
# bigger model than on IWSLT); a family name with a paper id (`scan_000`) is another paper's recipe for the same model,
# kept beside it when two papers report the model trained differently (`transformer`: 003 on SCAN length cutoffs, 000
# on its SCAN splits), so each reported number names the recipe it was made with instead of one silent choice.
RecipeFamily = Literal["scan", "scan_000", "mt", "mt_001", "nounadj"]
RECIPE_FAMILIES: tuple[str, ...] = typing.get_args(RecipeFamily)
Schedule = Literal["constant", "inverse_sqrt"]
Selection = Literal["best_validation", "last"]
Ties = Literal["latest", "earliest"]
HeldOutFrom = Literal["random", "end", "file_end"]
ValidationMetric = Literal["exact_match", "loss", "bleu"]
Dictionaries = Literal["joint", "separate"]
TokenKind = Literal["word", "bpe"]
Segmenter = Literal["jieba"]
Precision = Literal["auto", "fp32", "bf16", "fp16"]


_COUNTS = ("steps", "batch_size", "eval_every", "micro_batches", "length_groups", "eval_batch_size", "batch_tokens",
           "update_freq")
_POSITIVE = ("learning_rate", "epochs", "eval_every_epochs")
_NOT_NEGATIVE = ("warmup_steps", "weight_decay", "grad_clip", "max_len_a")


def _out_of_range(key: str, value: Any) -> str | None:
    """The allowed range of recipe key `key` ("must be ..."), when `value` lies outside it; None when inside or when
    the key has no range. One rule for the catalogue's recipes and for command-line overrides."""
    if isinstance(value, float) and not math.isfinite(value):  # `--set learning_rate=inf` trains to NaN
        return "must be a finite number"
    if key in _COUNTS and value is not None and not value >= 1:
        return "must be positive (at least 1)"
    if key in _POSITIVE and value is not None and not value > 0:
        return "must be positive (greater than 0)"
    if key in _NOT_NEGATIVE and not value >= 0:
        return "must not be negative (at least 0)"
    if key == "label_smoothing" and not 0.0 <= value < 1.0:
        return "must be in [0, 1)"
    if key == "bpe_vocab_size" and value is not None and not value > 4:
        return "must exceed 4 (at least 5)"
    if key in ("adam_beta1", "adam_beta2") and not 0.0 <= value < 1.0:
        return "must be in [0, 1) (an Adam moment decay)"
    if key == "beam" and not 1 <= value <= 256:
        return "must be between 1 and 256 (1: greedy)"
    if key == "max_len_b" and value is not None and not value >= 1:
        return "must be positive (at least 1)"
    if key == "held_out" and not 0.0 < value <= 0.5:
        return "must be in (0, 0.5]"
    return None


@dataclass(frozen=True)
class TrainingRecipe:
    """How to train one model on one family of benchmarks (the catalogue's `[recipe.scan]`, `[recipe.mt]`, ...).

    `steps` or `epochs`: the step budget. `steps` is a fixed count of optimizer steps; `epochs`, when set, makes it
    ceil(epochs × rows trained on / batch_size) for each benchmark's own train set (000 App. A.1: 250 epochs of each
    SCAN split; with `batch_tokens`, token batches: below), and `steps` is then ignored
    (`planned_steps` below resolves it; `train --max-steps` replaces either). A recipe needs one of them;
    a variant's recipe or `--set` giving one drops the other (`layered`).

    `eval_every` or `eval_every_epochs`: how often the run validates and checkpoints, in steps, or, when
    `eval_every_epochs` is set (it then wins over `eval_every`), every ceil(eval_every_epochs × rows trained on /
    batch_size) steps (002's official code validates every 5 epochs). The last step always validates.

    `micro_batches`: each batch is sorted by length and cut into this many parts whose gradients are accumulated
    before the optimizer step. The update is the whole batch's (its mean token loss), only the padding shrinks: on
    SCAN a random batch pads every target to ~48 tokens while most are ~15. (Batches built from rows of similar
    length instead, i.e. length bucketing, cut padding too but slowed SCAN convergence several-fold: see
    benchmarks/RESULTS.md.)

    `length_groups`: the same cut, into this many parts, for models that take a batch's parts in one forward pass
    (`accepts_length_groups`, the zoo Transformer): position-wise layers run once over all parts and only attention
    runs part by part, so more parts (less padding) cost little; 8 was fastest for SCAN batches of 256.

    `batch_tokens` and `update_freq`: batches by tokens, as fairseq's `--max-tokens` and `--update-freq` (the MT
    recipes of 000, 001 and 004); a recipe gives `batch_size`, `batch_tokens` or both. A token batch is rows of
    similar length whose padded size, rows × max(longest source, longest target) in tokens with `</s>`, stays within
    `batch_tokens`; `batch_size`, when the recipe also gives it, caps its rows (fairseq's `--max-sentences`; without
    it no cap). An optimizer step accumulates `update_freq` token batches, each one forward and backward pass
    (`micro_batches` and `length_groups` are then unused), its loss the update's summed token loss over its target
    tokens, as fairseq's trainer divides by the summed sample size (`training.batching.TokenBatches` says how
    batches are cut and ordered). A train row longer than `batch_tokens` alone stops the run before it trains. An
    epoch is then the token batches that cover the rows trained on once (run.json records `token_batches_per_epoch`),
    so `epochs` makes the budget ceil(epochs × token batches an epoch / update_freq) steps and `eval_every_epochs`
    the interval likewise, counted once the rows are tokenized: with `update_freq` 1 the updates of fairseq's
    `--max-epoch` with `--max-tokens`, or with `--max-sentences` alone (`batch_tokens` large enough never to close
    a batch before `batch_size` rows: 000's SCAN batches, 256 rows of similar length).

    `select`: which validated checkpoint the run folder's root holds. `best_validation` keeps the one that scores
    best by `validate_by` (of tied ones, the one `ties` names); `last` keeps the final step's, as papers that train
    for a fixed budget report it (003 §3.2: early stopping on in-distribution validation can halve generalization
    accuracy). Under `last` a benchmark without a validation split holds nothing out: the run trains on every train
    row (000 fits on all of train) and validates on nothing (run.json's `validation` is "none").

    `ties`: under `best_validation`, which of the checkpoints that tie the best score the root keeps: `latest` (a
    later tie replaces it) or `earliest` (002's official code saves only on a strictly lower validation error).

    `validate_by`: what `best_validation` compares. `exact_match`: greedy exact match (SCAN papers); `loss`: the
    validation loss under the training criterion (label smoothing included), as fairseq's default
    `--best-checkpoint-metric loss` (000's noun-adjective runs); `bleu`: corpus BLEU (sacrebleu) of beam-5 decoding,
    as fairseq's `--eval-bleu --best-checkpoint-metric bleu` (000's IWSLT runs, CoGnition's train.sh). Every
    validation logs exact match and loss; BLEU (a decoding of the validation set) only when it selects.

    `held_out`: the fraction of train held out to validate on when the benchmark has no validation split and the run
    selects by validation (002, after Bastings et al. 2018: 20%). `held_out_from`: which rows: `random`, a draw seeded
    by the run's seed; `end`, the last rows of the train split as stored; or `file_end`, the last rows where the train
    split keeps the order of the file it was read from (`build-scan --official`, `import`), else a seeded random draw
    (002's official code holds out the last 20% of the published, shuffled SCAN file: a random fifth; the last fifth
    of a grammar-built split is not one). `allow_hidden_words`: `train` refuses, before any step, a hold-out that takes
    every training row of a source word found in at least 10 of them (`training.validation.word_coverage`); true
    trains so on purpose.

    `score_train`: after training, the root checkpoint's greedy exact match on the rows it trained on (teacher-forced,
    as validation scores it) is recorded in run.json as `train_exact_match` (002 leaves runs under 10% train accuracy
    out of its median).

    `beam`, `max_len_a`, `max_len_b`: how this recipe's runs decode, for `eval` (unless `eval --beam` says otherwise)
    and for validation BLEU (`validate_by = "bleu"`): a beam of `beam` (1: greedy), at most ⌊max_len_a × |x| + max_len_b⌋
    tokens before `</s>`, |x| being the batch's longest source in tokens with its `</s>`, as fairseq's
    `--beam 5 --max-len-a 1.2 --max-len-b 10` (SequenceGenerator: `max_len = a * src_len + b`, src_len the padded
    batch's length). Without `max_len_b`, `eval` caps each row at its own reference plus 8 tokens
    (`decoding.row_limits`) and validation at the longest reference plus 8, at most `decoding.MAX_TOKENS` (1,024, as
    fairseq): caps that cannot change exact match.

    `dictionaries`: `joint` (default), one vocabulary for sources and targets and one embedding for encoder, decoder
    and output layer; or `separate`, a source and a target dictionary, as fairseq builds them unless told
    `--joined-dictionary` (the IWSLT'14 example 000 starts from; CoGnition's scripts, which 004 follows): the encoder
    embeds source ids, the decoder target ids with the embedding its output layer shares (fairseq's
    `--share-decoder-input-output-embed`), and `eval` decodes with the target dictionary. `source_tokens` and
    `target_tokens`: `word` (whitespace words) or `bpe`, default `bpe` when `bpe_vocab_size` is set, else `word`; a
    joint dictionary tokenizes both sides alike. One BPE of `bpe_vocab_size` is learned on the training text of the
    sides that use it (both: jointly, as prepare-iwslt14.sh) and each side's dictionary keeps the tokens of its own
    text. `segment_source` / `segment_target` = "jieba": that side is segmented into words with jieba before BPE
    (CoGnition's Chinese; needs `separate` and that side's `bpe`). `training.tokenization` says how each is built.

    `precision`: the arithmetic of training on a GPU: `auto` (default) autocasts to bf16 where the GPU has bf16 units,
    else to fp16; `fp32` trains in full precision (fairseq's default without `--fp16`/`--bf16`, what a paper that
    names no mixed precision ran); `bf16` and `fp16` name the autocast type, on a GPU only. On the CPU `auto` is fp32.
    Evaluation always decodes in fp32.

    `architecture` (`[recipe.mt.architecture]`): architecture keys this recipe's runs change, merged over the entry's
    `[architecture]` (and under `train`'s architecture overrides): the papers train bigger models on MT than on SCAN,
    and bigger still on the noun-adjective Europarl split (000 App. A.2).
    """

    learning_rate: float
    batch_size: int | None = None
    steps: int | None = None
    epochs: float | None = None
    schedule: Schedule = "constant"
    warmup_steps: int = 0
    label_smoothing: float = 0.0
    grad_clip: float = 1.0
    weight_decay: float = 0.0
    eval_every: int = 1000
    eval_every_epochs: float | None = None
    bpe_vocab_size: int | None = None
    dictionaries: Dictionaries = "joint"
    source_tokens: TokenKind | None = None
    target_tokens: TokenKind | None = None
    segment_source: Segmenter | None = None
    segment_target: Segmenter | None = None
    eval_batch_size: int = 256
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    micro_batches: int = 4
    length_groups: int = 8
    batch_tokens: int | None = None
    update_freq: int = 1
    select: Selection = "best_validation"
    validate_by: ValidationMetric = "exact_match"
    ties: Ties = "latest"
    held_out: float = 0.1
    held_out_from: HeldOutFrom = "random"
    allow_hidden_words: bool = False
    score_train: bool = False
    beam: int = 1
    max_len_a: float = 0.0
    max_len_b: int | None = None
    precision: Precision = "auto"
    architecture: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key, value in vars(self).items():
            if (allowed := _out_of_range(key, value)) is not None:
                raise BenchbuildError(f"recipe key {key!r} {allowed}; got {value!r}")
        if self.steps is None and self.epochs is None:
            raise BenchbuildError("the recipe gives no step budget: set `steps` (optimizer steps) or `epochs` "
                                  "(passes over the train rows)")
        self._check_dictionaries()
        if self.batch_size is None and self.batch_tokens is None:
            raise BenchbuildError("the recipe gives no batch size: set `batch_size` (rows a batch) or `batch_tokens` "
                                  "(padded tokens a batch)")
        if self.batch_tokens is None and self.update_freq != 1:
            raise BenchbuildError(f"recipe key 'update_freq' = {self.update_freq} counts token batches: set "
                                  "`batch_tokens` too (a batch of `batch_size` rows accumulates in `micro_batches`)")

    @classmethod
    def checked_overrides(cls, overrides: Mapping[str, Any], option: str) -> dict[str, Any]:
        """Recipe keys given as command-line option `option` (`--set KEY=VALUE`): each a field, of the field's type
        and within its range; a refusal names `option`, not the catalogue file the recipe comes from."""
        checked = check_overrides(cls, overrides, option, noun="recipe key")
        for key, value in checked.items():
            if (allowed := _out_of_range(key, value)) is not None:
                raise BenchbuildError(f"{option} {key} {allowed}; got {value!r}")
        return checked

    @property
    def tokenizer_kind(self) -> str:
        """`bpe` when the recipe names a BPE vocabulary size, else whitespace words."""
        return "word" if self.bpe_vocab_size is None else "bpe"

    @property
    def source_tokenizer_kind(self) -> str:
        """How sources are tokenized: `source_tokens`, else `tokenizer_kind`."""
        return self.source_tokens or self.tokenizer_kind

    @property
    def target_tokenizer_kind(self) -> str:
        """How targets are tokenized: `target_tokens`, else `tokenizer_kind`."""
        return self.target_tokens or self.tokenizer_kind

    def _check_dictionaries(self) -> None:
        """The vocabulary keys describe dictionaries that can be built (`dictionaries` in the class docstring)."""
        kinds = {"source": self.source_tokenizer_kind, "target": self.target_tokenizer_kind}
        for side, kind in kinds.items():
            if kind == "bpe" and self.bpe_vocab_size is None:
                raise BenchbuildError(f"recipe key '{side}_tokens' = 'bpe' needs `bpe_vocab_size` (the BPE vocabulary "
                                      "size)")
        if self.dictionaries == "joint" and kinds["source"] != kinds["target"]:
            raise BenchbuildError(f"recipe keys 'source_tokens' = {kinds['source']!r} and 'target_tokens' = "
                                  f"{kinds['target']!r} differ, but one joint dictionary tokenizes both sides alike: "
                                  "set dictionaries = 'separate'")
        for side, segmenter in (("source", self.segment_source), ("target", self.segment_target)):
            if segmenter is None:
                continue
            if self.dictionaries != "separate":
                raise BenchbuildError(f"recipe key 'segment_{side}' = {segmenter!r} segments one side only: set "
                                      "dictionaries = 'separate'")
            if kinds[side] != "bpe":
                raise BenchbuildError(f"recipe key 'segment_{side}' = {segmenter!r} needs '{side}_tokens' = 'bpe': "
                                      "word-level ids decode with a space between words, so segmented text would "
                                      "not decode back as written")

    def learning_rate_factor(self, step: int) -> float:
        """Multiplier of `learning_rate` at optimizer step `step` (0-based): linear warm-up, then the schedule."""
        warmup = max(self.warmup_steps, 1)
        if self.schedule == "constant":
            return min(1.0, (step + 1) / warmup)
        return min((step + 1) / warmup, math.sqrt(warmup / (step + 1)))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# Keys that say one thing two ways (a budget in steps or in epochs, a validation interval in steps or in epochs): a
# table laid over another (a variant's recipe over its parent's, `--set` over the catalogue's) that gives one of a
# pair replaces the other, so `--set steps=500` on a recipe of `epochs` trains 500 steps.
ALTERNATIVES = (("steps", "epochs"), ("eval_every", "eval_every_epochs"))


def layered(below: Mapping[str, Any], above: Mapping[str, Any]) -> dict[str, Any]:
    """`above`'s recipe keys over `below`'s, key by key (the `architecture` table's too: `--set
    architecture={span=2}` keeps the recipe's other architecture keys), where a key of `ALTERNATIVES` in `above` drops
    its partner from `below` (unless `above` gives both)."""
    dropped = {partner for pair in ALTERNATIVES for key, partner in (pair, pair[::-1])
               if key in above and partner not in above}
    merged = {**{key: value for key, value in below.items() if key not in dropped}, **above}
    if "architecture" in below and "architecture" in above:  # a table of architecture keys, merged key by key too
        merged["architecture"] = {**below["architecture"], **above["architecture"]}
    return merged


def paper_recipe(name: str) -> bool:
    """Whether recipe `name` is another paper's recipe for the entry's model (`scan_000`), not its own (`scan`): a
    variant extending the entry does not inherit it, for the other paper did not train the variant."""
    return "_" in name


# What a recipe means for a run: which recipe trains it, and its budget in steps (read by training, the
# report and the sweep alike).

# Benchmark families whose sequences are whitespace-tokenized command languages; everything else is MT.
SCAN_LIKE_FAMILIES = frozenset({"scan"})


def recipe_family_for(benchmark_family: str) -> str:
    """Default recipe of a benchmark family: `scan` for SCAN-like data, `mt` for natural language."""
    return "scan" if benchmark_family in SCAN_LIKE_FAMILIES else "mt"


def default_recipe(recipes: Mapping[str, Any], reported: Iterable[Mapping[str, Any]], benchmark_family: str,
                   benchmark_name: str, splits: Iterable[str] = ()) -> str:
    """The recipe a run of an entry (its `recipes` and `[[reported]]` rows) trains with on a benchmark, unless `train`
    is given one: the recipe of the entry's reported number on this benchmark (`reported_on`), so a run reproduces
    the paper's setup (`transformer` on `scan/addprim_jump`: 000's `scan_000`); else the entry's recipe named for the
    benchmark family (`nounadj`); else `recipe_family_for` (`scan` for SCAN-like data, `mt` otherwise)."""
    for row in reported:
        if row.get("recipe") and reported_on(str(row["benchmark"]), benchmark_family, benchmark_name, splits):
            return str(row["recipe"])
    return benchmark_family if benchmark_family in recipes else recipe_family_for(benchmark_family)


def resolve_recipe(recipes: Mapping[str, Mapping[str, Any]], family: str, overrides: Mapping[str, Any] | None = None,
                   *, source: str = "the catalogue entry") -> TrainingRecipe:
    """The typed recipe `recipes[family]` with `overrides` applied; unknown keys are an error naming the key."""
    if family not in RECIPE_FAMILIES:
        raise BenchbuildError(f"unknown recipe {family!r}: {did_you_mean(family, RECIPE_FAMILIES)}(recipes: "
                              f"{', '.join(RECIPE_FAMILIES)})")
    if family not in recipes:
        have = ", ".join(sorted(recipes)) or "none"
        raise BenchbuildError(f"{source} has no [recipe.{family}] table (it has: {have})")
    overrides = check_table(TrainingRecipe, overrides or {}, "the recipe overrides", complete=False,
                            noun="recipe key")
    return from_table(TrainingRecipe, layered(recipes[family], overrides), source, f"[recipe.{family}]",
                      noun="recipe key")


def planned_steps(recipe: TrainingRecipe, split_rows: Mapping[str, int], validation_split: str | None = None,
                  token_batches: int | None = None) -> int:
    """The step budget of a run of `recipe` on a benchmark whose splits have `split_rows` rows (validating on
    `validation_split`, else as `train` chooses): `steps`, or, when the recipe sets `epochs`, ceil(epochs × rows
    trained on / batch_size), the rows trained on being train's less those held out to validate on; with
    `batch_tokens`, ceil(epochs × `token_batches` / update_freq), `token_batches` being the token batches of an
    epoch (`epoch_in_token_batches`)."""
    if recipe.epochs is None:
        return recipe.steps
    return _epochs_in_steps(recipe.epochs, recipe, split_rows, validation_split, token_batches)


def validation_interval(recipe: TrainingRecipe, split_rows: Mapping[str, int],
                        validation_split: str | None = None, token_batches: int | None = None) -> int:
    """Steps between validations: `eval_every`, or, when the recipe sets `eval_every_epochs`, ceil(eval_every_epochs ×
    rows trained on / batch_size) (with `batch_tokens`: × `token_batches` / update_freq)."""
    if recipe.eval_every_epochs is None:
        return recipe.eval_every
    return _epochs_in_steps(recipe.eval_every_epochs, recipe, split_rows, validation_split, token_batches)


def epoch_in_token_batches(recipe: TrainingRecipe) -> bool:
    """Whether the recipe counts a budget or an interval in epochs of token batches: how many steps they are is
    known only once the rows trained on are tokenized and packed (`planned_steps`' `token_batches`)."""
    return recipe.batch_tokens is not None and (recipe.epochs is not None or recipe.eval_every_epochs is not None)


def _epochs_in_steps(epochs: float, recipe: TrainingRecipe, split_rows: Mapping[str, int],
                     validation_split: str | None, token_batches: int | None) -> int:
    # In exact arithmetic on the number as written: 1.1 epochs of 800 rows in batches of 16 are 55 steps, not the 56
    # that floating point (1.1 × 800 / 16 = 55.00000000000001) would round up to.
    if recipe.batch_tokens is not None:
        if token_batches is None:
            raise ValueError("a recipe of epochs in token batches needs the token batches of an epoch")
        return max(1, math.ceil(Fraction(str(epochs)) * token_batches / recipe.update_freq))
    rows = rows_trained_on(split_rows, validation_split, recipe.held_out, recipe.select)
    return max(1, math.ceil(Fraction(str(epochs)) * rows / recipe.batch_size))

def holds_out(splits: Iterable[str], validation_split: str | None, select: Selection) -> bool:
    """Whether a run validates on rows held out of train: when given no split to validate on, the benchmark has no
    `validation` split, and `select` compares validation scores (`last` does not: it trains on every row)."""
    return validation_split is None and "validation" not in splits and select != "last"

def held_out_count(rows: int, held_out: float) -> int:
    """How many of `rows` train rows a `held_out` fraction holds out: round(held_out × rows), at least one."""
    return max(1, round(held_out * rows))

def rows_trained_on(split_rows: Mapping[str, int], validation_split: str | None, held_out: float,
                    select: Selection) -> int:
    """How many rows a run trains on, from the benchmark's rows per split: train, less those `split_validation`
    holds out."""
    train = split_rows["train"]
    return train - held_out_count(train, held_out) if holds_out(split_rows, validation_split, select) else train
