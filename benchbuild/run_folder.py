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

What these files record is enough to re-run the run (`benchbuild reproduce`) and holds no absolute path of the machine
it ran on: a path is recorded relative to the folder of the file that records it (`portable_path`, read back with
`recorded_path`; files written before that hold absolute paths, which read back the same), the catalogue entry by name
or, for an entry file of the user's, by its path and sha256 (`entry_record`), the benchmark by its fingerprint
(`benchmark_fingerprint`), and the software and device by `environment` and `device_record`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterable, Mapping

from benchbuild.atomic import append_line, atomic_file, write_file
from benchbuild.errors import BenchbuildError, start_again
from benchbuild.locks import FolderLock
from benchbuild.outputs import CLAIM_FILES, check_output

RUN_FILE = "run.json"
LOG_FILE = "train_log.jsonl"
STATE_FILE = "trainer_state.pt"
CHECKPOINTS_DIR = "checkpoints"
PREDICTIONS_FILE = "predictions.jsonl"
METRICS_FILE = "metrics.json"
TARGET_TOKENIZER_DIR = "target_tokenizer"  # the target dictionary of a run with separate dictionaries


# The folders benchbuild makes inside a run folder and writes into.
RUN_SUBFOLDERS = (CHECKPOINTS_DIR, TARGET_TOKENIZER_DIR)


def check_subfolders(out: Path) -> None:
    """None of the folders benchbuild writes into inside run folder `out` is a symbolic link: writing (or pruning old
    checkpoints) through one would change files benchbuild did not make. Checked when a run starts or resumes and
    before each checkpoint."""
    for name in RUN_SUBFOLDERS:
        path = out / name
        if path.is_symlink():
            raise BenchbuildError(f"{path} is a symbolic link (to {os.readlink(path)}): benchbuild writes only into "
                                  "folders it made and never through a link; remove the link (its target is "
                                  "untouched) and rerun")


def claim(folder: str | Path) -> FolderLock:
    """Hold `folder` for this process (`with claim(out):`): a second benchbuild process is refused, naming this one."""
    return FolderLock(folder, what="run folder")


def read_run(run_dir: str | Path) -> dict[str, Any]:
    """The `run.json` of a run folder; a missing or unreadable one is a BenchbuildError saying which."""
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        raise BenchbuildError(f"{run_dir} is not a benchbuild run: {path} is missing")
    try:
        run = json.loads(path.read_text(encoding="utf-8-sig"))
    except (ValueError, UnicodeDecodeError) as error:
        raise BenchbuildError(f"{path} is not valid JSON ({error}): the run folder is damaged; "
                              f"{start_again('retrain it (benchbuild train ... --overwrite)')}") from None
    if not isinstance(run, dict):
        raise BenchbuildError(f"{path} is not a benchbuild run record: "
                              f"{start_again('retrain the run (benchbuild train ... --overwrite)')}")
    return run


def recovery(checkpoint: Path) -> str:
    """The way out for a checkpoint (or a run folder's final weights) that cannot be loaded."""
    if checkpoint.parent.name == CHECKPOINTS_DIR:
        again = start_again("rerun with --overwrite")
        return f"delete {checkpoint} to resume from the checkpoint before it, or {again}"
    return start_again("retrain the run (benchbuild train ... --overwrite)")


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
        clear(out)  # a link among the entries is removed, never followed
    check_subfolders(out)
    if out.exists() and any(path.name not in CLAIM_FILES for path in out.iterdir()):
        run = read_run(out)
        previous = run.get("identity", {})
        if previous != identity:
            differing = sorted(key for key in set(previous) | set(identity) if previous.get(key) != identity.get(key))
            if differing == ["trainer"]:
                how = ("in a stack (benchbuild sweep --stack): resume it with the same sweep command"
                       if previous.get("trainer") == "stacked" else "alone (benchbuild train): resume it that way")
                raise BenchbuildError(f"{out} holds a run trained {how}, or pass --overwrite to start again (it "
                                      "differs in: trainer)")
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


def unfinished_note(run: dict[str, Any]) -> str | None:
    """"step 50 of 150, unfinished" for a run whose run.json is not `complete` (interrupted, or still training),
    None for a finished one (a run.json without a status, written by hand or by no training, counts as finished)."""
    if run.get("status", "complete") == "complete":
        return None
    done, budget = run.get("steps_done"), run.get("step_budget")
    done = 0 if done is None else done
    return f"step {done:,} of {budget:,}, unfinished" if budget else f"step {done:,}, unfinished"


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
    lines = path.read_text(encoding="utf-8-sig", errors="replace").split("\n")
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


def truncate_log(out: Path, step: int, validated: bool = True) -> None:
    """Drop log lines past the checkpoint a resumed run restarts from (the killed run wrote them), and a cut one; with
    `validated` false (a resume point whose validation is due), the validation line at `step` too, which a stop
    during that validation may have left: the rerun validates again and writes it."""
    path = Path(out) / LOG_FILE
    if not path.exists() and not path.is_symlink():
        return
    kept = [record for record in read_log(out)
            if record["step"] < step or (record["step"] == step and (validated or "elapsed_s" not in record))]
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
        metrics = json.loads(path.read_text(encoding="utf-8-sig"))
    except (ValueError, UnicodeDecodeError):
        raise BenchbuildError(f"{path} is not valid JSON: evaluate the run again (benchbuild eval ...)") from None
    if not isinstance(metrics, dict):
        raise BenchbuildError(f"{path} is not a metrics file: evaluate the run again (benchbuild eval ...)")
    return metrics


def stale_scores(run: dict[str, Any], metrics: dict[str, Any]) -> str | None:
    """Why a metrics file no longer scores the run's weights, in words; None while it does. A run trained on after
    its evaluation (a larger --max-steps, or an unfinished run scored with --allow-unfinished and finished since)
    selects another checkpoint, or has finished since it was scored: its metrics.json belongs to other weights."""
    scored, selected = metrics.get("selected_step"), run.get("selected_step")
    if isinstance(scored, int) and isinstance(selected, int) and scored != selected:
        return (f"it scores the checkpoint of step {scored:,}, but the run has trained on since and now selects step "
                f"{selected:,}")
    if metrics.get("unfinished") and run.get("status") == "complete":
        return f"it was scored before the run finished ({metrics['unfinished']}), and the run has finished since"
    return None


def check_fresh(run_dir: Path, run: dict[str, Any], files: list[Path]) -> None:
    """Refuse a run's metrics files that score other weights than its own (`stale_scores`), naming the way out."""
    for file in files:
        stale = stale_scores(run, read_metrics(file))
        if stale is not None:
            again = "" if file.parent == run_dir else f" --out {file.parent}"
            raise BenchbuildError(f"{file} is stale: {stale}; evaluate the run again (benchbuild eval --run {run_dir} "
                                  f"--data BENCHMARK{again})")


def portable_path(path: str | Path, folder: str | Path) -> str | None:
    """`path` relative to `folder` (both resolved), as a file in `folder` records it; None where the two share no
    folder below the filesystem's root, for a path that climbs to the root spells out the machine's absolute path."""
    target, base = Path(os.path.abspath(path)).resolve(), Path(os.path.abspath(folder)).resolve()
    common = Path(os.path.commonpath([target, base]))
    if common == Path(common.anchor):
        return None
    return os.path.relpath(target, base)


def recorded_path(folder: str | Path, recorded: Any) -> Path | None:
    """The path a file in `folder` recorded (`portable_path`: relative to `folder`; an absolute one, as files
    written before paths were recorded relative hold, as it is); None when nothing was recorded."""
    if not isinstance(recorded, str) or not recorded:
        return None
    if Path(recorded).is_absolute():
        return Path(recorded)
    return Path(os.path.normpath(Path(os.path.abspath(folder)).resolve() / recorded))


def benchmark_fingerprint(split_fingerprints: Mapping[str, str]) -> str:
    """One fingerprint of a whole benchmark: the sha256 of its splits' names and content fingerprints (`build.json`'s
    `splits`), equal iff every split holds the same rows."""
    canonical = json.dumps(sorted(split_fingerprints.items()), separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def entry_record(entry: Any, run_dir: Path, catalogue: Path) -> dict[str, Any]:
    """How `run.json` names the catalogue entry a run trained: `model_entry` is the name of an entry the package ships
    in the folder `catalogue` (`zoo.catalogue.CATALOGUE`: `benchbuild zoo` lists it), else the entry file's path
    relative to the run folder (None where only an absolute path reaches it) with the file's sha256 in
    `model_entry_sha256`, so a changed file is noticed. (The catalogue folder is passed in: the run folder's module
    does not import the zoo, whose loading imports it.)"""
    from benchbuild.fingerprint import sha256_file

    shipped = catalogue / f"{entry.path.stem}.toml"
    if shipped.is_file() and shipped.resolve() == Path(entry.path).resolve():
        return {"model_entry": entry.path.stem}
    return {"model_entry": portable_path(entry.path, run_dir), "model_entry_sha256": sha256_file(entry.path)}


def recorded_entry(run_dir: str | Path, record: Mapping[str, Any]) -> str | None:
    """What `zoo.load_entry` takes for the entry `run.json` names (`entry_record`): a catalogue name as it is, an
    entry file's path resolved against the run folder (an absolute one, of older run folders, as it is)."""
    recorded = record.get("model_entry")
    if not isinstance(recorded, str) or not recorded:
        return None
    if not recorded.endswith(".toml"):
        return recorded
    return str(recorded_path(run_dir, recorded))


# The libraries whose versions decide what a run computes, recorded in run.json's `environment`.
RECORDED_PACKAGES = ("torch", "transformers", "datasets", "sacrebleu", "tokenizers", "accelerate")


def environment() -> dict[str, Any]:
    """The software a run ran on: Python's, benchbuild's and `RECORDED_PACKAGES`' versions, and, where benchbuild runs
    from a git checkout, its commit and whether the checkout's package folder had uncommitted changes (None for
    both when it is installed from a wheel)."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    from benchbuild import __version__

    def installed(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    commit, dirty = benchbuild_commit()
    return {"python": platform.python_version(), "benchbuild": __version__, "benchbuild_commit": commit,
            "benchbuild_dirty": dirty, **{name: installed(name) for name in RECORDED_PACKAGES}}


@functools.lru_cache(maxsize=1)
def benchbuild_commit() -> tuple[str | None, bool | None]:
    """`git rev-parse HEAD` of the checkout benchbuild's package folder is in, and whether `git status` lists a change
    in that folder (new files too); (None, None) when the folder is no tracked part of a git checkout (a wheel
    installed in a virtual environment that lies inside some repository is not)."""
    import subprocess

    package = Path(__file__).resolve().parent

    def git(*arguments: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(package), *arguments], capture_output=True, text=True,
                                  timeout=30, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None

    if git("ls-files", "--error-unmatch", Path(__file__).name) is None:
        return None, None
    head, status = git("rev-parse", "HEAD"), git("status", "--porcelain", "--", ".")
    if head is None:
        return None, None
    return head.strip(), None if status is None else bool(status.strip())


def device_record(device: Any) -> dict[str, Any]:
    """What a run's device was, beyond `cpu` or `cuda:N`: the GPU's name and the CUDA version torch was built with,
    or the CPU's model (where the system says it) and no CUDA version."""
    import torch

    if getattr(device, "type", str(device)) == "cuda":
        return {"device_name": torch.cuda.get_device_name(device), "cuda": torch.version.cuda}
    return {"device_name": _cpu_model(), "cuda": None}


def _cpu_model() -> str | None:
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or None


def train_command_line(model: str | Path, data: str | Path, out: str | Path, arguments: Mapping[str, Any]) -> str:
    """The `benchbuild train` command of a run: the options it was given (`arguments`, as `train` takes them: seed,
    max_steps, max_minutes, stop_when_settled, device, recipe, overrides, validation_split), paths as typed where relative, an absolute
    one relative to the current folder (`typed_path`). Architecture overrides, which a sweep's grid gives and `train`
    has no option for, are in `run.json`'s `architecture_overrides` only."""
    import shlex

    model_text = typed_path(model) if str(model).endswith(".toml") else str(model)
    words = ["benchbuild", "train", "--model", model_text, "--data", typed_path(data), "--out", typed_path(out)]
    options = (("--seed", "seed"), ("--max-steps", "max_steps"), ("--max-minutes", "max_minutes"),
               ("--device", "device"), ("--recipe", "recipe"), ("--validation-split", "validation_split"))
    for option, key in options:
        value = arguments.get(key)
        if value is not None and not (key == "device" and value == "auto"):
            words += [option, str(value)]
    if arguments.get("stop_when_settled"):
        words.append("--stop-when-settled")
    for key, value in (arguments.get("overrides") or {}).items():
        words += ["--set", f"{key}={_option_value(value)}"]
    return shlex.join(words)


def typed_path(path: str | Path) -> str:
    """A path as a command line shows it: as typed when relative; an absolute one relative to the current folder,
    else (sharing only the root with it) its last part after `.../`, never the machine's absolute path."""
    if not Path(path).is_absolute():
        return str(path)
    relative = portable_path(path, Path.cwd())
    return relative if relative is not None else f".../{Path(path).name}"


def _option_value(value: Any) -> str:
    """`value` as `--set KEY=VALUE` writes it: `options.key_values` reads TOML, else keeps the text."""
    import tomllib

    if isinstance(value, str):
        try:
            if tomllib.loads(f"value = {value}")["value"] == value:
                return value
        except tomllib.TOMLDecodeError:
            return value
        return json.dumps(value)
    return json.dumps(value)


def recorded_interval(metrics: Mapping[str, Any], metric: str) -> tuple[float, float] | None:
    """The 95% confidence interval a metrics file records for its number `metric` (`exact_match`, `bleu.score`,
    `comp.order_accuracy`, `cter.aggregate`): the `[low, high]` of `<key>_ci` beside it (`exact_match_ci`, `bleu_ci`,
    `order_accuracy_ci`, `cter_aggregate_ci`); None where the file has none (written before intervals were recorded,
    or a split of under two rows)."""
    top, _, inner = metric.partition(".")
    names = [f"{top}_ci"] if inner in ("", "score", top) else [f"{inner}_ci", f"{top}_{inner}_ci"]
    for name in names:
        recorded = metrics.get(name)
        if (isinstance(recorded, (list, tuple)) and len(recorded) == 2
                and all(isinstance(bound, (int, float)) and not isinstance(bound, bool) for bound in recorded)):
            return float(recorded[0]), float(recorded[1])
    return None
