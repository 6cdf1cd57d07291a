"""Build SCAN benchmarks: generate the grammar's examples and apply each requested split rule (or read the canonical
files), one `Benchmark` per splitting; the card's prose is in `data_cards/scan.md.j2`. `already_built` tells a rerun
which splittings an earlier (interrupted) run of the same command finished. A splitting drawn from a shipped index
(`canonical_index`) records that file's sha256 among its inputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import datasets

from benchbuild.atomic import OutputExistsError
from benchbuild.benchmark import Benchmark, BuildInfo, CardFacts
from benchbuild.fingerprint import input_fingerprint
from benchbuild.progress import progress_bar
from benchbuild.scan.canonical_index import index_files
from benchbuild.scan.grammar import Example, generate
from benchbuild.scan.official import official_files, read_scan_file
from benchbuild.scan.parameters import ScanParameters
from benchbuild.scan.splits import Splitting, splittings

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


def _recorded(name: str, official: Path | None) -> tuple[dict[str, Any], dict[str, str]]:
    """The parameters and input fingerprints build.json records for splitting `name` (see `benchmark_of`)."""
    files = official_files(name) if official is not None else None
    if files and official is not None:
        return ({"splitting": name, "source": "official files"},
                {relative: input_fingerprint(official / relative) for relative in files.values()})
    shipped = index_files(name)
    parameters = {"splitting": name, "source": "grammar + canonical index" if shipped else "grammar + rule"}
    return parameters, {label: input_fingerprint(path) for label, path in shipped.items()}


def _complete(folder: Path, splits: dict[str, Any], format: str) -> bool:
    if not (folder / "README.md").is_file():
        return False
    if format == "arrow":
        return (folder / "dataset_dict.json").is_file() and all((folder / split).is_dir() for split in splits)
    suffix = "-00000-of-00001.parquet" if format == "parquet" else ".jsonl"
    return all((folder / "data" / f"{split}{suffix}").is_file() for split in splits)


def already_built(folder: Path, name: str, parameters: ScanParameters, format: str) -> bool:
    """Whether `folder` holds a complete build of splitting `name` with these options (a rerun keeps it); False when
    there is no folder. A folder built otherwise (or not by benchbuild) raises `OutputExistsError` naming it."""
    if not folder.exists():
        return False
    official = Path(parameters.official) if parameters.official is not None else None
    try:
        built = json.loads((folder / "build.json").read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        built = None
    if built is not None:
        recorded, inputs = _recorded(name, official)
        # The seed is recorded only for a sampled splitting: another seed builds the same rule-based one.
        if (built.get("family"), built.get("name"), built.get("parameters"), built.get("inputs"),
                built.get("format")) == ("scan", f"scan/{name}", recorded, inputs, format) \
                and built.get("seed") in (None, parameters.seed) and _complete(folder, built.get("splits", {}), format):
            return True
    raise OutputExistsError(f"{folder} already exists but was built with other options (--seed, --format or "
                            "--official) or is incomplete: pass --overwrite to replace it")


def benchmark_of(splitting: Splitting, position: dict[str, int], seed: int, official: Path | None) -> Benchmark:
    """A Splitting as a Benchmark with its BuildInfo and card facts."""
    files = official_files(splitting.name) if official is not None else None
    parameters, inputs = _recorded(splitting.name, official)
    info = BuildInfo(family="scan", name=f"scan/{splitting.name}", parameters=parameters,
                     seed=seed if splitting.sampled and not files else None, inputs=inputs)
    card = CardFacts(
        pretty_name=f"SCAN ({splitting.name})",
        rules=splitting.rules,
        languages=["en"],
        license="bsd-3-clause",
        counts=dict(splitting.counts),
        extra={"sampled": splitting.sampled and not files, "official": bool(files), "official_files": files or {},
               "canonical_index": [] if files else list(index_files(splitting.name))},
    )
    split_rows = {split: rows(examples, position) for split, examples in splitting.splits.items()}
    return Benchmark.from_splits(split_rows, info, card, features=FEATURES)


def build_scan(parameters: ScanParameters, *, progress: bool = False) -> Iterator[tuple[str, Benchmark]]:
    """Each requested SCAN splitting as `(name, Benchmark)`, in canonical order, built as it is asked for."""
    parameters.check()
    official = Path(parameters.official) if parameters.official is not None else None
    names = parameters.names()
    rules = splittings()
    examples = generate()
    position = {e.command: i for i, e in enumerate(examples)}
    with progress_bar("SCAN splits", total=len(names), enabled=progress) as advance:
        for name in names:
            if official is not None and official_files(name) is not None:
                splitting = load_official(official, name)
            else:
                splitting = rules[name](examples, parameters.seed)
            yield name, benchmark_of(splitting, position, parameters.seed, official)
            advance(name)
