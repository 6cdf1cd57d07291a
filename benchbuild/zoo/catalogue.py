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

A variant says `extends = "transformer"` (a catalogue name, or a `.toml` path relative to the file) and sets only
what differs: its `[architecture]`, `[recipe.*]` and `[recipe.*.architecture]` tables are merged key by key over
the parent's (which may itself extend another). Another paper's recipe for the parent (`[recipe.mt_001]`, a name
with a paper id) is not inherited: that paper trained the parent, not the variant. `name`, `paper`, `summary` and
`[[reported]]` are never inherited: they describe this model, and a parent's reported numbers are not the variant's.

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

import importlib
import importlib.resources
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchbuild.errors import BenchbuildError
from benchbuild.toml_schema import check_keys, check_table, from_table, read_toml
from benchbuild.zoo.recipe import RecipeFamily, TrainingRecipe, paper_recipe

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


@dataclass(frozen=True)
class ReportedNumber:
    """One `[[reported]]` row: a number the paper reports for this model (`table` cites it: "000 Table 3") and the
    entry's recipe that trains the model as that paper did (`recipe`, whose `select` is the paper's selection rule;
    `train` picks it for this benchmark by default). Every row of the shipped catalogue names its recipe."""

    benchmark: str
    metric: str
    value: float
    table: str
    note: str = ""
    recipe: str = ""


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


def _check_architecture(architecture: dict, where: str) -> None:
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
        return
    check_keys(architecture, _classes(kind)[0].architecture_keys() | {"kind"}, where, "[architecture]")


def _read(path: Path, extended_by: tuple[Path, ...] = ()) -> ModelEntry:
    """The entry of one file, checked, with the tables of the entry it extends (if any) merged under its own."""
    where = str(path)
    own = check_table(EntryFile, read_toml(path, "model file"), where)
    recipes = own.get("recipe", {})
    for family, recipe in recipes.items():
        check_table(TrainingRecipe, recipe, where, f"[recipe.{family}]", complete=False)
    reported = [check_table(ReportedNumber, row, where, f"[[reported]] #{number}")
                for number, row in enumerate(own.get("reported", []), start=1)]
    architecture = own.get("architecture", {})
    if "extends" in own:
        parent = _read(_parent_path(own["extends"], path, extended_by), (*extended_by, path.resolve()))
        architecture = {**parent.architecture, **architecture}
        inherited = {family: recipe for family, recipe in parent.recipes.items() if not paper_recipe(family)}
        recipes = {family: _merged_recipe(inherited.get(family, {}), recipes.get(family, {}))
                   for family in {**inherited, **recipes}}
    _check_architecture(architecture, where)
    for family, recipe in recipes.items():
        from_table(TrainingRecipe, recipe, where, f"[recipe.{family}]")  # complete, and every value in range
        if recipe.get("architecture"):
            _check_architecture({**architecture, **recipe["architecture"]}, f"{where} [recipe.{family}.architecture]")
    for number, row in enumerate(reported, start=1):
        if row.get("recipe") and row["recipe"] not in recipes:
            raise BenchbuildError(f"{where}: [[reported]] #{number} recipe {row['recipe']!r} is not a recipe of "
                                  f"this entry (it has: {', '.join(sorted(recipes)) or 'none'})")
    return ModelEntry(name=own["name"], paper=own["paper"], summary=own["summary"], architecture=architecture,
                      recipes=recipes, reported=reported, path=path, extends=own.get("extends"))


def _merged_recipe(parent: dict, own: dict) -> dict:
    """A variant's recipe table over its parent's, key by key, its `architecture` sub-table too."""
    merged = {**parent, **own}
    if "architecture" in parent or "architecture" in own:
        merged["architecture"] = {**parent.get("architecture", {}), **own.get("architecture", {})}
    return merged


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
        raise BenchbuildError(f"unknown model {str(name_or_path)!r} (catalogue: {_names()})")
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


def _build_hf(architecture: dict, entry_path: Path, vocab_size: int, ids: dict):
    from transformers import AutoConfig, AutoModelForSeq2SeqLM

    if "path" in architecture:
        source = Path(architecture["path"]).expanduser()
        if not source.is_absolute():
            source = entry_path.parent / source
        if not source.exists():
            raise BenchbuildError(f"{entry_path}: architecture.path {str(source)!r} does not exist")
        weights = source.is_dir() and any((source / name).exists() for name in
                                          ("model.safetensors", "model.safetensors.index.json"))
        pickled = source.is_dir() and any(source.glob("pytorch_model*.bin"))
        if pickled and not weights:
            raise BenchbuildError(f"{entry_path}: {source} holds pickled weights only (pytorch_model*.bin); "
                                  "benchbuild loads safetensors checkpoints only, never pickled code")
        if weights:
            model = AutoModelForSeq2SeqLM.from_pretrained(source, local_files_only=True, use_safetensors=True)
        else:
            config = AutoConfig.from_pretrained(source, local_files_only=True)
            model = AutoModelForSeq2SeqLM.from_config(config)
    else:
        settings = dict(architecture)
        # A model trained from scratch ends where it predicts EOS, like every other zoo model: no forced tokens.
        settings.setdefault("forced_eos_token_id", None)
        settings.setdefault("forced_bos_token_id", None)
        config = AutoConfig.for_model(settings.pop("model_type"), vocab_size=vocab_size, **ids, **settings)
        model = AutoModelForSeq2SeqLM.from_config(config)
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
