"""Peak memory of the degree stage against the pool's length: `benchbuild degree` and `benchbuild build-react`'s
candidate stage over a 1M-line and a 4M-line pool (the same training corpus), measured with `/usr/bin/time -v`
(its "Maximum resident set size"); the goal is a 4M peak at most 1.3× the 1M peak.

The pools are made in a temporary folder from the shared data: each line joins two sentences drawn (seeded) from
cg_test, IWSLT14 test, the WMT14 sample and IWSLT14 valid with its words reversed (in vocabulary, unseen), so
nearly every line is distinct and a good share pass the OOV filter (`--min-word-count 1`); the training corpus is
IWSLT14 valid. `build-react` is stopped right after its candidate stage: `--drop-top` above `--pool-size` (with
`--allow-small`) makes it refuse to train an ensemble on the candidates, so the peak is the stage's own.
`--engine dask` measures this process of a `--engine dask --workers 2` run instead (the workers are processes of
their own).

Run: .venv/bin/python benchmarks/degree_memory.py [--shared DIR] [--sizes 1000000 4000000] [--engine local|dask]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BENCHBUILD = Path(sys.executable).parent / "benchbuild"
TIME = Path("/usr/bin/time")


def sentence_pairs(shared: Path) -> list[tuple[str, str]]:
    """The (German, English) sentences the pool lines are joined from."""
    react = shared / "react"
    read = lambda path: path.read_text(encoding="utf-8").splitlines()  # noqa: E731
    pairs = list(zip(read(react / "cg_test.de"), read(react / "cg_test.en")))
    pairs += zip(read(react / "test.de"), read(react / "test.en"))
    pairs += zip(read(shared / "wmt14-ende-sample" / "train.de"), read(shared / "wmt14-ende-sample" / "train.en"))
    valid = zip(read(react / "valid.de"), read(react / "valid.en"))
    pairs += [(" ".join(reversed(de.split())), en) for de, en in valid]
    return [(de, en) for de, en in pairs if de.strip() and en.strip()]


def write_pool(pairs: list[tuple[str, str]], lines: int, folder: Path, seed: int = 0) -> tuple[Path, Path]:
    """`lines` pool pairs, each two sentences joined, as pool.de / pool.en under `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    de_path, en_path = folder / "pool.de", folder / "pool.en"
    with open(de_path, "w", encoding="utf-8") as de_file, open(en_path, "w", encoding="utf-8") as en_file:
        for start in range(0, lines, 100_000):
            drawn = rng.integers(0, len(pairs), size=(min(100_000, lines - start), 2))
            de_file.write("".join(f"{pairs[a][0]} {pairs[b][0]}\n" for a, b in drawn.tolist()))
            en_file.write("".join(f"{pairs[a][1]} {pairs[b][1]}\n" for a, b in drawn.tolist()))
    return de_path, en_path


def peak(command: list[str], cwd: Path) -> tuple[int, float, str]:
    """Maximum resident set size (KiB) and wall seconds of `command` under /usr/bin/time -v, and its last stderr
    line."""
    started = time.perf_counter()
    done = subprocess.run([str(TIME), "-v", *command], cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - started
    match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    if match is None:
        raise SystemExit(f"no peak in /usr/bin/time's output:\n{done.stderr[-2000:]}")
    said = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("\t")]
    return int(match.group(1)), wall, said[-2] if len(said) >= 2 else ""


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    arguments.add_argument("--sizes", type=int, nargs=2, default=[1_000_000, 4_000_000])
    arguments.add_argument("--engine", choices=["local", "dask"], default="local")
    args = arguments.parse_args()
    if not TIME.exists():
        raise SystemExit("/usr/bin/time is missing: apt-get install -y time")
    engine = ["--engine", "dask", "--workers", "2"] if args.engine == "dask" else []
    react = args.shared / "react"
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores visible, load average at start "
          f"{' '.join(f'{value:.1f}' for value in os.getloadavg())}, python {platform.python_version()}, "
          f"engine {args.engine}")
    pairs = sentence_pairs(args.shared)
    results: dict[str, list[int]] = {"degree": [], "build-react candidate stage": []}
    with tempfile.TemporaryDirectory(prefix="benchbuild-degree-memory-") as temporary:
        work = Path(temporary)
        for size in args.sizes:
            de, en = write_pool(pairs, size, work / f"pool-{size}")
            degree = [str(BENCHBUILD), "degree", "--train-src", str(react / "valid.de"), "--pool", str(de),
                      "--lowercase", "--min-word-count", "1", "--out", str(work / f"degree-{size}.tsv"), *engine]
            kib, wall, said = peak(degree, work)
            results["degree"].append(kib)
            print(f"degree, {size:>9,} lines: peak {kib / 1024:7.1f} MiB, {wall:6.1f} s ({said.strip()})")
            react_build = [str(BENCHBUILD), "build-react", "--out", str(work / f"react-{size}"),
                           "--cache-dir", str(work / f"cache-{size}"), "--train-src", str(react / "valid.de"),
                           "--train-tgt", str(react / "valid.en"), "--pool-src", str(de), "--pool-tgt", str(en),
                           "--lowercase", "--min-word-count", "1", "--pool-size", "60000", "--drop-top", "60000",
                           "--band", "1", "--sample", "1", "--allow-small", "--device", "cpu", *engine]
            kib, wall, said = peak(react_build, work)
            results["build-react candidate stage"].append(kib)
            print(f"build-react candidate stage, {size:>9,} lines: peak {kib / 1024:7.1f} MiB, {wall:6.1f} s "
                  f"({said.strip()[:150]})")
    small, large = args.sizes
    for name, (first, second) in results.items():
        verdict = "ok" if second <= 1.3 * first else "ABOVE the 1.3x goal"
        print(f"{name}: {large:,} lines / {small:,} lines peak = {second / first:.3f} ({verdict})")


if __name__ == "__main__":
    main()
