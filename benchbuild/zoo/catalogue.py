"""The model catalogue: `models/<name>.toml` entries (architecture, recipes, reported numbers) and building models.

The entries ship inside the package (`benchbuild/zoo/models/`, which the checkout's top-level `models/` points to),
so an installed wheel has its catalogue.

An entry is data: `[architecture]` holds the keyword arguments of the model's `PretrainedConfig` and `kind` picks
the module (transformer | dangle | syntactic_attention | lstm_attention | hf); `[recipe.scan]`, `[recipe.mt]` (and
`[recipe.nounadj]`, `[recipe.scan_000]`, ...: `zoo.recipe.RecipeFamily`) hold the training recipes (the keys are
`TrainingRecipe`'s fields), and a recipe's `architecture` sub-table (`[recipe.mt.architecture]`) the architecture
keys that recipe's runs change (`resolved_architecture`); `[[reported]]` the numbers the paper reports, each naming
the `recipe` it was made with, `paper` the ids of `benchbuild.papers`. Unknown keys anywhere are an error naming the
file and key.

`[fidelity.<recipe>]` says how faithful a recipe, as benchbuild trains it, is to the paper it comes from: `sources`
(the paper's sections and tables, the official files it was checked against) and `[[fidelity.<recipe>.differences]]`
rows (`what` differs, what the `paper` or its official code does, what we do: `ours`, and `why`: the reason, or "not
yet done: ..."); a table names a recipe the entry has (its own or inherited). `benchbuild zoo --model NAME` prints
them per recipe. A `[[reported]]` row says which statistic the paper's number is (`statistic`, `spread`,
`spread_value`, `runs`, `min_train_exact_match`; `ReportedNumber`) and, where the paper reports another model than
this entry builds, which (`model_reported`).

A variant says `extends = "transformer"` (a catalogue name, or a `.toml` path relative to the file) and sets only
what differs: its `[architecture]`, `[recipe.*]` and `[recipe.*.architecture]` tables are merged key by key over
the parent's (which may itself extend another). Another paper's recipe for the parent (`[recipe.mt_001]`, a name
with a paper id) is not inherited: that paper trained the parent, not the variant. `name`, `paper`, `summary` and
`[[reported]]` are never inherited: they describe this model, and a parent's reported numbers are not the variant's.
A `[fidelity.<recipe>]` table is inherited with its recipe (so not another paper's) and is never merged: a variant
that writes its own table for a recipe replaces the parent's whole, sources and differences, for what differs from
the paper is a statement about the model the recipe trains, and a variant that changes the model restates it.

`kind = "hf"` entries build any `transformers` seq2seq model: either `path` (a local config.json or a config /
checkpoint folder: `AutoModelForSeq2SeqLM.from_config` / `from_pretrained`) or `model_type` plus that config's
keyword arguments (`AutoConfig.for_model`); the model is resized to the benchmark's vocabulary either way.

Notes on the zoo <-> training interface:
- `kind = "hf"` also accepts `model_type` + config kwargs instead of `path` (models/hf.toml builds a small BART);
  such from-scratch models get no forced BOS/EOS tokens, so they stop where they predict EOS like the others.
- `build_model` stores no output length in `generation_config` (neither `max_length` nor `max_new_tokens`), so a
  `generate()` call may pass either without transformers' warning that both are set (a stored one would also take
  precedence over, or clash with, the call's). Pass one: transformers' default of 20 new tokens cuts SCAN outputs.
  `benchbuild.zoo.decoding` passes `max_new_tokens`.
- `get_encoder()` returns a weight-less view whose `forward(input_ids, attention_mask)` gives the encoder output;
  Syntactic Attention's and Dangle's encoder outputs carry extra tensors (translation stream, source ids), which
  `generate()` expands for beam search like any `ModelOutput` field.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.resources
import inspect
import math
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from benchbuild.bleu_ways import REPORTED_WAYS
from benchbuild.errors import BenchbuildError, did_you_mean
from benchbuild.toml_schema import check_keys, check_overrides, check_table, from_table, read_toml
from benchbuild.zoo.recipe import RecipeFamily, TrainingRecipe, layered, paper_recipe

CATALOGUE = Path(str(importlib.resources.files("benchbuild.zoo") / "models"))  # shipped with the package
KINDS = ("transformer", "dangle", "syntactic_attention", "lstm_attention", "hf")


@dataclass
class ModelEntry:
    """One catalogue entry, resolved: a variant's tables already merged over its parent's."""

    name: str
    paper: str
    summary: str
    architecture: dict
    recipes: dict[str, dict]
    reported: list[dict]
    path: Path = field(default=Path("."))
    extends: str | None = None
    fidelity: dict[str, dict] = field(default_factory=dict)  # recipe -> {"sources": [...], "differences": [...]}


@dataclass(frozen=True)
class EntryFile:
    """The layout of one `models/<name>.toml` file (a variant may leave out what it inherits)."""

    name: str
    paper: str
    summary: str
    extends: str | None = None
    architecture: dict[str, Any] = field(default_factory=dict)
    recipe: dict[RecipeFamily, dict[str, Any]] = field(default_factory=dict)
    reported: list[dict[str, Any]] = field(default_factory=list)
    fidelity: dict[RecipeFamily, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class ReportedNumber:
    """One `[[reported]]` row: a number the paper reports for this model (`table` cites it: "000 Table 3") and the
    entry's recipe that trains the model as that paper did (`recipe`, whose `select` is the paper's selection rule;
    `train` picks it for this benchmark by default). Every row of the shipped catalogue names its recipe.

    What the number is, as the paper computed it: `statistic` over `runs` runs (`mean`, `median`, or `single`: one
    run), with `spread` (`se`: standard error, `std`: standard deviation, `iqr`: interquartile range, `none`: not
    given) of `spread_value`, in the unit of `value` (an exact match of 30.0 printed as "0.30 ± 0.02" has
    `spread_value = 2.0`); `runs` absent: not recorded (the paper does not say, or not here). `min_train_exact_match`
    (percent, as exact match values are): runs whose final train exact match does not exceed it are left out of
    the statistic (002 App. B: "we excluded runs in which training accuracy did not get above 10%"). `model_reported`: the
    model the paper's number belongs to when it is not the one this entry builds (`lstm_attention`'s 002 Table 1 rows
    are Bastings et al. 2018's GRU + attention); empty when it is. `selection`: how the paper picked the
    configuration the number belongs to, where it picked one (000 Table 3: the best 3-seed mean of a grid, chosen on
    the test set), said beside the number wherever it is shown. `bleu` (BLEU rows only): how the paper computed its
    BLEU, one of `benchbuild.bleu_ways.REPORTED_WAYS` (`nltk_multi_reference`, `fairseq_tokenized`...; `sacrebleu`:
    as benchbuild's own `bleu`, what a row without it means; `unstated`: the paper does not say), so the report sets
    the number beside a BLEU computed that way only. `note`: whatever else the row needs said."""

    benchmark: str
    metric: str
    value: float
    table: str
    note: str = ""
    recipe: str = ""
    statistic: Literal["mean", "median", "single"] = "mean"
    spread: Literal["se", "std", "iqr", "none"] = "none"
    spread_value: float | None = None
    runs: int | None = None
    min_train_exact_match: float | None = None
    model_reported: str = ""
    selection: str = ""
    bleu: str = ""


def _check_reported(row: dict, where: str, label: str) -> None:
    """A `[[reported]]` row's statistic fields say one coherent thing; errors name `where` and the row `label`."""
    runs, spread = row.get("runs"), row.get("spread", "none")
    if runs is not None and runs < 1:
        raise BenchbuildError(f"{where}: {label} runs must be at least 1; got {runs}")
    if row.get("statistic") == "single" and (runs not in (None, 1) or spread != "none"):
        raise BenchbuildError(f"{where}: {label} statistic 'single' is one run: runs must be 1 and spread 'none'")
    value = row.get("spread_value")
    if value is not None and (spread == "none" or not math.isfinite(value) or value < 0):
        raise BenchbuildError(f"{where}: {label} spread_value needs a spread ('se', 'std' or 'iqr') and must be a "
                              f"finite number, at least 0; got spread {spread!r}, spread_value {value!r}")
    threshold = row.get("min_train_exact_match")
    if threshold is not None and not 0.0 <= threshold <= 100.0:
        raise BenchbuildError(f"{where}: {label} min_train_exact_match is a percentage (0 to 100); got {threshold!r}")
    if "bleu" in row:
        if row.get("metric") != "bleu":
            raise BenchbuildError(f"{where}: {label} bleu says how a paper computed BLEU: it belongs to a metric "
                                  f"\"bleu\" row, not to metric {row.get('metric')!r}")
        if row["bleu"] not in REPORTED_WAYS:
            raise BenchbuildError(f"{where}: {label} bleu {row['bleu']!r} is not a way benchbuild knows (one of: "
                                  f"{', '.join(REPORTED_WAYS)})")


@dataclass(frozen=True)
class Fidelity:
    """A `[fidelity.<recipe>]` table: where the recipe comes from (`sources`: paper sections and tables, the official
    files it was checked against) and where it still departs from them (`[[fidelity.<recipe>.differences]]`)."""

    sources: list[str]
    differences: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Difference:
    """One `[[fidelity.<recipe>.differences]]` row: `what` differs (a short name, unique in its table), what the
    `paper` (or its official code) does, what benchbuild does (`ours`), and `why`: the reason, or "not yet done"."""

    what: str
    paper: str
    ours: str
    why: str


def _checked_fidelity(table: Any, where: str, family: str) -> dict:
    """A `[fidelity.<family>]` table checked (keys, types, non-empty texts, one row per `what`), as plain data."""
    section = f"[fidelity.{family}]"
    checked = check_table(Fidelity, table, where, section)
    if not checked["sources"] or not all(source.strip() for source in checked["sources"]):
        raise BenchbuildError(f"{where}: {section} sources must name at least one source, none of them empty")
    differences = []
    for number, row in enumerate(checked.get("differences", []), start=1):
        label = f"[[fidelity.{family}.differences]] #{number}"
        difference = check_table(Difference, row, where, label)
        empty = [key for key, text in difference.items() if not text.strip()]
        if empty:
            raise BenchbuildError(f"{where}: {label} {empty[0]} is empty")
        if difference["what"] in {seen["what"] for seen in differences}:
            raise BenchbuildError(f"{where}: {label} what {difference['what']!r} is listed twice in {section}")
        differences.append(difference)
    return {"sources": checked["sources"], "differences": differences}


# kind -> (module, config class, model class); imported on first use.
MODULES = {
    "transformer": ("benchbuild.zoo.transformer", "TransformerConfig", "TransformerForSeq2Seq"),
    "dangle": ("benchbuild.zoo.dangle", "DangleConfig", "DangleForSeq2Seq"),
    "syntactic_attention": ("benchbuild.zoo.syntactic_attention", "SyntacticAttentionConfig",
                            "SyntacticAttentionForSeq2Seq"),
    "lstm_attention": ("benchbuild.zoo.lstm_attention", "LSTMAttentionConfig", "LSTMAttentionForSeq2Seq"),
}


def _classes(kind: str):
    """(config class, model class) of a zoo kind."""
    if kind not in MODULES:
        raise BenchbuildError(f"unknown model kind {kind!r} (valid: {', '.join(KINDS)})")
    module_name, config_name, model_name = MODULES[kind]
    module = importlib.import_module(module_name)
    return getattr(module, config_name), getattr(module, model_name)


# Layer counts a stack may set to 0 (a model without that stack still trains: an ablation); every other integer
# architecture key is a size or a count of at least 1.
_MAY_BE_ZERO = frozenset({"encoder_layers", "decoder_layers", "adaptive_layers", "source_layers", "value_layers"})
# Keys that make transformers import Python modules from a folder, or allow it to: benchbuild never runs such code.
_CODE_KEYS = ("auto_map", "trust_remote_code")


def _check_architecture(architecture: dict, where: str) -> None:
    """`architecture` (a `[architecture]` table, or one with overrides merged) names a kind, keys of that kind's
    config with values of their types and in range, and a model the config accepts; errors name `where`."""
    kind = architecture.get("kind")
    if kind is None:
        raise BenchbuildError(f"{where}: [architecture] has no 'kind' (one of {', '.join(KINDS)})")
    if kind not in KINDS:
        raise BenchbuildError(f"{where}: [architecture] kind {kind!r} is not one of {', '.join(KINDS)}")
    if kind == "hf":
        if ("path" in architecture) == ("model_type" in architecture):
            raise BenchbuildError(f"{where}: an hf [architecture] needs exactly one of 'path' or 'model_type'")
        if "path" in architecture:
            check_keys(architecture, {"kind", "path"}, where, "[architecture]")
        for key in _CODE_KEYS:
            if key in architecture:
                raise BenchbuildError(f"{where}: an hf [architecture] may not set {key!r}: benchbuild never runs "
                                      "code from a model folder")
        _check_ranges(architecture, f"{where}: [architecture] ", sizes=False)
        return
    values = check_table(_architecture_schema(kind), architecture, where, "[architecture]", complete=False)
    _check_ranges(values, f"{where}: [architecture] ")
    _check_config(kind, values, f"{where}: [architecture]")


def checked_architecture_overrides(entry: ModelEntry, family: str, overrides: dict, option: str) -> dict:
    """Architecture keys given as command-line option `option` (`--ensemble-architecture KEY=VALUE`) over `entry`'s
    architecture for recipe `family`: each a key of the entry's kind, of its type and in its range, and together a
    model that kind's config accepts. A refusal names `option`, not the catalogue file."""
    architecture = {**resolved_architecture(entry, family), **overrides}
    kind = architecture.get("kind")
    if kind == "hf" or kind not in KINDS:
        _check_architecture(architecture, option)
        return dict(overrides)
    checked = check_overrides(_architecture_schema(kind), overrides, option, noun="architecture key")
    _check_ranges(checked, f"{option} ")
    _check_config(kind, {**architecture, **checked}, option)
    return checked


@functools.cache
def _architecture_schema(kind: str) -> type:
    """A dataclass of zoo kind `kind`'s architecture keys, typed as its config's `__init__` declares them (what
    `toml_schema` checks values against)."""
    config_class = _classes(kind)[0]
    fields: list[tuple[str, Any, Any]] = [("kind", str, field(default=kind))]
    for key in sorted(config_class.architecture_keys()):
        owner = next(klass for klass in config_class.__mro__
                     if "__init__" in klass.__dict__ and key in inspect.signature(klass.__init__).parameters)
        fields.append((key, typing.get_type_hints(owner.__init__)[key], field(default=None)))
    return dataclasses.make_dataclass(f"{config_class.__name__}Architecture", fields, frozen=True)


def _out_of_range(key: str, value: Any, sizes: bool) -> str | None:
    """What architecture value `value` of `key` must be, when it is not (dropout a probability, a number finite, with
    `sizes` an integer at least 1, a layer count at least 0); None when it is fine."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value):
        return "must be a finite number"
    if key.endswith("dropout") and not 0.0 <= value < 1.0:
        return "must be in [0, 1) (a dropout probability)"
    if sizes and isinstance(value, int) and value < (0 if key in _MAY_BE_ZERO else 1):
        return "must not be negative (at least 0)" if key in _MAY_BE_ZERO else "must be positive (at least 1)"
    return None


def _check_ranges(values: dict, label: str, sizes: bool = True) -> None:
    for key, value in values.items():
        if (allowed := _out_of_range(key, value, sizes)) is not None:
            raise BenchbuildError(f"{label}{key} {allowed}; got {value!r}")


def _check_config(kind: str, values: dict, label: str) -> None:
    """Build the kind's config (no weights): its own checks (a choice's name, d_model divisible by num_heads) run
    now, not when the model is built."""
    try:
        _classes(kind)[0](**{key: value for key, value in values.items() if key != "kind"})
    except BenchbuildError as error:
        raise BenchbuildError(f"{label}: {error}") from None


def _read(path: Path, extended_by: tuple[Path, ...] = ()) -> ModelEntry:
    """The entry of one file, checked, with the tables of the entry it extends (if any) merged under its own."""
    where = str(path)
    own = check_table(EntryFile, read_toml(path, "model file"), where)
    recipes = own.get("recipe", {})
    for family, recipe in recipes.items():
        check_table(TrainingRecipe, recipe, where, f"[recipe.{family}]", complete=False)
    reported = [check_table(ReportedNumber, row, where, f"[[reported]] #{number}")
                for number, row in enumerate(own.get("reported", []), start=1)]
    for number, row in enumerate(reported, start=1):
        _check_reported(row, where, f"[[reported]] #{number}")
    fidelity = {family: _checked_fidelity(table, where, family) for family, table in own.get("fidelity", {}).items()}
    architecture = own.get("architecture", {})
    if "extends" in own:
        parent = _read(_parent_path(own["extends"], path, extended_by), (*extended_by, path.resolve()))
        architecture = {**parent.architecture, **architecture}
        inherited = {family: recipe for family, recipe in parent.recipes.items() if not paper_recipe(family)}
        recipes = {family: layered(inherited.get(family, {}), recipes.get(family, {}))
                   for family in {**inherited, **recipes}}
        fidelity = {**{family: table for family, table in parent.fidelity.items() if family in inherited},
                    **fidelity}
    _check_architecture(architecture, where)
    _check_hf_source(architecture, path)
    for family, recipe in recipes.items():
        from_table(TrainingRecipe, recipe, where, f"[recipe.{family}]")  # complete, and every value in range
        if recipe.get("architecture"):
            _check_architecture({**architecture, **recipe["architecture"]}, f"{where} [recipe.{family}.architecture]")
            _check_hf_source({**architecture, **recipe["architecture"]}, path)
    for number, row in enumerate(reported, start=1):
        if row.get("recipe") and row["recipe"] not in recipes:
            raise BenchbuildError(f"{where}: [[reported]] #{number} recipe {row['recipe']!r} is not a recipe of "
                                  f"this entry (it has: {', '.join(sorted(recipes)) or 'none'})")
    for family in fidelity:
        if family not in recipes:
            raise BenchbuildError(f"{where}: [fidelity.{family}] is for recipe {family!r}, which this entry does not "
                                  f"have (it has: {', '.join(sorted(recipes)) or 'none'})")
    return ModelEntry(name=own["name"], paper=own["paper"], summary=own["summary"], architecture=architecture,
                      recipes=recipes, reported=reported, path=path, extends=own.get("extends"), fidelity=fidelity)


def resolved_architecture(entry: ModelEntry, family: str) -> dict:
    """The architecture `entry`'s runs on recipe family `family` build: `[architecture]` with the recipe's
    `[recipe.FAMILY.architecture]` merged over it (`train`'s architecture overrides go over both)."""
    return {**entry.architecture, **entry.recipes.get(family, {}).get("architecture", {})}


def _parent_path(reference: str, path: Path, extended_by: tuple[Path, ...]) -> Path:
    parent = path.parent / reference if reference.endswith(".toml") else CATALOGUE / f"{reference}.toml"
    if not parent.is_file():
        raise BenchbuildError(f"{path}: extends {reference!r}, which is not a catalogue entry ({_names()}) "
                              "or a .toml file beside it")
    chain = (*extended_by, path.resolve())
    if parent.resolve() in chain:
        raise BenchbuildError(f"{path}: extends {reference!r}, which extends it back "
                              f"({' -> '.join(p.stem for p in (*chain, parent))})")
    return parent


def _names() -> str:
    return ", ".join(sorted(p.stem for p in CATALOGUE.glob("*.toml")))


def list_entries() -> list[ModelEntry]:
    """Every `models/*.toml` of the catalogue, sorted by name."""
    return sorted((_read(path) for path in CATALOGUE.glob("*.toml")), key=lambda entry: entry.name)


def load_entry(name_or_path: str | Path) -> ModelEntry:
    """A catalogue entry by name (`transformer`) or any entry file by path (`my_model.toml`)."""
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml":
        return _read(candidate)
    path = CATALOGUE / f"{name_or_path}.toml"
    if not path.is_file():
        names = sorted(path.stem for path in CATALOGUE.glob("*.toml"))
        raise BenchbuildError(f"unknown model {str(name_or_path)!r}: {did_you_mean(str(name_or_path), names)}"
                              f"(catalogue: {', '.join(names)}; `benchbuild zoo` describes them)")
    return _read(path)


def build_model(entry: ModelEntry, *, vocab_size: int, pad_token_id: int, bos_token_id: int, eos_token_id: int,
                overrides: dict | None = None):
    """A freshly initialised model of `entry` over one shared vocabulary; `overrides` update the architecture."""
    architecture = {**entry.architecture, **(overrides or {})}
    _check_architecture(architecture, str(entry.path))
    kind = architecture.pop("kind")
    ids = dict(pad_token_id=pad_token_id, bos_token_id=bos_token_id, eos_token_id=eos_token_id,
               decoder_start_token_id=bos_token_id)
    if kind == "hf":
        model = _build_hf(architecture, entry.path, vocab_size, ids)
    else:
        register()
        config_class, model_class = _classes(kind)
        model = model_class(config_class(vocab_size=vocab_size, **ids, **architecture))
    for key, value in ids.items():
        setattr(model.generation_config, key, value)
    leave_lengths_to_calls(model.generation_config)
    return model


def leave_lengths_to_calls(generation_config) -> None:
    """Store no output length: each `generate()` call passes `max_new_tokens` or `max_length`, and a stored one would
    make transformers warn that both are set (and take precedence over the call's `max_length`)."""
    generation_config.max_length = None
    generation_config.max_new_tokens = None


def _hf_source(architecture: dict, entry_path: Path) -> Path:
    """The config or checkpoint an hf entry's `path` names (relative to the entry file), checked: it exists and
    declares no custom code (`zoo.loading.refuse_remote_code`)."""
    from benchbuild.zoo.loading import refuse_remote_code

    source = Path(architecture["path"]).expanduser()
    if not source.is_absolute():
        source = entry_path.parent / source
    if not source.exists():
        raise BenchbuildError(f"{entry_path}: architecture.path {str(source)!r} does not exist")
    refuse_remote_code(source)
    return source


def _check_hf_source(architecture: dict, entry_path: Path) -> None:
    """A folder with custom code is refused when the entry is read, before any work."""
    if architecture["kind"] == "hf" and "path" in architecture:
        _hf_source(architecture, entry_path)


def _build_hf(architecture: dict, entry_path: Path, vocab_size: int, ids: dict):
    from transformers import AutoConfig, AutoModelForSeq2SeqLM

    if "path" in architecture:
        source = _hf_source(architecture, entry_path)
        weights = source.is_dir() and any((source / name).exists() for name in
                                          ("model.safetensors", "model.safetensors.index.json"))
        pickled = source.is_dir() and any(source.glob("pytorch_model*.bin"))
        if pickled and not weights:
            raise BenchbuildError(f"{entry_path}: {source} holds pickled weights only (pytorch_model*.bin); "
                                  "benchbuild loads safetensors checkpoints only, never pickled code")
        try:
            if weights:
                model = AutoModelForSeq2SeqLM.from_pretrained(source, local_files_only=True, use_safetensors=True,
                                                              trust_remote_code=False)
            else:
                config = AutoConfig.from_pretrained(source, local_files_only=True, trust_remote_code=False)
                model = AutoModelForSeq2SeqLM.from_config(config, trust_remote_code=False)
        except (OSError, ValueError, KeyError) as error:  # transformers' words for a config it cannot read
            raise BenchbuildError(f"{entry_path}: architecture.path {source} cannot be loaded as a transformers "
                                  f"seq2seq model ({' '.join(str(error).split())[:200]})") from None
    else:
        settings = dict(architecture)
        # A model trained from scratch ends where it predicts EOS, like every other zoo model: no forced tokens.
        settings.setdefault("forced_eos_token_id", None)
        settings.setdefault("forced_bos_token_id", None)
        config = AutoConfig.for_model(settings.pop("model_type"), vocab_size=vocab_size, **ids, **settings)
        model = AutoModelForSeq2SeqLM.from_config(config, trust_remote_code=False)
    if model.get_input_embeddings().weight.shape[0] != vocab_size:
        model.resize_token_embeddings(vocab_size)
    for key, value in ids.items():
        setattr(model.config, key, value)
    return model


_registered = False


def register() -> None:
    """Make every zoo model type loadable with `AutoConfig` / `AutoModelForSeq2SeqLM` (idempotent)."""
    global _registered
    if _registered:
        return
    from transformers import AutoConfig, AutoModelForSeq2SeqLM

    for kind in MODULES:
        config_class, model_class = _classes(kind)
        try:
            AutoConfig.register(config_class.model_type, config_class)
        except ValueError:
            pass  # already registered by an earlier import of this module
        try:
            AutoModelForSeq2SeqLM.register(config_class, model_class)
        except ValueError:
            pass
    _registered = True
