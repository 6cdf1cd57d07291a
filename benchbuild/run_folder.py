"""The run folder, a part of its own like `benchmark.py` is for benchmarks: its files and their names, how they are
written (in one rename, never through a symbolic link), read (a log line cut by a kill is dropped), claimed (one
process at a time, `locks.FolderLock`) and what `--overwrite` may remove. Training writes it; evaluation, the report
and sweeps read it, through this module only.

A run folder holds the selected checkpoint at its root (`save_pretrained` safetensors + config + tokenizer; with
separate source and target dictionaries the root's tokenizer is the source one and `target_tokenizer/` holds the
target one, `training.tokenization.TranslationTokenizer`), the
latest checkpoints under `checkpoints/step-NNNNNNNN/` (weights + `trainer_state.pt`), `train_log.jsonl` (one JSON
record a line: `step`, `loss`, `lr` every few steps, and `step`, `validation_exact_match`, … at each validation),
`run.json` (the run's identity, which a resumption must match, its arguments, and how far it got: `status` is
`running`, `complete`, or `failed` with the step and reason), and, once evaluated, `predictions.jsonl` and
`metrics.json`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Iterable

from benchbuild.atomic import append_line, atomic_file, write_file
from benchbuild.errors import BenchbuildError
from benchbuild.locks import FolderLock
from benchbuild.outputs import CLAIM_FILES, check_output

RUN_FILE = "run.json"
LOG_FILE = "train_log.jsonl"
STATE_FILE = "trainer_state.pt"
CHECKPOINTS_DIR = "checkpoints"
PREDICTIONS_FILE = "predictions.jsonl"
METRICS_FILE = "metrics.json"
TARGET_TOKENIZER_DIR = "target_tokenizer"  # the target dictionary of a run with separate dictionaries


def claim(folder: str | Path) -> FolderLock:
    """Hold `folder` for this process (`with claim(out):`): a second benchbuild process is refused, naming this one."""
    return FolderLock(folder, what="run folder")


def read_run(run_dir: str | Path) -> dict[str, Any]:
    """The `run.json` of a run folder; a missing or unreadable one is a BenchbuildError saying which."""
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        raise BenchbuildError(f"{run_dir} is not a benchbuild run: {path} is missing")
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise BenchbuildError(f"{path} is not valid JSON ({error}): the run folder is damaged; retrain it "
                              "(benchbuild train ... --overwrite)") from None
    if not isinstance(run, dict):
        raise BenchbuildError(f"{path} is not a benchbuild run record: retrain the run (benchbuild train ... "
                              "--overwrite)")
    return run


def write_run(out: Path, run: dict[str, Any]) -> None:
    """Replace `run.json` in one rename, so a killed run never leaves it half written."""
    write_file(Path(out) / RUN_FILE, json.dumps(run, indent=2, ensure_ascii=False) + "\n")


def open_run(out: Path, identity: dict[str, Any], overwrite: bool) -> dict[str, Any]:
    """The run record to continue: a fresh one (written at once), or the existing one when `out` holds the same run
    (resume). `out` must be claimed (`claim`) by the caller. With `overwrite`, a run folder's contents are removed
    first (the claim stays); a folder that is not a run is refused whatever `overwrite` says."""
    identity = json.loads(json.dumps(identity))
    check_output(out, "--out", "run", exists="continue")
    if overwrite:
        clear(out)
    if out.exists() and any(path.name not in CLAIM_FILES for path in out.iterdir()):
        run = read_run(out)
        previous = run.get("identity", {})
        if previous != identity:
            differing = sorted(key for key in set(previous) | set(identity) if previous.get(key) != identity.get(key))
            raise BenchbuildError(f"{out} holds a different run (it differs in: {', '.join(differing)}): "
                                  "pass --overwrite to replace it, or choose another --out")
        return run
    out.mkdir(parents=True, exist_ok=True)
    run = {"identity": identity, "status": "starting"}
    write_run(out, run)
    return run


def clear(out: Path) -> None:
    """Remove what a run folder holds, except the claim files (the lock this process holds, a sweep's record): what
    `--overwrite` does, and only ever to a folder `check_output` recognised as a run folder."""
    if not out.is_dir():
        return
    for entry in out.iterdir():
        if entry.name in CLAIM_FILES:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def mark_failed(out: Path, run: dict[str, Any], step: int, reason: str) -> None:
    """Record that training stopped at `step` for `reason` (a non-finite loss, say): the run is never reported."""
    run.update({"status": "failed", "failed_at_step": step, "failure": reason})
    write_run(out, run)


def check_result(run_dir: Path, run: dict[str, Any]) -> None:
    """Refuse a run that failed: its checkpoint is no result."""
    if run.get("status") == "failed":
        raise BenchbuildError(f"{run_dir} failed at step {run.get('failed_at_step')} ({run.get('failure')}): it has "
                              "no result to evaluate or report; retrain it (benchbuild train ... --overwrite)")


def save_pretrained(out: Path, *savables: Any) -> None:
    """Save a model and/or tokenizer (`save_pretrained`) at the run folder's root: written into a folder beside the
    files and renamed over them one by one, so a link planted at `model.safetensors` (say) is replaced, never
    written through, and a kill leaves each file old or new, never half written. A subfolder it writes (the target
    dictionary's, `TARGET_TOKENIZER_DIR`) is filled the same way, file by file."""
    from benchbuild.atomic import work_directory

    with work_directory(Path(out) / "selected") as staged:
        for savable in savables:
            savable.save_pretrained(staged)
        _move_into(staged, Path(out))


def _move_into(staged: Path, destination: Path) -> None:
    """Rename every file of `staged` over its namesake in `destination`, subfolders alike; a link (or a file) where a
    subfolder goes is removed first, never followed."""
    import os

    for written in sorted(staged.iterdir()):
        target = destination / written.name
        if written.is_dir():
            if target.is_symlink() or (target.exists() and not target.is_dir()):
                target.unlink()
            target.mkdir(exist_ok=True)
            _move_into(written, target)
        else:
            os.replace(written, target)


def append_log(out: Path, record: dict[str, Any]) -> None:
    """Add one record to the run's `train_log.jsonl` (never through a link)."""
    append_line(Path(out) / LOG_FILE, json.dumps(record))


def read_log(out: str | Path) -> list[dict[str, Any]]:
    """The records of `train_log.jsonl` (none without it). A cut last line (the normal result of a kill) is dropped;
    a bad line before the last is a BenchbuildError naming it."""
    path = Path(out) / LOG_FILE
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or "step" not in record:
                raise ValueError("not a log record")
        except ValueError:
            if all(not rest.strip() for rest in lines[number:]):
                break  # cut by a kill while it was written
            raise BenchbuildError(f"{path} line {number} is not a log record: the log is damaged; retrain the run "
                                  "(benchbuild train ... --overwrite)") from None
        records.append(record)
    return records


def truncate_log(out: Path, step: int) -> None:
    """Drop log lines past the checkpoint a resumed run restarts from (the killed run wrote them), and a cut one."""
    path = Path(out) / LOG_FILE
    if not path.exists() and not path.is_symlink():
        return
    kept = [record for record in read_log(out) if record["step"] <= step]
    write_file(path, "".join(json.dumps(record) + "\n" for record in kept))


def write_predictions(destination: Path, records: Iterable[dict[str, Any]]) -> None:
    """`predictions.jsonl`, one JSON object a line, in one rename."""
    with atomic_file(Path(destination) / PREDICTIONS_FILE) as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def write_metrics(path: Path, metrics: dict[str, Any]) -> None:
    """A metrics JSON file (`metrics.json` of an evaluation, `score --out`), in one rename."""
    write_file(path, json.dumps(metrics, indent=2, ensure_ascii=False) + "\n")


def metrics_files(run_dir: Path) -> list[Path]:
    """`metrics.json` of the run folder and of its direct subfolders (evaluations written with `--out RUN/sub`)."""
    found = [run_dir / METRICS_FILE] if (run_dir / METRICS_FILE).is_file() else []
    found += sorted(path for path in run_dir.glob(f"*/{METRICS_FILE}") if path.parent.name != CHECKPOINTS_DIR)
    return found


def read_metrics(path: Path) -> dict[str, Any]:
    try:
        metrics = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise BenchbuildError(f"{path} is not valid JSON: evaluate the run again (benchbuild eval ...)") from None
    if not isinstance(metrics, dict):
        raise BenchbuildError(f"{path} is not a metrics file: evaluate the run again (benchbuild eval ...)")
    return metrics
