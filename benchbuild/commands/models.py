"""The model commands: `zoo` (the catalogue and its papers), `train`, `eval`, `reproduce` a run, and `score` any
system's outputs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from benchbuild.commands import out
from benchbuild.commands.checks import optional_device, positive_minutes
from benchbuild.errors import BenchbuildError
from benchbuild.options import MAX_SEED, DeviceOption, key_values
from benchbuild.outputs import check_output


def _text_or_json(value: str) -> str:
    if value not in ("text", "json"):
        raise typer.BadParameter(f"{value!r} is not one of text, json")
    return value


def zoo_command(
    papers: Annotated[bool, typer.Option("--papers", help="List the cited papers instead: id, full citation, "
                                         "what benchbuild takes from it, its zoo models.")] = False,
    model: Annotated[Optional[str], typer.Option(
        "--model", help="Show one model instead: per recipe, the architecture it trains, its parameter count, its "
        "selection rule, the paper's numbers made with it (which statistic each is, and whether benchbuild's runs "
        "reproduce it), its sources and its known differences from the paper.")] = None,
    format_: Annotated[str, typer.Option(
        "--format", metavar="text|json", callback=_text_or_json,
        help="json: the entries (or the --model one) with every paper number and its reproduction status from the "
        "ledger (`ours`: status, the runs' values and evidence, the command that reproduces it), for scripts.")
    ] = "text",
) -> None:
    """List the model zoo: every catalogue entry with its kind, paper ids, known differences from its papers and one
    line (one block per model)."""
    import textwrap

    from rich.text import Text

    from benchbuild.papers import PAPERS, cited_ids, known_differences, reported_with
    from benchbuild.zoo import list_entries

    def block(*paragraphs: str, first: str = "    ", rest: str = "    ") -> str:
        width = max(out.width, 40)
        return "\n".join(textwrap.fill(text, width, initial_indent=first if number == 0 else rest,
                                        subsequent_indent=rest, break_on_hyphens=False)
                          for number, text in enumerate(paragraphs))

    if format_ == "json":
        _print_json(model)
        return
    if model is not None:
        _print_resolved_model(model)
        return
    entries = list_entries()
    if papers:
        for paper in PAPERS.values():
            models = ", ".join(entry.name for entry in entries if paper.id in cited_ids(entry.paper)) or "none"
            numbers = reported_with(paper.id, entries)
            out.print(block(paper.citation(), f"benchbuild: {paper.implements}", f"zoo: {models}",
                            "its numbers, trained here with:" if numbers else "its numbers: none in the catalogue",
                            first=f"{paper.id}  ", rest=" " * 5), markup=False, highlight=False, soft_wrap=True)
            for line in numbers:
                out.print(block(line, first=" " * 7, rest=" " * 9), markup=False, highlight=False, soft_wrap=True)
            out.print()
        return
    out.print("benchbuild model zoo (models/*.toml); papers by id: benchbuild zoo --papers", highlight=False)
    for entry in entries:
        extends = f" · extends {entry.extends}" if entry.extends else ""
        count = known_differences(entry)
        plural = "" if count == 1 else "s"
        differences = f" · {count} known difference{plural} (zoo --model {entry.name})" if count else ""
        out.print(Text("\n" + entry.name, style="bold"))
        out.print(block(f"{entry.architecture['kind']} · paper {entry.paper}{extends}{differences}", entry.summary),
                  markup=False, highlight=False, soft_wrap=True)


def _print_json(name: str | None) -> None:
    """`zoo --format json`: each entry (or the one named) with its `[[reported]]` rows, each with `ours`."""
    import json

    from benchbuild.checked import checked_against
    from benchbuild.ledger import key_of, load_ledger, ours_json
    from benchbuild.zoo import list_entries, load_entry

    ledger = load_ledger()
    entries = [load_entry(name)] if name is not None else list_entries()
    models = [{"name": entry.name, "kind": entry.architecture["kind"], "paper": entry.paper, "summary": entry.summary,
               "checked": checked_against(entry.name), "recipes": sorted(entry.recipes),
               "reported": [{**row, "ours": ours_json(ledger.get(key_of(entry.name, row)), row)}
                            for row in entry.reported]}
              for entry in entries]
    print(json.dumps({"models": models}, indent=2, ensure_ascii=False))


def _print_resolved_model(name: str) -> None:
    """`zoo --model NAME`: per recipe, the resolved architecture (recipe keys over `[architecture]`), the parameter
    count of a fresh model over the recipe's vocabulary size (BPE) or 32 words (SCAN's commands), the selection rule,
    the reported numbers made with it and the statistic each is, and the recipe's `[fidelity]`: its sources and its
    known differences from the paper. The models are built on torch's meta device: counting the 217M parameters of
    the noun-adjective Transformer allocates nothing."""
    import dataclasses
    import textwrap

    import torch
    from rich.text import Text

    from benchbuild.checked import checked_against
    from benchbuild.ledger import load_ledger
    from benchbuild.papers import selection_rule
    from benchbuild.zoo import build_model, load_entry
    from benchbuild.zoo.catalogue import resolved_architecture

    ledger = load_ledger()
    entry = load_entry(name)
    out.print(Text(entry.name, style="bold"))
    out.print(textwrap.fill(f"{entry.summary} (paper {entry.paper}). A run trains with the recipe of the reported "
                            "number on its benchmark, else the one named for its benchmark family (nounadj), else "
                            "scan (SCAN) or mt; `train --recipe` chooses another.", max(out.width, 40),
                            break_on_hyphens=False), markup=False, highlight=False, soft_wrap=True)
    out.print(textwrap.fill(f"Checked: {checked_against(entry.name)}.", max(out.width, 40), break_on_hyphens=False),
              markup=False, highlight=False, soft_wrap=True)
    for family, recipe in sorted(entry.recipes.items()):
        architecture = resolved_architecture(entry, family)
        vocabulary = recipe.get("bpe_vocab_size") or 32
        separate = recipe.get("dictionaries") == "separate"
        with torch.device("meta"):
            network = build_model(dataclasses.replace(entry, architecture=architecture), vocab_size=vocabulary,
                                  pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                  overrides={"source_vocab_size": vocabulary} if separate else None)
        vocabularies = (f"separate source and target dictionaries, counted at {vocabulary:,} each: a run's own sizes "
                        "are in its model card" if separate else f"vocabulary {vocabulary:,}")
        parameters = sum(parameter.numel() for parameter in network.parameters())
        changed = ", ".join(sorted(recipe.get("architecture", {}))) or "none"
        numbers = [line for row in entry.reported if row.get("recipe") == family
                   for line in _with_status(entry.name, row, ledger)]
        fidelity = entry.fidelity.get(family, {"sources": [], "differences": []})
        differences = fidelity["differences"]
        # (text, indent of its first line, indent of the rest)
        paragraphs = [(f"[recipe.{family}] {parameters:,} parameters ({vocabularies}); "
                       f"select = {selection_rule(recipe)}", "", "    "),
                      ("reported numbers made with it:" + ("" if numbers else " none"), "    ", "    "),
                      *((line, "      ", "        ") for line in numbers),
                      (f"keys this recipe changes: {changed}", "    ", "    "),
                      (", ".join(f"{key} = {value}" for key, value in architecture.items()), "    ", "    "),
                      ("sources:" + ("" if fidelity["sources"] else " none listed"), "    ", "    "),
                      *((source, "    - ", "      ") for source in fidelity["sources"]),
                      (f"known differences from the paper: {len(differences) or 'none listed'}", "    ", "    ")]
        for row in differences:
            paragraphs += [(row["what"], "    - ", "      "),
                           *((f"{key}: {row[key]}", "        ", "          ") for key in ("paper", "ours", "why"))]
        text = "\n".join(textwrap.fill(paragraph, max(out.width, 40), initial_indent=first, subsequent_indent=rest,
                                       break_on_hyphens=False) for paragraph, first, rest in paragraphs)
        out.print("\n" + text, markup=False, highlight=False, soft_wrap=True)


def _with_status(model: str, row: dict, ledger: dict) -> list[str]:
    """A paper number as `zoo --model` lists it: "[status] the number in words", then what our runs show."""
    from benchbuild.ledger import assess, key_of
    from benchbuild.papers import reported_in_words

    record = ledger.get(key_of(model, row))
    assessment = assess(record, row)
    lines = [f"[{assessment.status}] {reported_in_words(row)}"]
    if assessment.status != "not run":
        values = ", ".join("-" if run.value is None else f"{run.value:g}" for run in record.runs)
        lines.append(f"ours: {assessment.evidence()} (seeds {', '.join(str(run.seed) for run in record.runs)}: "
                     f"{values})" + (f"; ruled out: {record.ruled_out}" if record.ruled_out else ""))
    return lines


def train_command(
    model: Annotated[str, typer.Option("--model", help="A catalogue model name (see `benchbuild zoo`) or a model .toml file.")],
    data: Annotated[Path, typer.Option("--data", help="A benchmark folder (written by a build command).")],
    out_dir: Annotated[Path, typer.Option("--out", help="Run folder: selected checkpoint, checkpoints/, logs.")],
    seed: Annotated[int, typer.Option("--seed", min=0, max=MAX_SEED, help="Seed of initialisation, batch order and dropout.")] = 0,
    max_steps: Annotated[Optional[int], typer.Option("--max-steps", min=1, help="Step budget (default: the recipe's).")] = None,
    max_minutes: Annotated[Optional[float], typer.Option(
        "--max-minutes", callback=positive_minutes, help="Also stop after this many minutes of training and validation, then validate once "
        "more and keep the checkpoint the recipe's `select` names.")] = None,
    stop_when_settled: Annotated[bool, typer.Option(
        "--stop-when-settled", help="Stop at the first validation after which the selected checkpoint is final: "
        "with `select = \"best_validation\"` and `ties = \"earliest\"`, once validation exact match reaches 100% "
        "no later validation can replace it, so the rest of the budget cannot change the model kept (002's recipe "
        "on addprim_jump validates every 58,680 of its 200,000 steps). run.json says `stopped_by: settled`.")] = False,
    device: DeviceOption("Where to train") = "auto",
    recipe: Annotated[Optional[str], typer.Option(
        "--recipe", metavar="scan|scan_000|mt|mt_001|nounadj", help="One of the entry's recipes (default: the one its paper's number on this benchmark was made "
        "with, else the benchmark family's; `benchbuild zoo --model NAME` lists them).")] = None,
    recipe_set: Annotated[Optional[list[str]], typer.Option(
        "--set", help="Override a recipe key, KEY=VALUE (repeatable), e.g. --set eval_every=500.")] = None,
    validation_split: Annotated[Optional[str], typer.Option(
        "--validation-split", help="Split for model selection (default: `validation`, else the recipe's held_out share of train: 10%, 20% for 002's models).")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing run folder instead of resuming it.")] = False,
) -> None:
    """Train a zoo model on a benchmark; a re-run with the same arguments resumes from the last checkpoint."""
    from benchbuild.training.loop import train
    from benchbuild.zoo.recipe import TrainingRecipe

    overrides = TrainingRecipe.checked_overrides(key_values(recipe_set or [], "--set"), "--set")
    result = train(model, data, out_dir, seed=seed, max_steps=max_steps, max_minutes=max_minutes, device=device,
                   recipe=recipe, overrides=overrides, stop_when_settled=stop_when_settled,
                   validation_split=validation_split, overwrite=overwrite)
    resumed = f" (resumed from step {result.resumed_from})" if result.resumed_from is not None else ""
    accuracy = "n/a" if result.validation_exact_match is None else f"{result.validation_exact_match:.2f}%"
    out.print(f"trained {result.steps} steps{resumed}; selected step {result.selected_step} "
              f"(validation exact match {accuracy}); run folder {result.run_dir}")


def eval_command(
    run_dir: Annotated[Path, typer.Option("--run", help="A run folder written by `benchbuild train`.")],
    data: Annotated[Path, typer.Option("--data", help="The benchmark folder to evaluate on.")],
    split: Annotated[str, typer.Option("--split", help="The split to decode and score.")] = "test",
    beam: Annotated[Optional[int], typer.Option("--beam", min=1, max=256, help="Beam size (1: greedy; at most 256: "
                                                "memory grows with the beam). Default: the run's recipe's (5 for MT "
                                                "recipes, as their papers decode; 1 for SCAN).")] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Sentences decoded at once.")] = 64,
    out_dir: Annotated[Optional[Path], typer.Option("--out", help="Folder for predictions.jsonl and metrics.json "
                                                    "(default: the run folder).")] = None,
    device: DeviceOption("Where to decode") = "auto",
    lexicon: Annotated[Optional[Path], typer.Option("--lexicon", help="CoGnition-style lexicon: also compute CTER.")] = None,
    compound: Annotated[Optional[str], typer.Option("--compound", help="Column or file (one a line) with each row's "
                                                    "compound, for CTER.")] = None,
    allow_unfinished: Annotated[bool, typer.Option("--allow-unfinished", help="Score a run that has not finished "
                                                   "training (interrupted, or still running: then with --out "
                                                   "elsewhere, as its folder is in use): its last selected "
                                                   "checkpoint, marked unfinished in metrics.json.")] = False,
) -> None:
    """Decode a benchmark split with a trained run and print its metrics (also written to metrics.json)."""
    from benchbuild.evaluation.evaluate import evaluate_run

    metrics = evaluate_run(run_dir, data, split=split, beam=beam, batch_size=batch_size, out=out_dir, device=device,
                           lexicon=lexicon, compound=compound, progress=True, allow_unfinished=allow_unfinished)
    out.print_json(data=metrics)


def reproduce_command(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN", help="A trained (and evaluated) run folder.",
                                            show_default=False)],
    out_dir: Annotated[Path, typer.Option("--out", help="The new run folder to train and evaluate into.")],
    data: Annotated[Optional[Path], typer.Option("--data", help="The benchmark folder the run trained on (default: "
                                                 "the one run.json records, relative to the run folder); checked "
                                                 "against the recorded fingerprint.")] = None,
    model: Annotated[Optional[Path], typer.Option("--model", help="The model .toml of a run trained from a file of "
                                                  "yours (default: the recorded one); checked against its recorded "
                                                  "sha256.")] = None,
    device: Annotated[Optional[str], typer.Option("--device", metavar="auto|cpu|cuda|cuda:N",
                                                  callback=optional_device, help="Where to train and decode: auto, "
                                                  "cpu, cuda or cuda:N (default: the recorded device).")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing run folder at --out.")] = False,
) -> None:
    """Re-run a run's recorded training and evaluations into a new folder and say which metrics agree: exactly on
    the same device and software, else within the recorded CI. Exits 1 when one that should be identical is not."""
    from benchbuild.reproduce import reproduce

    done = reproduce(run_dir, out_dir, data=data, model=model, device=device, overwrite=overwrite, progress=True)
    show = dict(markup=False, highlight=False, soft_wrap=True)
    out.print(f"reproduced {run_dir} into {out_dir}", **show)
    if done.exact:
        out.print("same device, software, thread count and steps: every number should be identical", **show)
    else:
        out.print("not expected identical (" + "; ".join(done.why_not_exact) + "): a number agrees within its "
                  "recorded 95% CI, else differs", **show)
    for agreement in done.agreements:
        out.print(agreement.line(), **show)
    for file, same, rows in done.predictions:
        out.print(f"{file}: {same:,} of {rows:,} predictions identical", **show)
    if done.failures:
        raise BenchbuildError(f"{len(done.failures)} of {len(done.agreements)} numbers differ although the device, "
                              f"software, thread count and steps are the run's: "
                              f"{', '.join(a.metric for a in done.failures[:5])}")


def score_command(
    data: Annotated[Path, typer.Option("--data", help="The benchmark folder the predictions are for.")],
    predictions: Annotated[Path, typer.Option("--predictions", help="Plain text: one prediction per row, in row order.")],
    split: Annotated[str, typer.Option("--split", help="The split the predictions are for.")] = "test",
    lexicon: Annotated[Optional[Path], typer.Option("--lexicon", help="CoGnition-style lexicon: also compute CTER.")] = None,
    compound: Annotated[Optional[str], typer.Option("--compound", help="Column or file (one a line) with each row's "
                                                    "compound, for CTER.")] = None,
    out_file: Annotated[Optional[Path], typer.Option("--out", help="Also write the metrics to this JSON file.")] = None,
) -> None:
    """Score any system's plain-text outputs with the benchmark's metrics."""
    from benchbuild.evaluation.scoring import score_file
    from benchbuild.run_folder import write_metrics

    if out_file is not None:  # a metrics file score or eval wrote is replaced; anything else is refused
        compound_file = Path(compound) if compound and Path(compound).is_file() else None
        check_output(out_file, "--out", "metrics", exists="continue", inputs=[
            ("--data", data), ("--predictions", predictions), ("--lexicon", lexicon), ("--compound", compound_file)])
    metrics = score_file(data, split, predictions, lexicon=lexicon, compound=compound)
    if out_file is not None:
        write_metrics(out_file, metrics)
    out.print_json(data=metrics)
