"""Evaluate a trained run on a benchmark split: decode, score, write `predictions.jsonl` and `metrics.json`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from benchbuild.benchmark import read_build_info
from benchbuild.device import resolve_device
from benchbuild.errors import BenchbuildError
from benchbuild.evaluation.scoring import benchmark_label, score_rows, split_rows
from benchbuild.outputs import CLAIM_FILES, check_can_write, check_disjoint, is_metrics_file
from benchbuild.locks import check_free
from benchbuild.run_folder import (CHECKPOINTS_DIR, METRICS_FILE, PREDICTIONS_FILE, benchmark_fingerprint,
                                   check_result, claim, portable_path, read_run, unfinished_note, write_metrics,
                                   write_predictions)
from benchbuild.zoo.loading import load_model, load_tokenizer, target_encoder
from benchbuild.zoo.decoding import check_row_lengths, generate_predictions, length_rule, row_limits

# Wider beams cost memory in proportion (a million-wide beam asks for tens of GB before the first step); the papers
# decode with beams of 1 to 10.
MAX_BEAM = 256


def evaluate_run(run_dir: str | Path, data: str | Path, *, split: str = "test", beam: int | None = None,
                 batch_size: int = 64,
                 out: str | Path | None = None, device: str = "auto", max_new_tokens: int | None = None,
                 lexicon: str | Path | None = None, compound: str | None = None,
                 progress: bool = False, allow_unfinished: bool = False) -> dict[str, Any]:
    """Decode `split` of benchmark `data` with the run's selected checkpoint and score it; files go to `out`
    (default: the run folder). Returns the metrics as written to `metrics.json`.

    The decoding is the run's recipe's (`beam`, and fairseq's `max_len_a`/`max_len_b` output cap: MT recipes decode
    as their papers' `fairseq-generate --beam 5 --max-len-a 1.2 --max-len-b 10`); `beam` replaces the recipe's beam
    and `max_new_tokens` its cap. metrics.json says which beam and cap were used and where each came from.

    Only a finished run is scored (run.json's status `complete`): an interrupted run, or one still training in another
    process, is refused, unless `allow_unfinished`, and then metrics.json says `unfinished` ("step 50 of 150")."""
    from transformers.utils import logging as transformers_logging

    from benchbuild import zoo
    from benchbuild.evaluation.cter import read_compounds, read_lexicon

    transformers_logging.disable_progress_bar()
    zoo.register()
    run_dir = Path(run_dir)
    if beam is not None and not 1 <= beam <= MAX_BEAM:
        raise BenchbuildError(f"--beam must be between 1 and {MAX_BEAM}; got {beam} (memory grows with the beam; "
                              "the papers use 1 to 10)")
    run = read_run(run_dir)
    check_result(run_dir, run)
    unfinished = unfinished_note(run)
    if unfinished is not None and not allow_unfinished:
        raise BenchbuildError(f"{run_dir} is unfinished ({unfinished}, status {run.get('status')!r}): finish it with "
                              "the same `benchbuild train` command (it resumes), or pass --allow-unfinished to score "
                              "its last selected checkpoint, marked unfinished")
    info = read_build_info(data)  # --data is a benchmark folder: checked before the model loads
    if not (run_dir / "config.json").is_file():
        raise BenchbuildError(f"{run_dir} holds no selected checkpoint yet (no config.json): train it first")
    destination = Path(out) if out is not None else run_dir
    check_evaluation_output(destination, run_dir, Path(data), lexicon, compound)
    # A folder another process holds (a run still training, for --allow-unfinished) is refused now, not after the
    # whole split was decoded; the claim below holds it while the files are written.
    check_free(destination, what="run folder" if destination == run_dir else "folder")
    rows = split_rows(data, split)
    if not rows:
        raise BenchbuildError(f"split {split!r} of {data} has no rows: nothing to decode or score (give another "
                              "--split)")
    # A source longer than a model takes is refused now; a reference that long is only never matched.
    check_row_lengths(f"split {split!r} of {data}:", source=[row["source"] for row in rows])
    # CTER's inputs are checked before the long decoding, so a wrong path fails at once.
    compounds = read_compounds(compound, rows) if lexicon is not None else None
    if lexicon is not None:
        read_lexicon(lexicon)
    target = torch.device(resolve_device(device))
    model = load_model(run_dir).to(target)
    tokenizer = load_tokenizer(run_dir)
    recipe = run.get("recipe") or {}
    beam_from = "--beam" if beam is not None else "recipe"
    beam = beam if beam is not None else int(recipe.get("beam", 1))
    rule = None if max_new_tokens is not None else length_rule(recipe)
    # With separate dictionaries (`TranslationTokenizer`) sources are encoded in the source one, references measured
    # and predictions decoded in the target one.
    # Without a rule or --max-new-tokens, each row is capped at its own reference + 8 tokens (`row_limits`).
    limits = max_new_tokens or row_limits(target_encoder(tokenizer), [row["target"] for row in rows])
    predictions = generate_predictions(model, tokenizer, [row["source"] for row in rows], beam=beam,
                                       batch_size=batch_size, max_new_tokens=limits, length_rule=rule, device=target,
                                       progress=progress)
    length = ({"max_new_tokens": limits if isinstance(limits, int) else max(limits)} if rule is None else
              {"max_len_a": rule[0], "max_len_b": rule[1], "max_new_tokens": None})
    if rule is None and not isinstance(limits, int):
        length["max_new_tokens_per_row"] = "its reference + 8"
    scores = score_rows(rows, predictions, lexicon=lexicon, compounds=compounds, family=info.family, split=split)
    # Paths relative to the folder metrics.json is written in (None where only an absolute path reaches them), the
    # benchmark also by fingerprint: no absolute path of this machine (`run_folder.portable_path`).
    result = {
        "run": portable_path(run_dir, destination), "model": run.get("model"), "seed": run.get("seed"),
        "selected_step": run.get("selected_step"), "benchmark": benchmark_label(data),
        "benchmark_path": portable_path(data, destination),
        "benchmark_fingerprint": benchmark_fingerprint({name: s.fingerprint for name, s in info.splits.items()}),
        "split": split,
        # the content fingerprint of the rows scored: load_splits checked them against build.json's
        "split_fingerprint": info.splits[split].fingerprint if split in info.splits else None,
        "beam": beam, "beam_from": beam_from, "batch_size": batch_size,
        **length,
        **scores,
        **({} if unfinished is None else {"unfinished": unfinished}),
    }
    with claim(destination):
        # A killed evaluation leaves neither file half written, nor new predictions beside an older metrics.json.
        if (destination / METRICS_FILE).is_file():
            (destination / METRICS_FILE).unlink()
        write_predictions(destination, (
            {"id": row.get("id"), "source": row["source"], "target": row["target"], "prediction": prediction,
             "correct": " ".join(prediction.split()) == " ".join(row["target"].split())}
            for row, prediction in zip(rows, predictions)))
        write_metrics(destination / METRICS_FILE, result)
    if (run.get("status") == "complete" or unfinished is not None) and destination.resolve().is_relative_to(
            run_dir.resolve()):
        # The run's model card shows the metrics files in the run folder: written again with this one (an unfinished
        # run's, scored with --allow-unfinished, says so above its metrics).
        from benchbuild.model_card import write_model_card

        write_model_card(run_dir, run, model, rows[0]["source"] if rows else None)
    return result


def check_evaluation_output(destination: Path, run_dir: Path, data: Path, lexicon: str | Path | None,
                            compound: str | None) -> None:
    """Where an evaluation writes: the run folder, or an `--out` folder (inside the run folder or elsewhere) that is
    new or holds only an earlier evaluation's files; never the benchmark, the lexicon or the compound file, nor a
    folder holding the run."""
    inputs = [("--data", data), ("--lexicon", Path(lexicon) if lexicon else None),
              ("--compound", Path(compound) if compound and Path(compound).is_file() else None)]
    if destination != run_dir and destination.is_symlink():
        raise BenchbuildError(f"--out {destination} is a symbolic link: benchbuild never writes through a link; "
                              "give the real path")
    same = destination.resolve() == run_dir.resolve()
    check_disjoint(destination, "--run" if same else "--out", inputs)
    check_can_write(destination, "--run" if same else "--out")
    if same:
        return
    if run_dir.resolve().is_relative_to(destination.resolve()):
        raise BenchbuildError(f"--out {destination} holds the run folder {run_dir}: choose a folder for the "
                              "evaluation's files inside it or elsewhere")
    if destination.resolve().is_relative_to((run_dir / CHECKPOINTS_DIR).resolve()):
        raise BenchbuildError(f"--out {destination} lies in the run's checkpoints: choose another folder")
    if destination.is_symlink() or (destination.exists() and not destination.is_dir()):
        raise BenchbuildError(f"--out {destination} exists and is not a folder: give a folder for "
                              f"{PREDICTIONS_FILE} and {METRICS_FILE}")
    if destination.is_dir():
        ours = {PREDICTIONS_FILE, METRICS_FILE, *CLAIM_FILES}
        foreign = sorted(entry.name for entry in destination.iterdir() if entry.name not in ours)
        metrics = destination / METRICS_FILE
        if foreign or (metrics.exists() and not is_metrics_file(metrics)):
            raise BenchbuildError(f"--out {destination} holds files that are not an evaluation's "
                                  f"({', '.join(foreign[:5]) or METRICS_FILE}): benchbuild replaces only what it "
                                  "wrote; choose a new folder")

