"""The model catalogue: `models/<name>.toml` entries (architecture, recipes, reported numbers) and building models.

The entries ship inside the package (`benchbuild/zoo/models/`, which the checkout's top-level `models/` points to),
so an installed wheel has its catalogue.

An entry is data: `[architecture]` holds the keyword arguments of the model's `PretrainedConfig` and `kind` picks
the module (transformer | dangle | syntactic_attention | lstm_attention | hf); `[recipe.scan]` / `[recipe.mt]` hold
the training recipe per benchmark family; `[[reported]]` the numbers the paper reports. Unknown keys anywhere are
an error naming the file and the key.

`kind = "hf"` entries build any `transformers` seq2seq model: either `path` (a local config.json or a config /
checkpoint folder: `AutoModelForSeq2SeqLM.from_config` / `from_pretrained`) or `model_type` plus that config's
keyword arguments (`AutoConfig.for_model`); the model is resized to the benchmark's vocabulary either way.

Notes on the zoo <-> training interface (additions, nothing changed):
- `kind = "hf"` also accepts `model_type` + config kwargs instead of `path` (models/hf.toml builds a small BART);
  such from-scratch models get no forced BOS/EOS tokens, so they stop where they predict EOS like the others.
- A recipe table may also set the trainer's optional `adam_beta1`, `adam_beta2`, `eval_batch_size`.
- `build_model` sets `generation_config.max_length = 256` (transformers' default of 20 cuts SCAN outputs); pass
  `max_length` to `generate()` rather than `max_new_tokens` to avoid transformers' warning about both being set.
- `get_encoder()` returns a weight-less view whose `forward(input_ids, attention_mask)` gives the encoder output;
  Syntactic Attention's and Dangle's encoder outputs carry extra tensors (translation stream, source ids), which
  `generate()` expands for beam search like any `ModelOutput` field.
"""

from __future__ import annotations

import importlib
import importlib.resources
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from benchbuild.errors import BenchbuildError

CATALOGUE = Path(str(importlib.resources.files("benchbuild.zoo") / "models"))  # shipped with the package
TOP_KEYS = {"name", "paper", "summary", "architecture", "recipe", "reported"}
RECIPE_KEYS = {"steps", "batch_size", "learning_rate", "schedule", "warmup_steps", "label_smoothing", "grad_clip",
               "weight_decay", "eval_every", "bpe_vocab_size"}
OPTIONAL_RECIPE_KEYS = {"adam_beta1", "adam_beta2", "eval_batch_size"}  # the trainer's defaults apply when absent
RECIPE_FAMILIES = {"scan", "mt"}
SCHEDULES = {"constant", "inverse_sqrt"}
REPORTED_KEYS = {"benchmark", "metric", "value", "table", "note"}
KINDS = ("transformer", "dangle", "syntactic_attention", "lstm_attention", "hf")


@dataclass
class ModelEntry:
    """One catalogue entry as read from its TOML file."""

    name: str
    paper: str
    summary: str
    architecture: dict
    recipes: dict[str, dict]
    reported: list[dict]
    path: Path = field(default=Path("."))


# kind -> (module, config class, model class); imported on first use so that listing the catalogue stays light.
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


def _unknown(keys, valid, where: str) -> None:
    extra = sorted(set(keys) - set(valid))
    if extra:
        raise BenchbuildError(f"{where}: unknown key {extra[0]!r} (valid: {', '.join(sorted(valid))})")


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
            _unknown(architecture, {"kind", "path"}, f"{where} [architecture]")
        return
    _unknown(architecture, _classes(kind)[0].architecture_keys() | {"kind"}, f"{where} [architecture]")


def _read(path: Path) -> ModelEntry:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise BenchbuildError(f"{path}: not valid TOML ({error})") from error
    _unknown(data, TOP_KEYS, str(path))
    for key in ("name", "paper", "summary", "architecture"):
        if key not in data:
            raise BenchbuildError(f"{path}: missing key {key!r}")
    architecture = dict(data["architecture"])
    _check_architecture(architecture, str(path))
    recipes = data.get("recipe", {})
    _unknown(recipes, RECIPE_FAMILIES, f"{path} [recipe]")
    for family, recipe in recipes.items():
        _unknown(recipe, RECIPE_KEYS | OPTIONAL_RECIPE_KEYS, f"{path} [recipe.{family}]")
        if recipe.get("schedule", "constant") not in SCHEDULES:
            raise BenchbuildError(f"{path} [recipe.{family}]: schedule {recipe['schedule']!r} is not one of "
                                  f"{', '.join(sorted(SCHEDULES))}")
    reported = data.get("reported", [])
    for number, row in enumerate(reported, start=1):
        _unknown(row, REPORTED_KEYS, f"{path} [[reported]] #{number}")
        for key in ("benchmark", "metric", "value", "table"):
            if key not in row:
                raise BenchbuildError(f"{path} [[reported]] #{number}: missing key {key!r}")
    return ModelEntry(name=data["name"], paper=str(data["paper"]), summary=data["summary"],
                      architecture=architecture, recipes={k: dict(v) for k, v in recipes.items()},
                      reported=[dict(r) for r in reported], path=path)


def list_entries() -> list[ModelEntry]:
    """Every `models/*.toml` of the catalogue, sorted by name."""
    return sorted((_read(path) for path in CATALOGUE.glob("*.toml")), key=lambda entry: entry.name)


def load_entry(name_or_path: str | Path) -> ModelEntry:
    """A catalogue entry by name (`transformer`) or any entry file by path (`my_model.toml`)."""
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml":
        if not candidate.is_file():
            raise BenchbuildError(f"{candidate}: no such model file")
        return _read(candidate)
    path = CATALOGUE / f"{name_or_path}.toml"
    if not path.is_file():
        names = ", ".join(sorted(p.stem for p in CATALOGUE.glob("*.toml")))
        raise BenchbuildError(f"unknown model {str(name_or_path)!r} (catalogue: {names})")
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
    model.generation_config.max_length = max(model.generation_config.max_length or 0, 256)
    return model


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
