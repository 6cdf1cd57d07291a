"""The on-disk benchmark contract: splits (Hugging Face datasets) + BuildInfo + a generated data card.

`Benchmark.save` writes, atomically, a folder with `README.md` (the card), `build.json` (the BuildInfo) and the
splits in one of three formats; `load_splits` reads any of them back as a `DatasetDict`.
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

import datasets
import pyarrow as pa
import pyarrow.parquet as pq

from benchbuild import __version__
from benchbuild.atomic import atomic_directory
from benchbuild.cards import render_card
from benchbuild.fingerprint import input_fingerprint, table_fingerprint
from benchbuild.progress import quiet_datasets

Format = Literal["arrow", "parquet", "jsonl"]
FORMATS: tuple[str, ...] = ("arrow", "parquet", "jsonl")
SPLIT_ORDER = ("train", "validation", "test", "cg_test")


@dataclass
class SplitInfo:
    """Row count and content fingerprint of one split."""

    rows: int
    fingerprint: str


@dataclass
class BuildInfo:
    """Everything needed to reproduce and check a build (the machine-readable half of the card)."""

    family: str
    name: str
    parameters: dict[str, Any]
    seed: int | None = None
    inputs: dict[str, str] = field(default_factory=dict)
    command_line: str = field(default_factory=lambda: shlex.join(["benchbuild", *sys.argv[1:]]))
    benchbuild_version: str = __version__
    format: str = "arrow"
    splits: dict[str, SplitInfo] = field(default_factory=dict)

    @classmethod
    def with_inputs(cls, family: str, name: str, parameters: Mapping[str, Any], seed: int | None,
                    inputs: Mapping[str, str | Path]) -> "BuildInfo":
        """A BuildInfo whose `inputs` maps each input's label to the sha256 of its file or folder."""
        fingerprints = {label: input_fingerprint(path) for label, path in inputs.items()}
        return cls(family=family, name=name, parameters=dict(parameters), seed=seed, inputs=fingerprints)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, ensure_ascii=False, sort_keys=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "BuildInfo":
        raw = json.loads(text)
        raw["splits"] = {name: SplitInfo(**value) for name, value in raw.get("splits", {}).items()}
        return cls(**raw)


@dataclass
class CardFacts:
    """What the data card says beyond the BuildInfo: the card's metadata, the builder's own counts and data.

    A family's template (`data_cards/<family>.md.j2`) writes its prose itself, from the BuildInfo and `extra`
    (free context: numbers and names the sentences need). `summary`, `citation` and `rules` (a split or stage →
    the sentence that says how it was made) fill the base template's sections where a template does not;
    `counts` holds named counts of the build (dropped lines, rows per rule…).
    """

    pretty_name: str
    languages: list[str]
    license: str
    summary: str = ""
    rules: dict[str, str] = field(default_factory=dict)
    citation: str = ""
    task_categories: list[str] = field(default_factory=lambda: ["text2text-generation"])
    counts: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


SplitData = datasets.Dataset | Sequence[Mapping[str, Any]]


def as_dataset(data: SplitData, features: datasets.Features | None = None) -> datasets.Dataset:
    """A Dataset from rows (or the Dataset itself), fingerprinted by content so saved files are reproducible."""
    if isinstance(data, datasets.Dataset):
        dataset = data
    else:
        columns = {key: [row[key] for row in data] for key in (data[0].keys() if data else [])}
        table = pa.table(columns) if features is None else pa.Table.from_pydict(columns, schema=features.arrow_schema)
        dataset = datasets.Dataset(table)
    return dataset


def split_fingerprint(dataset: datasets.Dataset) -> str:
    """Fingerprint of a split's rows in order, computed batch by batch so large splits need little memory."""
    if dataset._indices is not None:
        with quiet_datasets():
            dataset = dataset.flatten_indices()
    return table_fingerprint(dataset.data.table)


@dataclass
class Benchmark:
    """A built benchmark: named splits, how they were built, and what the card says about them."""

    splits: dict[str, datasets.Dataset]
    info: BuildInfo
    card: CardFacts

    @classmethod
    def from_splits(cls, splits: Mapping[str, SplitData], info: BuildInfo, card: CardFacts,
                    features: datasets.Features | None = None) -> "Benchmark":
        ordered = sorted(splits, key=lambda name: (SPLIT_ORDER.index(name) if name in SPLIT_ORDER else 99, name))
        built = {}
        for name in ordered:
            dataset = as_dataset(splits[name], features)
            if dataset._indices is not None:
                with quiet_datasets():
                    dataset = dataset.flatten_indices()
            fingerprint = split_fingerprint(dataset)
            # The datasets library would otherwise store a random fingerprint in state.json.
            built[name] = datasets.Dataset(dataset.data, split=datasets.NamedSplit(name), fingerprint=fingerprint[:16])
            info.splits[name] = SplitInfo(rows=len(dataset), fingerprint=fingerprint)
        return cls(splits=built, info=info, card=card)

    def save(self, out: str | Path, format: Format = "arrow", overwrite: bool = False) -> Path:
        """Write the benchmark folder atomically: a crash leaves the old folder (or none), never a partial one."""
        if format not in FORMATS:
            raise ValueError(f"unknown format {format!r}: choose one of {', '.join(FORMATS)}")
        self.info.format = format
        out = Path(out)
        with atomic_directory(out, overwrite=overwrite) as tmp:
            _write_splits(self.splits, tmp, format)
            (tmp / "build.json").write_text(self.info.to_json(), encoding="utf-8")
            (tmp / "README.md").write_text(render_card(self), encoding="utf-8")
        return out


def _write_splits(splits: Mapping[str, datasets.Dataset], folder: Path, format: str) -> None:
    if format == "arrow":
        # datasets writes no shard for an empty split (num_shards = min(rows, …)), which load_from_disk then rejects.
        empty = {name: 1 for name, dataset in splits.items() if len(dataset) == 0}
        with quiet_datasets():
            datasets.DatasetDict(splits).save_to_disk(str(folder), num_shards=empty or None)
        return
    data = folder / "data"
    data.mkdir()
    for name, dataset in splits.items():
        if format == "parquet":
            pq.write_table(dataset.data.table, data / f"{name}-00000-of-00001.parquet")
        else:
            with open(data / f"{name}.jsonl", "w", encoding="utf-8") as handle:
                for batch in dataset.data.table.to_batches(8192):
                    for row in batch.to_pylist():
                        handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def read_build_info(folder: str | Path) -> BuildInfo:
    """The BuildInfo of a built benchmark folder."""
    path = Path(folder) / "build.json"
    if not path.is_file():
        raise FileNotFoundError(f"{folder} is not a benchbuild benchmark: {path} is missing")
    return BuildInfo.from_json(path.read_text(encoding="utf-8"))


def load_splits(folder: str | Path) -> datasets.DatasetDict:
    """Load a benchmark folder written in any format as a DatasetDict."""
    folder = Path(folder)
    if (folder / "dataset_dict.json").is_file():
        with quiet_datasets():
            return datasets.load_from_disk(str(folder))
    data = folder / "data"
    parquet = sorted(data.glob("*-00000-of-00001.parquet"))
    jsonl = sorted(data.glob("*.jsonl"))
    if parquet:
        return datasets.DatasetDict({p.name.split("-00000-of-")[0]: datasets.Dataset(pq.read_table(p)) for p in parquet})
    if jsonl:
        with quiet_datasets():
            return datasets.DatasetDict({p.stem: datasets.Dataset.from_json(str(p)) for p in jsonl})
    raise FileNotFoundError(f"{folder} holds no benchmark splits (no dataset_dict.json, data/*.parquet or data/*.jsonl)")
