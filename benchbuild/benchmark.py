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
from benchbuild.errors import BenchbuildError
from benchbuild.fingerprint import input_fingerprint, table_fingerprint
from benchbuild.progress import quiet_datasets
from benchbuild.toml_schema import check_table

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
    def from_json(cls, text: str, where: str = "build.json") -> "BuildInfo":
        """The BuildInfo `to_json` wrote; text that is not one (not JSON, a missing or unknown key, a value of the
        wrong type) is a BenchbuildError naming `where` and the key."""
        try:
            raw = json.loads(text)
        except ValueError as error:
            raise BenchbuildError(f"{where} is not valid JSON ({error})") from None
        return cls(**check_table(cls, raw, where))


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
    # The card template when it is not the family's own: `imported.md.j2` for a benchmark `benchbuild import` wrote.
    template: str = ""


SplitData = datasets.Dataset | Sequence[Mapping[str, Any]]


def as_dataset(data: SplitData, features: datasets.Features | None = None) -> datasets.Dataset:
    """A Dataset from rows (or the Dataset itself), fingerprinted by content so saved files are reproducible."""
    if isinstance(data, datasets.Dataset):
        dataset = data
    else:
        names = data[0].keys() if data else (features or {}).keys()  # no rows: the features' columns, empty
        columns = {key: [row[key] for row in data] for key in names}
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
    """The BuildInfo of a built benchmark folder; a damaged `build.json` is a BenchbuildError naming it and the key,
    and saying to rebuild the folder."""
    path = Path(folder) / "build.json"
    if not Path(folder).is_dir():
        raise FileNotFoundError(f"{folder} is missing: no such benchmark folder" if not Path(folder).exists()
                                else f"{folder} is a file, not a benchmark folder")
    if not path.is_file():
        inside = _benchmarks_inside(Path(folder))
        if inside:
            shown = ", ".join(str(Path(folder) / name) for name in inside[:3])
            more = f" and {len(inside) - 3} more" if len(inside) > 3 else ""
            raise FileNotFoundError(f"{folder} is a folder of {len(inside)} benchmark"
                                    f"{'s' if len(inside) > 1 else ''}, not one benchmark: give one of them, e.g. "
                                    f"{shown}{more}")
        raise FileNotFoundError(f"{folder} is not a benchbuild benchmark: {path} is missing")
    try:
        return BuildInfo.from_json(path.read_text(encoding="utf-8-sig", errors="replace"), str(path))
    except BenchbuildError as error:
        raise BenchbuildError(f"{error}: the benchmark's build record is damaged; {_rebuild(Path(folder))}") from None


def _benchmarks_inside(folder: Path) -> list[str]:
    """The names of the benchmark folders (with a `build.json`) directly inside `folder`, sorted: `build-scan --out`
    writes one per splitting under its folder."""
    if not folder.is_dir():
        return []
    return sorted(entry.name for entry in folder.iterdir() if (entry / "build.json").is_file())


# Every split of a benchmark holds these text columns (train, eval, score and stats read them).
TEXT_COLUMNS = ("source", "target")


def load_splits(folder: str | Path) -> datasets.DatasetDict:
    """Load a benchmark folder written in any format as a DatasetDict. A split file that cannot be read (truncated,
    a cut line), holds other than the rows its `build.json` records (their count, or their content: each split's
    content fingerprint is checked against the one recorded at build time, so a reference edited by hand is refused,
    not scored), or lacks a `source` or `target` text column is a BenchbuildError naming the file and saying to rebuild
    the folder."""
    folder = Path(folder)
    files, read = _split_files(folder)
    recorded = _recorded_rows(folder)
    fingerprints = _recorded_fingerprints(folder)
    splits = {}
    for name, path in files.items():
        try:
            with quiet_datasets():
                split = read(path)
        except Exception as error:  # noqa: BLE001 - pyarrow, datasets and json raise many kinds for one damaged file
            raise BenchbuildError(f"{path} cannot be read ({_damage(path, error)}): the file is truncated or "
                                  f"corrupt; {_rebuild(folder)}") from None
        if name in recorded and len(split) != recorded[name]:
            raise BenchbuildError(f"{path} holds {len(split):,} rows but {folder / 'build.json'} records "
                                  f"{recorded[name]:,}: the file is truncated or was changed; {_rebuild(folder)}")
        _check_columns(split, path, folder)
        if name in fingerprints and not _same_rows(split, fingerprints[name]):
            raise BenchbuildError(f"{path}: its rows are not those {folder / 'build.json'} records (split {name!r}: "
                                  f"same count, other content): the file was changed after it was built; "
                                  f"{_rebuild(folder)}")
        splits[name] = split
    return datasets.DatasetDict(splits)


def split_rows_as_dicts(split) -> list[dict[str, Any]]:
    """A split's rows as dicts: a `datasets.Dataset` converted in one Arrow call (iterating it row by row takes 20
    times as long: 0.27 s for SCAN's 21,890 train rows), any other sequence of rows as it is."""
    return split.to_list() if isinstance(split, datasets.Dataset) else list(split)


def split_column(split, column: str) -> list[Any]:
    """One column of a split as a list: a `datasets.Dataset`'s read from Arrow in one call (its `split[column]` yields
    the values one formatted row at a time: 0.3 s for SCAN's 21,890 train sources), else each row's value."""
    if isinstance(split, datasets.Dataset):
        return split.data.column(column).to_pylist()
    return [row[column] for row in split]


def _split_files(folder: Path):
    """Each split's file (or, for the arrow layout, folder) and the function that reads one."""
    if (folder / "dataset_dict.json").is_file():
        return {name: folder / name for name in _arrow_split_names(folder)}, _read_arrow
    data = folder / "data"
    parquet = sorted(data.glob("*-00000-of-00001.parquet"))
    jsonl = sorted(data.glob("*.jsonl"))
    if parquet:
        return {path.name.split("-00000-of-")[0]: path for path in parquet}, _read_parquet
    if jsonl:
        return {path.stem: path for path in jsonl}, _read_jsonl
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is missing: no such benchmark folder" if not folder.exists()
                                else f"{folder} is a file, not a benchmark folder")
    raise FileNotFoundError(f"{folder} holds no benchmark splits (no dataset_dict.json, data/*.parquet or data/*.jsonl)")


def _arrow_split_names(folder: Path) -> list[str]:
    path = folder / "dataset_dict.json"
    try:
        names = json.loads(path.read_text(encoding="utf-8-sig"))["splits"]
    except (ValueError, KeyError, TypeError) as error:
        raise BenchbuildError(f"{path} cannot be read ({_damage(path, error)}): the file is truncated or corrupt; "
                              f"{_rebuild(folder)}") from None
    if not isinstance(names, list) or not all(isinstance(name, str) and name and Path(name).name == name
                                              and name not in (".", "..") for name in names):
        raise BenchbuildError(f"{path} lists splits {names!r}, not plain split names: the file is corrupt; "
                              f"{_rebuild(folder)}")
    return names


def _read_arrow(path: Path) -> datasets.Dataset:
    state = path / "state.json"
    try:
        empty = json.loads(state.read_text(encoding="utf-8")).get("_data_files") == []
    except (OSError, ValueError, AttributeError):
        empty = False
    if empty:  # a split of no rows is saved without a data file, which `load_from_disk` cannot read back
        features = datasets.DatasetInfo.from_directory(str(path)).features
        if not features:
            features = datasets.Features({name: datasets.Value("string") for name in TEXT_COLUMNS})
        return datasets.Dataset(features.arrow_schema.empty_table())
    return datasets.Dataset.load_from_disk(str(path))


def _read_parquet(path: Path) -> datasets.Dataset:
    return datasets.Dataset(pq.read_table(path))


def _read_jsonl(path: Path) -> datasets.Dataset:
    if path.stat().st_size == 0:  # an empty split: `datasets` cannot infer a schema from no line
        return datasets.Dataset(pa.table({name: pa.array([], pa.string()) for name in TEXT_COLUMNS}))
    return datasets.Dataset.from_json(str(path))


def _damage(path: Path, error: BaseException) -> str:
    """What is wrong with a file that did not load: the first line that is not a JSON object for a JSON Lines
    file, else the library's message (without its class name)."""
    if path.suffix == ".jsonl":
        with open(path, encoding="utf-8-sig", errors="replace") as handle:
            for number, line in enumerate(handle, start=1):
                try:
                    row = json.loads(line)
                except ValueError:
                    row = None
                if not isinstance(row, dict):
                    return f"line {number} is not a complete JSON object"
    return " ".join(str(error).split())[:200] or "unreadable"


def _recorded_rows(folder: Path) -> dict[str, int]:
    """The row count `build.json` records for each split (none when it records none: a folder another tool
    wrote)."""
    try:
        splits = json.loads((folder / "build.json").read_text(encoding="utf-8-sig")).get("splits", {})
        return {name: int(value["rows"]) for name, value in splits.items()}
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return {}


def _same_rows(split: datasets.Dataset, recorded: str) -> bool:
    """Whether `split` holds the rows whose `split_fingerprint` is `recorded`; columns null in every row do not count
    (a published folder gives every split one schema: `publish` adds the columns other splits have, empty)."""
    if len(split) == 0 or split_fingerprint(split) == recorded:
        return True  # no rows: nothing to differ (an empty JSON Lines file keeps no column names)
    empty = [column for column in split.column_names if split.data.column(column).null_count == len(split)]
    return bool(empty) and len(split) > 0 and split_fingerprint(split.remove_columns(empty)) == recorded


def _recorded_fingerprints(folder: Path) -> dict[str, str]:
    """The content fingerprint `build.json` records for each split (`split_fingerprint` of the rows as built)."""
    try:
        splits = json.loads((folder / "build.json").read_text(encoding="utf-8-sig")).get("splits", {})
        return {name: str(value["fingerprint"]) for name, value in splits.items() if value.get("fingerprint")}
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return {}


def _check_columns(split: datasets.Dataset, path: Path, folder: Path) -> None:
    for column in TEXT_COLUMNS:
        feature = split.features.get(column)
        if not (isinstance(feature, datasets.Value) and feature.dtype in ("string", "large_string")):
            found = "no" if feature is None else f"a non-text ({feature})"
            raise BenchbuildError(f"{path} has {found} {column!r} column (columns: {', '.join(split.column_names)}): "
                                  f"a benchmark split holds {' and '.join(TEXT_COLUMNS)} text columns; give a folder "
                                  f"a benchbuild build command wrote, or {_rebuild(folder)}")


def _rebuild(folder: Path) -> str:
    """How to replace a damaged benchmark folder: its build command again (the one `build.json` recorded, when it
    can still be read), with --overwrite."""
    try:
        command = json.loads((folder / "build.json").read_text(encoding="utf-8-sig")).get("command_line")
    except (OSError, ValueError, AttributeError):
        command = None
    if isinstance(command, str) and command.startswith(("benchbuild build-", "benchbuild import ")):
        return f"rebuild it with --overwrite (build.json records the command that wrote it: {command})"
    if isinstance(command, str):  # build.json is readable enough for --overwrite to recognise the folder
        return f"rebuild {folder} (benchbuild build-... --overwrite)"
    return f"delete {folder} (its build.json is unreadable) and rebuild it"
