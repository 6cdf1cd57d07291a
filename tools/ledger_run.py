"""The `[[number.runs]]` block of benchbuild/ledger.toml for one evaluated run folder, printed to be filed by hand.

    .venv/bin/python tools/ledger_run.py runs/queue/sa-jump/seed1 [--device "2-core CPU"] [--date YYYY-MM-DD]

Reads the run's metrics.json (test exact match, its interval, the selected step), its run.json (seed, whether the
run finished, the commit it last ran at) and, where `queue.sh eval` wrote it, train-eval/metrics.json (train exact
match, for 002's exclusion rule); the metrics fingerprint is the sha256 of metrics.json's bytes. Its `note` starts
with what the run folder says of the selection: each validation's exact match (train_log.jsonl), which one was kept,
how much of the budget ran and why it stopped, and which commit trained which steps (run.json's `segments`, where the
run kept them). What it cannot know (whether the run followed the whole protocol, what the figures alone do not
say) is left to the filer, who finishes the note.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import sys
from pathlib import Path

from benchbuild.run_folder import read_log  # (a line cut by a kill is dropped, as everywhere else)


def record(run: Path, device: str, date: str) -> str:
    """The TOML block for `run` (an evaluated run folder)."""
    metrics_path = run / "metrics.json"
    if not metrics_path.is_file():
        raise SystemExit(f"ledger_run: {metrics_path} is missing: evaluate the run first (queue.sh eval ITEM SEED)")
    metrics = json.loads(metrics_path.read_text(encoding="utf-8"))
    state = json.loads((run / "run.json").read_text(encoding="utf-8"))
    if state.get("status") != "complete":
        raise SystemExit(f"ledger_run: {run} is {state.get('status')!r}, not complete: file finished runs only")
    if metrics.get("split") != "test":
        raise SystemExit(f"ledger_run: {metrics_path} scores the {metrics.get('split')!r} split, not test")
    low, high = metrics["exact_match_ci"]
    lines = ["[[number.runs]]", f"seed = {state['seed']}", f"value = {round(metrics['exact_match'], 2)}",
             f"interval = [{round(low, 2)}, {round(high, 2)}]"]
    train = run / "train-eval" / "metrics.json"
    if train.is_file():
        lines.append(f"train_exact_match = {round(json.loads(train.read_text(encoding='utf-8'))['exact_match'], 2)}")
    environment = state.get("environment", {})
    commit = (environment.get("benchbuild_commit") or "unknown")[:7]
    if environment.get("benchbuild_dirty"):
        commit += " with uncommitted changes"
    lines += [f"steps = {metrics['selected_step']}", f'commit = "{commit}"', f'device = "{device}"',
              f'date = "{date}"', f'metrics_sha256 = "{hashlib.sha256(metrics_path.read_bytes()).hexdigest()}"']
    lines.append(f'note = "{selection_note(run, state, metrics["selected_step"])}"')
    return "\n".join(lines)


def selection_note(run: Path, state: dict, selected: int) -> str:
    """'validation 94.05% at 66,910, 99.37% at 133,820 (kept); 200,000 of 200,000 updates (step budget); trained
    from 0 at a35cb7e, from 79,327 at a310875'."""
    validations = [f"{event['validation_exact_match']:.2f}% at {event['step']:,}"
                   + (" (kept)" if event["step"] == selected else "")
                   for event in read_log(run) if "validation_exact_match" in event]
    if len(validations) > 6:  # the first two, the kept one and the last three, "..." for each gap
        shown = [index for index, text in enumerate(validations)
                 if index < 2 or index >= len(validations) - 3 or text.endswith("(kept)")]
        validations = [text for previous, index in zip([-1] + shown, shown)
                       for text in (["..."] if index > previous + 1 else []) + [validations[index]]]
    parts = [f"validation {', '.join(validations)}"] if validations else []
    if state.get("steps_done") is not None and state.get("step_budget") is not None:
        parts.append(f"{state['steps_done']:,} of {state['step_budget']:,} updates"
                     + (f" ({state['stopped_by']})" if state.get("stopped_by") else ""))
    segments = state.get("segments") or []
    if segments:
        def commit(segment: dict) -> str:
            return (segment.get("benchbuild_commit") or "unknown")[:7] + (
                " with uncommitted changes" if segment.get("benchbuild_dirty") else "")
        crossed = [f"from {segment['from_step']:,} at {commit(segment)}" for segment in segments]
        if segments[0]["from_step"] > 0:
            crossed.insert(0, f"before {segments[0]['from_step']:,}: commit not recorded")
        parts.append("trained " + ", ".join(crossed))
    return "; ".join(parts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="an evaluated run folder")
    parser.add_argument("--device", default="2-core CPU")
    parser.add_argument("--date", default=datetime.date.today().isoformat())
    arguments = parser.parse_args(argv)
    print(record(arguments.run, arguments.device, arguments.date))


if __name__ == "__main__":
    sys.exit(main())
