"""What `degree` and `build-react` are told (each field is its command-line option), and the corpora they name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import typer

from benchbuild.corpus import ParallelInput
from benchbuild.device import resolve_device
from benchbuild.engine import EngineParameters
from benchbuild.errors import BenchbuildError
from benchbuild.options import DeviceOption, EncodingErrorsOption, SeedOption, check_ranges, key_values
from benchbuild.react.normalize import Normalizer

# The recipe family ensemble members train with (001 trains them as MT systems).
MEMBER_RECIPE = "mt"

LowercaseOption = Annotated[bool, typer.Option("--lowercase", help="Lowercase every corpus before comparing words.")]
TokenizeOption = Annotated[Literal["moses", "none"], typer.Option(
    "--tokenize", help="moses: sacremoses-tokenize every corpus; none: keep the files' whitespace tokens.")]
MinWordCountOption = Annotated[int, typer.Option(
    "--min-word-count", min=0, help="OOV filter: drop pool lines with a word seen fewer times in the training source.")]
MinNgramCountOption = Annotated[int, typer.Option(
    "--min-ngram-count", min=1, help="n-gram dictionary: n-grams seen at least this often in the training source.")]
MaxNgramOption = Annotated[Optional[int], typer.Option(
    "--max-ngram", min=1, help="Longest n-gram in the dictionary (default: no bound).")]


def check_moses_language(tokenize: str, lang: str, option: str) -> None:
    """Refuse a language the Moses tokenizer knows no rules for, where --tokenize moses would apply them (sacremoses
    would silently tokenize it with no language's non-breaking prefixes)."""
    if tokenize != "moses":
        return
    from sacremoses.corpus import NonbreakingPrefixes

    known = sorted(set(NonbreakingPrefixes().available_langs.values()))
    if lang not in known:
        raise BenchbuildError(f"{option} {lang!r}: the Moses tokenizer (--tokenize moses) has no rules for it; give "
                              f"one of: {', '.join(known)}")


@dataclass(frozen=True)
class DegreeParameters:
    """Stages 1–4's options, shared by `benchbuild degree` and `benchbuild build-react`."""

    lowercase: LowercaseOption = False
    tokenize: TokenizeOption = "none"
    lang: Annotated[str, typer.Option("--lang", help="Language of both files (Moses tokenizer rules).")] = "de"
    min_word_count: MinWordCountOption = 3
    min_ngram_count: MinNgramCountOption = 4
    max_ngram: MaxNgramOption = None

    def check(self) -> None:
        """Fail before any work on an option out of its declared range, or a --lang the Moses tokenizer has no
        rules for when --tokenize moses uses them."""
        check_ranges(self)
        check_moses_language(self.tokenize, self.lang, "--lang")

    def normalizer(self) -> Normalizer:
        return Normalizer(lowercase=self.lowercase, tokenize=self.tokenize, lang=self.lang)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ReactParameters:
    """Every option of `build-react` but where and how to save: the corpora, the options that shape the benchmark
    (`recorded()`: build.json and the card list them, with the seed), and where members are kept and run."""

    train_src: Annotated[Optional[Path], typer.Option("--train-src", help="Training corpus, source side.")] = None
    train_tgt: Annotated[Optional[Path], typer.Option("--train-tgt", help="Training corpus, target side.")] = None
    train_hf: Annotated[Optional[str], typer.Option("--train-hf", help="Instead: a local HF dataset (translation column, train split).")] = None
    pool_src: Annotated[Optional[list[Path]], typer.Option("--pool-src", help="Candidate pool, source side (repeatable; a glob such as 'shards/*.de' gives its files in name order).")] = None
    pool_tgt: Annotated[Optional[list[Path]], typer.Option("--pool-tgt", help="Candidate pool, target side (repeatable, same order; a glob pairs its files with --pool-src's).")] = None
    pool_tsv: Annotated[Optional[list[Path]], typer.Option("--pool-tsv", help="Instead or as well: a source<TAB>target file (repeatable; globs allowed).")] = None
    pool_parquet: Annotated[Optional[list[Path]], typer.Option("--pool-parquet", help="Instead or as well: a parquet file with a `translation` column or one column per language (repeatable; globs allowed).")] = None
    pool_hf: Annotated[Optional[list[str]], typer.Option("--pool-hf", help="Instead or as well: a local HF dataset (train split).")] = None
    valid_src: Annotated[Optional[Path], typer.Option("--valid-src", help="Validation corpus, source side.")] = None
    valid_tgt: Annotated[Optional[Path], typer.Option("--valid-tgt", help="Validation corpus, target side.")] = None
    test_src: Annotated[Optional[Path], typer.Option("--test-src", help="In-domain test corpus, source side.")] = None
    test_tgt: Annotated[Optional[Path], typer.Option("--test-tgt", help="In-domain test corpus, target side.")] = None
    source_lang: Annotated[str, typer.Option("--source-lang", help="Source language (Moses rules, card, stats).")] = "de"
    target_lang: Annotated[str, typer.Option("--target-lang", help="Target language.")] = "en"
    lowercase: LowercaseOption = DegreeParameters.lowercase
    tokenize: TokenizeOption = DegreeParameters.tokenize
    min_word_count: MinWordCountOption = DegreeParameters.min_word_count
    min_ngram_count: MinNgramCountOption = DegreeParameters.min_ngram_count
    max_ngram: MaxNgramOption = DegreeParameters.max_ngram
    pool_size: Annotated[int, typer.Option("--pool-size", min=1, help="Candidates kept, highest degree first.")] = 60_000
    max_length: Annotated[int, typer.Option("--max-length", min=1, help=(
        "Pool pairs with a side longer than this many tokens (whitespace tokens after normalization) are set aside "
        "before the ensemble, and counted in the card: attention is quadratic in length (256: the zoo "
        "models' generation length)."))] = 256
    ensemble_size: Annotated[int, typer.Option("--ensemble-size", min=1, help="Ensemble members (seeds 0…K−1).")] = 10
    ensemble_model: Annotated[str, typer.Option("--ensemble-model", help="Zoo model of the members.")] = "transformer"
    ensemble_dir: Annotated[Optional[Path], typer.Option("--ensemble-dir", help="Where members are saved and reused.")] = None
    max_steps: Annotated[Optional[int], typer.Option("--max-steps", min=1, help="Step budget of each member (default: the recipe's).")] = None
    ensemble_architecture: Annotated[Optional[list[str]], typer.Option(
        "--ensemble-architecture", help="Override an architecture key of the members, KEY=VALUE (repeatable).")] = None
    ensemble_set: Annotated[Optional[list[str]], typer.Option(
        "--ensemble-set", help="Override a recipe key of the members, KEY=VALUE (repeatable).")] = None
    beam: Annotated[int, typer.Option("--beam", min=1, help="Beam over the ensemble's mean distribution (1: greedy).")] = 5
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Sentences decoded at once.")] = 64
    drop_top: Annotated[int, typer.Option("--drop-top", min=0, help="Most uncertain candidates dropped as noise.")] = 2_000
    band: Annotated[int, typer.Option("--band", min=1, help="Candidates after the dropped ones to sample from.")] = 18_000
    sample: Annotated[int, typer.Option("--sample", min=1, help="Size of cg_test, sampled from the band.")] = 3_000
    allow_small: Annotated[bool, typer.Option("--allow-small", help="Accept a pool or band smaller than asked (the card records it).")] = False
    encoding_errors: EncodingErrorsOption = "strict"
    cache_dir: Annotated[Path, typer.Option("--cache-dir", help="Stage cache (resume after a crash or a changed later option).")] = Path(".benchbuild-cache/react")
    device: DeviceOption("Where members train and score") = "auto"
    seed: SeedOption = 0

    @property
    def architecture_overrides(self) -> dict[str, Any]:
        return key_values(self.ensemble_architecture or [], "--ensemble-architecture")

    @property
    def recipe_overrides(self) -> dict[str, Any]:
        from benchbuild.zoo.recipe import TrainingRecipe

        return TrainingRecipe.checked_overrides(key_values(self.ensemble_set or [], "--ensemble-set"), "--ensemble-set")

    @property
    def member_overrides(self) -> dict[str, Any]:
        """The recipe keys the members train with over the `mt` recipe: `--ensemble-set`'s, over validation by loss
        (`validate_by = "loss"`). 001 does not say how its members' checkpoints were chosen; fairseq's default
        (`--best-checkpoint-metric loss`) needs no decoding, where the `mt` recipe's BLEU would decode the validation
        set with beam 5 at every validation of every member."""
        return {"validate_by": "loss", **self.recipe_overrides}

    def degree(self) -> DegreeParameters:
        return DegreeParameters(lowercase=self.lowercase, tokenize=self.tokenize, lang=self.source_lang,
                                min_word_count=self.min_word_count, min_ngram_count=self.min_ngram_count,
                                max_ngram=self.max_ngram)

    def train(self) -> ParallelInput:
        corpus = self._corpus("train", self.train_src, self.train_tgt, self.train_hf, "train")
        if corpus is None:
            raise BenchbuildError("give the training corpus: --train-src and --train-tgt, or --train-hf")
        return corpus

    def pools(self) -> list[ParallelInput]:
        """The candidate pools, one per file (a glob gives its files in name order): each --pool-src/--pool-tgt
        pair in order, then each --pool-tsv, each --pool-parquet and each --pool-hf."""
        sources = [path for pattern in self.pool_src or [] for path in expand_glob(pattern, "--pool-src")]
        targets = [path for pattern in self.pool_tgt or [] for path in expand_glob(pattern, "--pool-tgt")]
        if len(sources) != len(targets):
            raise BenchbuildError(f"{len(sources)} --pool-src but {len(targets)} --pool-tgt: give them in pairs")
        pools = [self._corpus("pool", source, target, None, "train") for source, target in zip(sources, targets)]
        pools += [ParallelInput(tsv=path, source_lang=self.source_lang, target_lang=self.target_lang)
                  for pattern in self.pool_tsv or [] for path in expand_glob(pattern, "--pool-tsv")]
        pools += [ParallelInput(parquet=path, source_lang=self.source_lang, target_lang=self.target_lang)
                  for pattern in self.pool_parquet or [] for path in expand_glob(pattern, "--pool-parquet")]
        return pools + [self._corpus("pool", None, None, hf, "train") for hf in self.pool_hf or []]

    def validation(self) -> ParallelInput | None:
        return self._corpus("valid", self.valid_src, self.valid_tgt, None, "validation")

    def test(self) -> ParallelInput | None:
        return self._corpus("test", self.test_src, self.test_tgt, None, "test")

    def check(self) -> None:
        """Fail before any work on a missing or unpaired corpus, a malformed KEY=VALUE or one the members' model or
        recipe refuses, an option out of its declared range or inconsistent with another (--sample above --band;
        --drop-top plus --band above --pool-size without --allow-small), a --cache-dir or --ensemble-dir that is a
        file, or a --device this machine does not have."""
        check_ranges(self)
        check_moses_language(self.tokenize, self.source_lang, "--source-lang")
        self.train()
        pools = self.pools()
        self.validation()
        self.test()
        self._check_members()
        self._check_folder(self.cache_dir, "--cache-dir", "the stage cache")
        if self.ensemble_dir is not None:
            self._check_folder(self.ensemble_dir, "--ensemble-dir", "the ensemble members")
        if not pools:
            raise BenchbuildError("give at least one candidate pool (--pool-src/--pool-tgt, --pool-tsv, "
                                  "--pool-parquet or --pool-hf)")
        if self.sample > self.band:
            raise BenchbuildError(f"--sample {self.sample:,} is larger than --band {self.band:,}: the sample is drawn "
                                  "from the band (--sample must be at most --band)")
        if self.drop_top + self.band > self.pool_size and not self.allow_small:
            raise BenchbuildError(f"--drop-top {self.drop_top:,} plus --band {self.band:,} is more than --pool-size "
                                  f"{self.pool_size:,} candidates: lower --drop-top/--band, raise --pool-size, or pass "
                                  "--allow-small")
        resolve_device(self.device)  # a GPU asked for on a machine without one fails here, not after stages 1-5

    def _check_members(self) -> None:
        """The ensemble's model, its `mt` recipe with --ensemble-set over it, and --ensemble-architecture over its
        architecture: each KEY=VALUE a key of its kind, of its type and in its range (members train after the
        degree stage, so a mistake found there would cost that stage)."""
        from benchbuild.zoo.recipe import resolve_recipe
        from benchbuild.zoo.catalogue import checked_architecture_overrides, load_entry

        entry = load_entry(self.ensemble_model)
        resolve_recipe(entry.recipes, MEMBER_RECIPE, self.member_overrides,
                       source=f"--ensemble-model {self.ensemble_model}")
        checked_architecture_overrides(entry, MEMBER_RECIPE, self.architecture_overrides, "--ensemble-architecture")

    @staticmethod
    def _check_folder(folder: Path, option: str, what: str) -> None:
        if folder.exists() and not folder.is_dir():
            raise BenchbuildError(f"{option} {folder} is a file, not a folder: give a folder for {what} (it is "
                                  "created if missing)")

    def check_engine(self, engine: EngineParameters) -> None:
        """Fail before any work on engine options that cannot be honoured, or that clash with --device."""
        engine.check()
        if engine.engine == "dask" and self.device.startswith("cuda:"):
            raise BenchbuildError(f"--device {self.device} names one GPU of this machine, but with --engine dask "
                                  "each worker trains and scores on its own GPU: use --device cuda or auto")

    def recorded(self) -> dict[str, Any]:
        """The options that shape the benchmark, as build.json and the card list them (the corpora are recorded by
        their fingerprints; where members are kept and run changes nothing in the output)."""
        return {
            "lowercase": self.lowercase, "tokenize": self.tokenize, "source_lang": self.source_lang,
            "target_lang": self.target_lang, "min_word_count": self.min_word_count,
            "min_ngram_count": self.min_ngram_count, "max_ngram": self.max_ngram, "pool_size": self.pool_size,
            "max_length": self.max_length, "ensemble_size": self.ensemble_size,
            "ensemble_model": self.ensemble_model, "max_steps": self.max_steps,
            "architecture_overrides": self.architecture_overrides, "recipe_overrides": self.recipe_overrides,
            "beam": self.beam, "batch_size": self.batch_size, "drop_top": self.drop_top, "band": self.band,
            "sample": self.sample, "allow_small": self.allow_small, "encoding_errors": self.encoding_errors,
        }

    def _corpus(self, label: str, source: Path | None, target: Path | None, hf: str | None,
                split: str) -> ParallelInput | None:
        if source is None and target is None and hf is None:
            return None
        if hf is None and (source is None or target is None):
            raise BenchbuildError(f"--{label}-src and --{label}-tgt go together: give both files")
        return ParallelInput(source=source, target=target, hf=hf, source_lang=self.source_lang,
                             target_lang=self.target_lang, split=split)


def expand_glob(pattern: Path, option: str) -> list[Path]:
    """`pattern`'s files in name order when it holds a glob character (`*`, `?`, `[`), else `pattern` itself
    (a missing file is then named by the reader); a glob that matches no file is an error."""
    import glob

    text = str(pattern)
    if not any(character in text for character in "*?["):
        return [pattern]
    matches = sorted(Path(path) for path in glob.glob(text, recursive=True) if Path(path).is_file())
    if not matches:
        raise BenchbuildError(f"{option} {text!r} matches no file")
    return matches
