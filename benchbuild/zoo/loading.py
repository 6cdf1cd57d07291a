"""Loading saved models and tokenizers, never running code from them.

A folder whose config declares `auto_map` asks transformers to import Python modules from the folder (its "custom
code"): transformers then prompts "Do you wish to run the custom code? [y/N]", and runs the modules if answered yes.
benchbuild runs in batch jobs and treats a model folder as data, so such a folder is refused in one line before
transformers reads it (`refuse_remote_code`), and every load passes `trust_remote_code=False` as well: neither a
prompt nor an import can happen.

A run with separate source and target dictionaries is loaded as a `TranslationTokenizer`, which also segments the
texts of a side whose dictionary was built on segmented words (jieba for Chinese), as the dictionary's
tokenizer_config.json says: what a saved tokenizer cannot do itself (`training.tokenization` builds them).
"""

from __future__ import annotations

import functools
import json
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from benchbuild.errors import BenchbuildError
from benchbuild.run_folder import TARGET_TOKENIZER_DIR, recovery
from benchbuild.zoo.recipe import Segmenter

SEGMENTERS: tuple[str, ...] = typing.get_args(Segmenter)
SEGMENT_BOUNDARY = "\u200b"  # ZERO WIDTH SPACE: a word boundary the text does not write as a space

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast


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
    check_model_type(folder)
    try:
        model = AutoModelForSeq2SeqLM.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    except Exception as error:  # noqa: BLE001 - transformers and safetensors raise many kinds for one bad file
        raise BenchbuildError(f"{_unreadable_file(folder, error)} cannot be loaded "
                              f"({type(error).__name__}: {' '.join(str(error).split())[:200]}): the file is "
                              f"truncated or corrupt; {recovery(folder)}") from error
    # Runs saved before the zoo left output lengths to the calls hold `max_length = 256`, which would make a
    # `generate(max_new_tokens=N)` call warn that both are set.
    zoo.catalogue.leave_lengths_to_calls(model.generation_config)
    return model


def check_model_type(folder: Path) -> None:
    """A config.json whose `model_type` no registered class builds is named as such (not as a damaged weights file):
    a run of a model this benchbuild does not have, or a config.json edited by hand."""
    import json

    from transformers import CONFIG_MAPPING

    try:
        model_type = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError):
        return  # a missing or damaged config.json is from_pretrained's to name
    if isinstance(model_type, str) and model_type not in CONFIG_MAPPING:
        raise BenchbuildError(f"{folder / 'config.json'} names model_type {model_type!r}, which neither benchbuild's "
                              "zoo nor transformers builds: the run was made by another version or program, or the "
                              f"file was edited; {recovery(folder)}")


def load_tokenizer(folder: str | Path):
    """The tokenizer saved in `folder` (a run folder): its one joint dictionary, or, where `target_tokenizer/` holds a
    target dictionary beside the source one, both as a `TranslationTokenizer` (which encodes sources, encodes
    targets with `text_target=`, and decodes target ids). An unreadable one is a BenchbuildError naming the folder."""
    folder = Path(folder)
    source = _load_one_tokenizer(folder)
    if not (folder / TARGET_TOKENIZER_DIR).is_dir():
        return source
    return TranslationTokenizer(source, _load_one_tokenizer(folder / TARGET_TOKENIZER_DIR, recovery_for=folder))


def _load_one_tokenizer(folder: Path, recovery_for: Path | None = None):
    from transformers import AutoTokenizer

    missing = [name for name in TOKENIZER_FILES if not (folder / name).is_file()]
    if missing:
        raise BenchbuildError(f"{folder} has no {' and no '.join(missing)} (its tokenizer): the run folder is "
                              f"incomplete; {recovery(recovery_for or folder)}")
    refuse_remote_code(folder)
    try:
        return AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    except Exception as error:  # noqa: BLE001 - a bad tokenizer file raises OSError, ValueError or the tokenizers' own
        damaged = next((name for name in TOKENIZER_FILES if not _is_json(folder / name)), None)
        what = (f"{folder / damaged} is not valid JSON (truncated or corrupt)" if damaged else
                f"the tokenizer in {folder} cannot be loaded ({type(error).__name__}: "
                f"{' '.join(str(error).split())[:200]})")
        raise BenchbuildError(f"{what}; {recovery(recovery_for or folder)}") from error


# The files `save_pretrained` writes for a run's tokenizer (or each of its two dictionaries).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def _is_json(path: Path) -> bool:
    try:
        json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return False
    return True


class TranslationTokenizer:
    """A run's separate source and target dictionaries behind the calls a run makes of one tokenizer, as
    transformers' Marian tokenizer with separate vocabularies: `tokenizer(texts)` encodes sources, `tokenizer(
    text_target=texts)` targets, and `decode` / `batch_decode` read target ids (the model's outputs). Each side
    segments its texts first when its dictionary was built on segmented text. Special tokens have the same ids in
    both (`training.tokenization` puts them first), so padding, start and end ids need no side; `len()` is the target
    dictionary's size, the model's output vocabulary."""

    def __init__(self, source: PreTrainedTokenizerFast, target: PreTrainedTokenizerFast):
        for name in ("pad_token_id", "bos_token_id", "eos_token_id", "unk_token_id"):
            if getattr(source, name) != getattr(target, name):
                raise BenchbuildError(f"the source and target dictionaries give {name} different ids "
                                      f"({getattr(source, name)} and {getattr(target, name)}): rebuild the run's "
                                      "dictionaries (benchbuild train ... --overwrite)")
        self.source, self.target = source, target

    def __call__(self, text: str | Sequence[str] | None = None, text_target: str | Sequence[str] | None = None,
                 **kwargs: Any):
        if (text is None) == (text_target is None):
            raise ValueError("give either `text` (sources) or `text_target` (targets), not both or neither")
        side, texts = (self.source, text) if text is not None else (self.target, text_target)
        segmentation = segmentation_of(side)
        if isinstance(texts, str):
            return side(segmented_texts([texts], segmentation)[0], **kwargs)
        return side(segmented_texts(texts, segmentation), **kwargs)

    def decode(self, ids, **kwargs: Any) -> str:
        return self.target.decode(ids, **kwargs)

    def batch_decode(self, sequences, **kwargs: Any) -> list[str]:
        return self.target.batch_decode(sequences, **kwargs)

    pad_token_id = property(lambda self: self.target.pad_token_id)
    bos_token_id = property(lambda self: self.target.bos_token_id)
    eos_token_id = property(lambda self: self.target.eos_token_id)
    unk_token_id = property(lambda self: self.target.unk_token_id)

    def __len__(self) -> int:
        return len(self.target)

    def get_vocab(self) -> dict[str, int]:
        """The target dictionary (the ids a model predicts)."""
        return self.target.get_vocab()

    def save_pretrained(self, folder: str | Path) -> None:
        """The source dictionary at `folder` (what `AutoTokenizer.from_pretrained(folder)` loads), the target one in
        `folder/target_tokenizer`."""
        self.source.save_pretrained(folder)
        self.target.save_pretrained(Path(folder) / TARGET_TOKENIZER_DIR)


def token_ids(tokenizer, texts: Sequence[str], *, target: bool = False) -> list[list[int]]:
    """The ids of each text with its `</s>`, as `tokenizer(texts)["input_ids"]` (sources) or `tokenizer(text_target=
    texts)["input_ids"]` (`target`) give them, read straight from the `tokenizers` encodings where that is the same:
    transformers' own call builds an attention mask and a dict per row, ten times the time of the encoding itself
    (21,890 SCAN rows: 1.2 s against 0.1 s). Any other tokenizer, or one with truncation or padding set, goes through
    its own call."""
    if not isinstance(tokenizer, TranslationTokenizer):
        side, texts = tokenizer, list(texts)
        call = (lambda: tokenizer(text_target=texts)) if target else (lambda: tokenizer(texts))
    else:  # the side's own dictionary, on its segmented texts
        side = tokenizer.target if target else tokenizer.source
        texts = segmented_texts(texts, segmentation_of(side))
        call = lambda: side(texts)  # noqa: E731
    backend = getattr(side, "_tokenizer", None)
    if not _plain_fast_tokenizer(side) or backend is None or backend.truncation or backend.padding:
        return call()["input_ids"]
    return [encoding.ids for encoding in backend.encode_batch_fast(texts, add_special_tokens=True)]


def _plain_fast_tokenizer(tokenizer) -> bool:
    """Whether `tokenizer`'s call is exactly its `tokenizers` backend's batch encoding: a PreTrainedTokenizerFast as
    `training.tokenization` builds and `AutoTokenizer` loads them (no subclass with its own preprocessing)."""
    from transformers import PreTrainedTokenizerFast

    return type(tokenizer) is PreTrainedTokenizerFast


def target_encoder(tokenizer):
    """`tokenizer` as a callable that encodes texts as targets (`tokenizer(text_target=...)`): for code that calls a
    tokenizer on references, such as `zoo.decoding.decoding_limit`; a joint dictionary encodes them alike."""
    return lambda texts, **kwargs: tokenizer(text_target=texts, **kwargs)


def segmentation_of(tokenizer) -> str | None:
    """The segmenter a dictionary's texts pass through first (its tokenizer_config.json's `segmentation`), if any."""
    segmentation = getattr(tokenizer, "init_kwargs", {}).get("segmentation")
    if segmentation is not None and segmentation not in SEGMENTERS:
        raise BenchbuildError(f"the dictionary asks for segmentation {segmentation!r}, which benchbuild does not know "
                              f"(known: {', '.join(SEGMENTERS)})")
    return segmentation


def segmented_texts(texts: Sequence[str], segmenter: Segmenter | None) -> list[str]:
    """`texts` with `SEGMENT_BOUNDARY` between the words `segmenter` finds where a text writes no space (None: the
    texts as they are)."""
    if segmenter is None:
        return list(texts)
    return [jieba_segmented(text) for text in texts]


def jieba_segmented(text: str) -> str:
    """`text` with `SEGMENT_BOUNDARY` between adjacent words of jieba's segmentation: 004 §3.1 segments CoGnition's
    Chinese with jieba (github.com/fxsjy/jieba) without saying how, so jieba's `cut` defaults (its default dictionary,
    HMM for unknown words). Deterministic: one `jieba.Tokenizer` per process, none of jieba's global state (user
    words) involved.
    Spaces stay as they are, so segmenting segmented text adds boundaries only inside its words; a zero-width space
    already in `text` is removed first (it would read as a boundary)."""
    pieces: list[str] = []
    after_space = True
    for word in _jieba().cut(text.replace(SEGMENT_BOUNDARY, "")):
        space = word.isspace()
        if not space and not after_space:
            pieces.append(SEGMENT_BOUNDARY)
        pieces.append(word)
        after_space = space
    return "".join(pieces)


@functools.cache
def _jieba():
    try:
        import jieba
    except ImportError:
        raise BenchbuildError("segment_source / segment_target = 'jieba' needs the jieba package: "
                              "pip install jieba") from None
    import logging

    jieba.setLogLevel(logging.WARNING)  # no "Building prefix dict ..." lines on stderr
    return jieba.Tokenizer()


def _read_json(file: Path) -> Any:
    """The file's JSON, or None when it is not JSON (transformers names a broken config itself)."""
    try:
        return json.loads(file.read_text(encoding="utf-8-sig"))
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

