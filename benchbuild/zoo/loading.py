"""Loading saved models and tokenizers, never running code from them.

A folder whose config declares `auto_map` asks transformers to import Python modules from the folder (its "custom
code"): transformers then prompts "Do you wish to run the custom code? [y/N]", and runs the modules if answered yes.
benchbuild runs in batch jobs and treats a model folder as data, so such a folder is refused in one line before
transformers reads it (`refuse_remote_code`), and every load passes `trust_remote_code=False` as well: neither a
prompt nor an import can happen.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchbuild.errors import BenchbuildError
from benchbuild.run_folder import CHECKPOINTS_DIR


def refuse_remote_code(path: str | Path) -> None:
    """Refuse a model folder (or a config .json file) whose JSON files declare `auto_map`, naming the file, the code
    it points to and the module files shipped beside it."""
    path = Path(path)
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    for file in files:
        references = sorted(set(_auto_map_references(_read_json(file))))
        if not references:
            continue
        modules = sorted({_module_file(reference) for reference in references})
        shipped = [name for name in modules if (file.parent / name).is_file()]
        beside = f", shipped as {', '.join(shipped)}" if shipped else ""
        raise BenchbuildError(f"{file} declares custom model code (auto_map: {', '.join(references)}{beside}): "
                              "benchbuild never runs code from a model folder; give a folder whose config.json "
                              "names a model type transformers ships (no auto_map)")


def load_model(folder: str | Path):
    """The model saved in `folder` (a run folder or one of its checkpoints; the zoo's classes are registered first);
    a missing, truncated or otherwise unreadable file is a BenchbuildError naming it."""
    from transformers import AutoModelForSeq2SeqLM

    from benchbuild import zoo

    zoo.register()
    folder = Path(folder)
    refuse_remote_code(folder)
    try:
        model = AutoModelForSeq2SeqLM.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    except Exception as error:  # noqa: BLE001 - transformers and safetensors raise many kinds for one bad file
        raise BenchbuildError(f"{_unreadable_file(folder, error)} cannot be loaded "
                              f"({type(error).__name__}: {' '.join(str(error).split())[:200]}): the file is "
                              f"truncated or corrupt; {_recovery(folder)}") from error
    # Runs saved before the zoo left output lengths to the calls hold `max_length = 256`, which would make a
    # `generate(max_new_tokens=N)` call warn that both are set.
    zoo.catalogue.leave_lengths_to_calls(model.generation_config)
    return model


def load_tokenizer(folder: str | Path):
    """The tokenizer saved in `folder` (a run folder); an unreadable one is a BenchbuildError naming the folder."""
    from transformers import AutoTokenizer

    folder = Path(folder)
    refuse_remote_code(folder)
    try:
        return AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    except Exception as error:  # noqa: BLE001 - a bad tokenizer file raises OSError, ValueError or the tokenizers' own
        raise BenchbuildError(f"the tokenizer in {folder} cannot be loaded ({type(error).__name__}: "
                              f"{' '.join(str(error).split())[:200]}): tokenizer.json or tokenizer_config.json is "
                              f"missing, truncated or corrupt; {_recovery(folder)}") from error


def _read_json(file: Path) -> Any:
    """The file's JSON, or None when it is not JSON (transformers names a broken config itself)."""
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _auto_map_references(value: Any) -> list[str]:
    """Every class reference (`module.Class`, `repo--module.Class`) of a config's `auto_map` table (transformers
    reads it at the top level of config.json, tokenizer_config.json and the other configs)."""
    return _strings(value.get("auto_map")) if isinstance(value, dict) else []


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return [text for item in items for text in _strings(item)]


def _module_file(reference: str) -> str:
    """`repo--pkg.module.Class` -> `pkg/module.py`: the file transformers would import."""
    return reference.split("--")[-1].rsplit(".", 1)[0].replace(".", "/") + ".py"


def _unreadable_file(folder: Path, error: BaseException) -> Path:
    """The file of `folder` that `error` is about: the config when it names the config, else the weights."""
    if "config" in str(error).lower() and "safetensors" not in str(error).lower():
        return folder / "config.json"
    return folder / "model.safetensors"


def _recovery(checkpoint: Path) -> str:
    if checkpoint.parent.name == CHECKPOINTS_DIR:
        return f"delete {checkpoint} to resume from the checkpoint before it, or rerun with --overwrite"
    return "retrain the run (benchbuild train ... --overwrite)"
