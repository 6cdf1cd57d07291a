"""Build SCAN benchmarks: generate the grammar's examples and apply each requested split rule (or read the canonical
files), one `Benchmark` per splitting; the card's prose is in `data_cards/scan.md.j2`."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import datasets

from benchbuild.benchmark import Benchmark, BuildInfo, CardFacts
from benchbuild.progress import progress_bar
from benchbuild.scan.grammar import Example, generate
from benchbuild.scan.official import official_files, read_scan_file
from benchbuild.scan.parameters import ScanParameters
from benchbuild.scan.splits import SPLITTINGS, Splitting

FEATURES = datasets.Features({"id": datasets.Value("string"), "source": datasets.Value("string"),
                              "target": datasets.Value("string")})


def rows(examples: list[Example], position: dict[str, int]) -> list[dict[str, str]]:
    """Rows with ids stable across rebuilds: the command's place in the grammar, plus a copy number for repeats."""
    seen: dict[str, int] = {}
    out = []
    for example in examples:
        copy = seen.get(example.command, 0)
        seen[example.command] = copy + 1
        suffix = f"-copy{copy}" if copy else ""
        out.append({"id": f"scan-{position[example.command]:05d}{suffix}", "source": example.command,
                    "target": example.actions})
    return out


def load_official(root: Path, name: str) -> Splitting:
    files = official_files(name)
    assert files is not None
    return Splitting(name=name, splits={split: read_scan_file(root / relative) for split, relative in files.items()},
                     rules={})


def benchmark_of(splitting: Splitting, position: dict[str, int], seed: int, official: Path | None) -> Benchmark:
    """A Splitting as a Benchmark with its BuildInfo and card facts."""
    files = official_files(splitting.name) if official is not None else None
    inputs = {relative: official / relative for relative in files.values()} if files else {}
    parameters = {"splitting": splitting.name, "source": "official files" if files else "grammar + rule"}
    info = BuildInfo.with_inputs("scan", f"scan/{splitting.name}", parameters,
                                 seed if splitting.sampled and not files else None, inputs)
    card = CardFacts(
        pretty_name=f"SCAN ({splitting.name})",
        rules=splitting.rules,
        languages=["en"],
        license="bsd-3-clause",
        counts=dict(splitting.counts),
        extra={"sampled": splitting.sampled and not files, "official": bool(files), "official_files": files or {}},
    )
    split_rows = {split: rows(examples, position) for split, examples in splitting.splits.items()}
    return Benchmark.from_splits(split_rows, info, card, features=FEATURES)


def build_scan(parameters: ScanParameters, *, progress: bool = False) -> Iterator[tuple[str, Benchmark]]:
    """Each requested SCAN splitting as `(name, Benchmark)`, in canonical order, built as it is asked for."""
    parameters.check()
    official = Path(parameters.official) if parameters.official is not None else None
    names = parameters.names()
    examples = generate()
    position = {e.command: i for i, e in enumerate(examples)}
    with progress_bar("SCAN splits", total=len(names), enabled=progress) as advance:
        for name in names:
            if official is not None and official_files(name) is not None:
                splitting = load_official(official, name)
            else:
                splitting = SPLITTINGS[name](examples, parameters.seed)
            yield name, benchmark_of(splitting, position, parameters.seed, official)
            advance(name)
