"""A run folder's model card (`README.md`): what was trained and how, for a reader comparing it with a paper.

Written by `train` when a run ends, from its `run.json` record, the trained network and its catalogue entry: the
model and its paper, its size (parameter count, vocabulary, the architecture it was built with), the benchmark, the
recipe and selection rule it trained with, and the numbers the paper reports on that benchmark with the recipe each
was made with. A Hugging Face model card: YAML front matter, then Markdown (`data_cards/model_card.md.j2`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import yaml

from benchbuild.atomic import write_file
from benchbuild.errors import BenchbuildError

CARD_FILE = "README.md"


def parameter_count(network) -> int:
    """The network's trainable and frozen parameters, each shared tensor (tied embeddings) once."""
    return sum(parameter.numel() for parameter in network.parameters())


def render_model_card(record: Mapping[str, Any], parameters: int, vocabulary: int,
                      entry: Any | None = None, source_vocabulary: int | None = None) -> str:
    """The card of a run: `record` is its run.json, `entry` its catalogue entry (None when it cannot be read any
    more: the card then names the model without its paper's numbers); `vocabulary` is the output (target)
    dictionary's size, `source_vocabulary` the encoder's when the run keeps separate dictionaries."""
    from benchbuild.cards import card_template
    from benchbuild.papers import reported_on

    benchmark = record["benchmark"]
    recipe_name = record["recipe_family"]
    architecture = {**record["identity"]["architecture"], **record.get("architecture_overrides", {})}
    reported = [] if entry is None else [
        row for row in entry.reported
        if reported_on(str(row["benchmark"]), benchmark["family"], benchmark["name"], benchmark["splits"])]
    header = {"library_name": "transformers", "tags": ["benchbuild", record["model"]]}
    # The recipe's step count on this benchmark: a recipe in `epochs` has it from the train rows (`planned_steps`).
    recipe = {**record["recipe"], "steps": record.get("recipe_steps", record["recipe"].get("steps"))}
    kinds = {"bpe": "BPE", "word": "whitespace words"}
    recipe_keys = record["recipe"]
    default_kind = "bpe" if recipe_keys.get("bpe_vocab_size") else "word"
    if source_vocabulary is None:
        vocabulary = f"{vocabulary:,} tokens ({kinds[default_kind]}, built from the training split)"
    else:
        sides = {side: kinds[recipe_keys.get(f"{side}_tokens") or default_kind]
                 + (", segmented with jieba first" if recipe_keys.get(f"segment_{side}") else "")
                 for side in ("source", "target")}
        vocabulary = (f"separate dictionaries, built from the training split: {source_vocabulary:,} source tokens "
                      f"({sides['source']}) for the encoder, {vocabulary:,} target tokens ({sides['target']}) for the "
                      "decoder and its tied output layer")
    body = card_template("model_card.md.j2").render(
        record=record, entry=entry, architecture=architecture, parameters=parameters, vocabulary=vocabulary,
        recipe_name=recipe_name, recipe=recipe, reported=reported)
    return f"---\n{yaml.safe_dump(header, sort_keys=False)}---\n\n{body.strip()}\n"


def write_model_card(run_dir: Path, record: Mapping[str, Any], network) -> Path:
    """Write `run_dir/README.md` for the run `record` describes, trained as `network`."""
    from benchbuild import zoo

    try:
        entry = zoo.load_entry(record.get("model_entry") or record["model"])
    except BenchbuildError:
        entry = None
    path = Path(run_dir) / CARD_FILE
    write_file(path, render_model_card(record, parameter_count(network), network.config.vocab_size, entry,
                                       getattr(network.config, "source_vocab_size", None)))
    return path
