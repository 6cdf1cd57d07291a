"""A run folder's model card (`README.md`): what was trained and how, for a reader comparing it with a paper.

Written by `train` when a run ends, and again by `eval` when it scores the run into the run folder (or a folder in
it), from its `run.json` record, the trained network, its catalogue entry and its `metrics.json` files: the model and
its paper, how to load and run it with transformers, its size (parameter count, vocabulary, the architecture it was
built with), the benchmark (by name and fingerprint), the recipe and selection rule it trained with, its metrics with
their confidence intervals where the evaluation recorded them, the numbers the paper reports on that benchmark with
the recipe each was made with, the command that trained it, and the papers to cite. Like `run.json`, it holds no
absolute path of the machine (`run_folder.portable_path`). A Hugging Face model card: YAML front matter, then Markdown
(`data_cards/model_card.md.j2`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from benchbuild.atomic import write_file
from benchbuild.errors import BenchbuildError

CARD_FILE = "README.md"


def parameter_count(network) -> int:
    """The network's trainable and frozen parameters, each shared tensor (tied embeddings) once."""
    return sum(parameter.numel() for parameter in network.parameters())


def _against(entry: Any, reported: Mapping[str, Any], record: Mapping[str, Any]) -> str:
    """This run against a paper's number, as the report judges a row (`protocol`): "made as the paper's number" (one
    run of the paper's protocol), or "not comparable: " and what differs (a cut budget, another recipe or selection,
    architecture keys it changed, an unfinished run)."""
    from benchbuild.protocol import PaperProtocol, RunProtocol, run_differences

    differences = run_differences(PaperProtocol.of(entry.recipes, reported, str(entry.path)), RunProtocol.of(record))
    changed = record.get("architecture_overrides") or {}
    if changed:
        differences.append("architecture changed: " + ", ".join(f"{key} = {value}" for key, value in changed.items()))
    if record.get("status") not in (None, "complete"):
        differences.insert(0, f"unfinished ({record.get('status')} at step {record.get('steps_done', 0):,})")
    return "not comparable: " + "; ".join(differences) if differences else "made as the paper's number"


def render_model_card(record: Mapping[str, Any], parameters: int, vocabulary: int,
                      entry: Any | None = None, source_vocabulary: int | None = None,
                      evaluations: Sequence[tuple[str, Mapping[str, Any]]] = (),
                      example_source: str | None = None) -> str:
    """The card of a run: `record` is its run.json, `entry` its catalogue entry (None when it cannot be read any
    more: the card then names the model without its paper's numbers or citation); `vocabulary` is the output (target)
    dictionary's size, `source_vocabulary` the encoder's when the run keeps separate dictionaries; `evaluations` are
    its metrics files, each as (its path in the run folder, its contents); `example_source` the source sentence the
    card's loading example translates (a row of the benchmark)."""
    from benchbuild.cards import card_template
    from benchbuild.papers import PAPERS, cited_ids, reported_on

    benchmark = record["benchmark"]
    recipe_name = record["recipe_family"]
    architecture = {**record["identity"]["architecture"], **record.get("architecture_overrides", {})}
    reported = [] if entry is None else [
        {**row, "against": _against(entry, row, record)} for row in entry.reported
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
    papers = [] if entry is None else [PAPERS[paper_id] for paper_id in cited_ids(entry.paper) if paper_id in PAPERS]
    body = card_template("model_card.md.j2").render(
        record=record, entry=entry, architecture=architecture, parameters=parameters, vocabulary=vocabulary,
        recipe_name=recipe_name, recipe=recipe, reported=reported, entry_text=_entry_text(record),
        benchmark_path=_portable(benchmark.get("path")), separate=source_vocabulary is not None,
        decoding=_decoding(record["recipe"]), scores=[row for file, metrics in evaluations
                                                      for row in card_metrics(file, metrics)],
        unfinished=[(file, metrics["unfinished"]) for file, metrics in evaluations if metrics.get("unfinished")],
        papers=papers, example_source=json.dumps(example_source or "a source sentence", ensure_ascii=False)[1:-1])
    return f"---\n{yaml.safe_dump(header, sort_keys=False)}---\n\n{body.strip()}\n"


def write_model_card(run_dir: Path, record: Mapping[str, Any], network, example_source: str | None = None) -> Path:
    """Write `run_dir/README.md` for the run `record` describes, trained as `network`, with the metrics of every
    evaluation in the run folder (`run_folder.metrics_files`); `example_source` is a source sentence of the benchmark
    for its loading example."""
    from benchbuild import zoo
    from benchbuild.run_folder import metrics_files, read_metrics, recorded_entry, stale_scores

    entry = None
    for reference in (recorded_entry(run_dir, record), record.get("model")):
        try:
            entry = zoo.load_entry(reference) if reference else None
        except BenchbuildError:
            continue
        if entry is not None:
            break
    evaluations = []
    for file in metrics_files(Path(run_dir)):
        try:
            metrics = read_metrics(file)
        except BenchbuildError:
            continue  # a damaged metrics file is `report`'s to name; the card leaves it out
        if stale_scores(record, metrics) is None:  # scores of other weights than these are not this model's
            evaluations.append((file.relative_to(run_dir).as_posix(), metrics))
    path = Path(run_dir) / CARD_FILE
    write_file(path, render_model_card(record, parameter_count(network), network.config.vocab_size, entry,
                                       getattr(network.config, "source_vocab_size", None), evaluations,
                                       example_source))
    return path


# The headline numbers of a metrics file, as the card names them: (name, top-level key, key inside it).
CARD_METRICS = (("exact match", "exact_match", None), ("BLEU", "bleu", "score"), ("chrF", "chrf", "score"),
                ("COMP", "comp", "comp"), ("CTER (aggregate)", "cter", "aggregate"))


def card_metrics(file: str, metrics: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The card's rows for one metrics file: its benchmark, split and decoding, each headline metric's value, and its
    95% confidence interval where the evaluation recorded one (`run_folder.recorded_interval`)."""
    from benchbuild.run_folder import recorded_interval

    rows = []
    for name, key, inner in CARD_METRICS:
        value = metrics.get(key)
        if inner is not None:
            value = value.get(inner) if isinstance(value, Mapping) else None
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        rows.append({"file": file, "benchmark": metrics.get("benchmark"), "split": metrics.get("split"),
                     "beam": metrics.get("beam"), "metric": name, "value": float(value),
                     "ci": recorded_interval(metrics, key if inner is None else f"{key}.{inner}")})
    return rows


def _entry_text(record: Mapping[str, Any]) -> str:
    """How the card names the catalogue entry: `name` (shipped with benchbuild), or its file and sha256."""
    recorded = record.get("model_entry")
    if isinstance(recorded, str) and not recorded.endswith(".toml"):
        return f"catalogue entry `{recorded}`"
    shown = _portable(recorded) or f"{record.get('model')}.toml"
    digest = record.get("model_entry_sha256")
    return f"entry file `{shown}`" + (f" (sha256 `{digest[:16]}…`)" if digest else "")


def _portable(recorded: Any) -> str | None:
    """A path as the card shows it: a relative one as recorded; an absolute one (older run folders) by its name only,
    for the card holds no path of the machine."""
    if not isinstance(recorded, str) or not recorded:
        return None
    return recorded if not Path(recorded).is_absolute() else f".../{Path(recorded).name}"


def _decoding(recipe: Mapping[str, Any]) -> str:
    """The `generate` arguments of the recipe's decoding, as `eval` decodes (beam, and an output cap)."""
    from benchbuild.zoo.decoding import length_rule

    beam = int(recipe.get("beam", 1) or 1)
    rule = length_rule(recipe)
    cap = ("max_new_tokens=64" if rule is None
           else f'max_new_tokens=int({rule[0]} * inputs["input_ids"].shape[1] + {rule[1]})')
    return f"num_beams={beam}, {cap}"
