"""Mutation testing of the core pure modules (`make mutation`): how many deliberately broken versions of each module
its tests catch.

For each module below, mutmut (a dev dependency, not run in CI) copies the package and the tests into a scratch
folder (`.mutation/<module>/`, ignored by git), mutates every function of the module one change at a time, runs the
tests that reach the mutated function, and records whether they fail (the mutant is killed) or pass (it survived).
One line is printed per module:

    benchbuild/react/degree.py: killed 180 of 190 mutants (94.7%)

`python tools/mutation.py --survivors` lists every surviving mutant with its diff (`mutmut show`); a survivor is
either a missing test or an equivalent mutant (a change no input can observe), and benchmarks/RESULTS.md says which.
Tests that need `../shared` read it through BENCHBUILD_SHARED (set here to the checkout's `../shared`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRATCH = ROOT / ".mutation"
MUTMUT = Path(sys.executable).parent / "mutmut"

# Module → the test files that cover it (mutmut runs, for each mutant, only those of them that reach its function).
MODULES: dict[str, list[str]] = {
    "benchbuild/react/degree.py": ["tests/react/test_react_degree.py", "tests/react/test_degree_pools.py"],
    "benchbuild/react/ngrams.py": ["tests/react/test_react_degree.py", "tests/react/test_degree_pools.py"],
    "benchbuild/scan/splits.py": ["tests/scan/test_scan_splits.py"],
    "benchbuild/evaluation/cter.py": ["tests/evaluation/test_eval_cter.py", "tests/evaluation/test_eval_cter_official.py"],
    "benchbuild/evaluation/comp.py": ["tests/nounadj/test_nounadj_comp.py"],
    "benchbuild/metrics.py": ["tests/evaluation/test_eval_metrics.py"],
    "benchbuild/training/selection.py": ["tests/training/test_checkpoint_selection.py",
                                         "tests/training/test_validation_metrics.py"],
    "benchbuild/nounadj/split.py": ["tests/nounadj/test_nounadj_split.py"],
}
# mutmut's exit codes of a mutant's test run (mutmut.stats.status_by_exit_code): 1 and 3 are kills (a test failed),
# 0 a survivor; a run stopped for taking too long (SIGXCPU, or SIGTERM from mutmut's wall-clock guard) is a mutant
# the tests noticed too (it made them hang), counted as killed and shown apart; 33 and 5: no test reaches it, which
# counts against the module like a survivor.
KILLED, TIMED_OUT, SURVIVED, UNREACHED = {1, 3}, {-24, 24, 152, 255, 36, -15}, {0}, {33, 5}


def _copy(module: str, folder: Path) -> None:
    """The package and the tests in `folder` with a mutmut configuration for `module` (links left out: mutmut copies
    the files it mutates and a link may point outside)."""
    if folder.exists():
        shutil.rmtree(folder)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("benchbuild", "tests"):
        shutil.copytree(ROOT / part, folder / part, ignore=ignore, symlinks=True)
    for link in [path for path in folder.rglob("*") if path.is_symlink()]:
        link.unlink()
    tests = "\n    ".join(MODULES[module])
    (folder / "setup.cfg").write_text(
        "[mutmut]\nsource_paths=benchbuild\n"
        f"only_mutate={module}\n"
        f"pytest_add_cli_args_test_selection=\n    {tests}\n"
        # one argument a line (mutmut splits a multi-line value at newlines); the Dask tests check engines, not the
        # pure modules, and would start a cluster per mutant
        "pytest_add_cli_args=\n    -p\n    no:cacheprovider\n    -p\n    no:xdist\n    -q\n    -m\n    not distributed\n",
        encoding="utf-8")


def _results(folder: Path, module: str) -> dict[str, int]:
    """Exit code of each mutant's test run, from the `.meta` file mutmut wrote beside the mutated module."""
    meta = folder / "mutants" / f"{module}.meta"
    return json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]


def run(module: str, workers: int, show_survivors: bool) -> tuple[int, int]:
    folder = SCRATCH / module.replace("/", "_").removesuffix(".py")
    _copy(module, folder)
    environment = {**os.environ, "BENCHBUILD_SHARED": os.environ.get("BENCHBUILD_SHARED", str(ROOT.parent / "shared")),
                   "BENCHBUILD_MUTATION": "1"}  # tests/conftest.py: hypothesis finds a failure without shrinking it
    started = time.monotonic()
    done = subprocess.run([str(MUTMUT), "run", "--max-children", str(workers)], cwd=folder, env=environment,
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"mutmut failed on {module} (see {folder}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    codes = _results(folder, module)
    timed_out = sum(code in TIMED_OUT for code in codes.values())
    killed = sum(code in KILLED for code in codes.values()) + timed_out
    survivors = sorted(key for key, code in codes.items() if code in SURVIVED | UNREACHED)
    unreached = sum(code in UNREACHED for code in codes.values())
    other = len(codes) - killed - len(survivors)
    share = 100.0 * killed / len(codes) if codes else 0.0
    notes = [f"{timed_out} by timeout"] * bool(timed_out) + [f"{unreached} reached by no test"] * bool(unreached)
    notes += [f"{other} with another outcome"] * bool(other)
    note = f" ({'; '.join(notes)})" if notes else ""
    print(f"{module}: killed {killed} of {len(codes)} mutants ({share:.1f}%){note} "
          f"[{time.monotonic() - started:.0f} s]", flush=True)
    if show_survivors:
        for key in survivors:
            shown = subprocess.run([str(MUTMUT), "show", key], cwd=folder, capture_output=True, text=True)
            print(shown.stdout.rstrip() + "\n", flush=True)
    return killed, len(codes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="modules to mutate (default: all of MODULES)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="mutants tested at once")
    parser.add_argument("--survivors", action="store_true", help="print each surviving mutant's diff")
    arguments = parser.parse_args()
    unknown = [module for module in arguments.modules if module not in MODULES]
    if unknown:
        sys.exit(f"not a module of this run: {', '.join(unknown)} (choose from {', '.join(MODULES)})")
    if not MUTMUT.exists():
        sys.exit(f"{MUTMUT} is missing: pip install -e '.[mutation]'")
    for module in arguments.modules or MODULES:
        run(module, arguments.workers, arguments.survivors)


if __name__ == "__main__":
    main()
