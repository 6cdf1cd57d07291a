"""Data cards: render a benchmark's README.md (HF YAML front matter + sections) from its build facts and a template.

`benchbuild.benchmark` calls this module to write a card; this module knows a benchmark only by the three things
a card is made of (`CardSubject`), so the dependency runs one way.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Protocol

import datasets
import jinja2
import pyarrow as pa
import pyarrow.compute as pc
import yaml


class CardSubject(Protocol):
    """What a card is rendered from: a built benchmark's splits, its BuildInfo and its CardFacts."""

    splits: Mapping[str, datasets.Dataset]
    info: Any
    card: Any


def data_files(format: str, split_names: Iterable[str]) -> dict[str, str]:
    """The card's `configs` data_files pattern of each split, relative to the benchmark folder."""
    pattern = {
        "arrow": "{name}/data-*.arrow",
        "parquet": "data/{name}-00000-of-00001.parquet",
        "jsonl": "data/{name}.jsonl",
    }[format]
    return {name: pattern.format(name=name) for name in split_names}


def size_category(rows: int) -> str:
    """The Hub's size_categories bucket for a number of rows."""
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
                        (10_000_000, "1M<n<10M")):
        if rows < limit:
            return name
    return "10M<n<100M"


def _arrow_dtype(feature: Any) -> Any:
    dtype = getattr(feature, "dtype", None)
    return dtype if dtype is not None else str(feature)


def split_statistics(benchmark: CardSubject) -> dict[str, dict[str, Any]]:
    """Per split: rows, distinct sources, mean/max source and target length in whitespace tokens."""
    stats = {}
    for name, dataset in benchmark.splits.items():
        table = dataset.data.table
        entry: dict[str, Any] = {"rows": table.num_rows}
        for column in ("source", "target"):
            if column in table.column_names and table.num_rows:
                total, longest = 0, 0
                for chunk in table.column(column).chunks:
                    for start in range(0, len(chunk), 65536):
                        lengths = pc.list_value_length(pc.utf8_split_whitespace(chunk.slice(start, 65536)))
                        total += pc.sum(lengths).as_py() or 0
                        longest = max(longest, pc.max(lengths).as_py() or 0)
                entry[f"{column}_tokens_mean"] = round(total / table.num_rows, 2)
                entry[f"{column}_tokens_max"] = longest
        if "source" in table.column_names:
            entry["distinct_sources"] = pc.count_distinct(table.column("source")).as_py()
        stats[name] = entry
    return stats


def arrow_num_bytes(dataset: datasets.Dataset) -> int:
    """The size of a split as an Arrow IPC stream: the Hub's `num_bytes`, a function of the rows and schema only (not
    of how the table happens to be chunked or mapped in memory), so the same build gives the same card."""
    table, window = dataset.data.table, 65_536
    sink = pa.MockOutputStream()  # counts the bytes, keeps none
    with pa.ipc.new_stream(sink, table.schema) as writer:
        # Fixed windows, each copied into fresh arrays (`take`): memory stays bounded, and the size depends neither
        # on how the table is chunked nor on slice offsets (a zero-copy slice can serialize a few bytes differently).
        for start in range(0, table.num_rows, window):
            writer.write_table(table.take(pa.array(range(start, min(start + window, table.num_rows)), pa.int64())))
    return sink.size()


def front_matter(benchmark: CardSubject) -> dict[str, Any]:
    """The Hugging Face YAML header: pretty_name, license, language, task_categories, sizes, configs, dataset_info."""
    splits = benchmark.splits
    total = sum(len(d) for d in splits.values())
    first = next(iter(splits.values()))
    sizes = {name: arrow_num_bytes(dataset) for name, dataset in splits.items()}
    return {
        "pretty_name": benchmark.card.pretty_name,
        "license": benchmark.card.license,
        "language": list(benchmark.card.languages),
        "task_categories": list(benchmark.card.task_categories),
        "size_categories": [size_category(total)],
        "configs": [{
            "config_name": "default",
            "data_files": [{"split": name, "path": path}
                           for name, path in data_files(benchmark.info.format, splits).items()],
        }],
        "dataset_info": {
            "features": [{"name": name, "dtype": _arrow_dtype(feature)} for name, feature in first.features.items()],
            "splits": [{"name": name, "num_bytes": size, "num_examples": len(splits[name])}
                       for name, size in sizes.items()],
            "dataset_size": sum(sizes.values()),
        },
    }


def _environment() -> jinja2.Environment:
    # The templates ship inside the package (benchbuild/data_cards, also reachable as the checkout's data_cards/).
    return jinja2.Environment(loader=jinja2.PackageLoader("benchbuild", "data_cards"), undefined=jinja2.StrictUndefined,
                              keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)


def card_template(name: str) -> jinja2.Template:
    """A card template of the package (`data_cards/NAME`): a benchmark family's, or `model_card.md.j2`, the one a
    training run's README.md is rendered from (`benchbuild.model_card`)."""
    return _environment().get_template(name)


def render_card(benchmark: CardSubject) -> str:
    """The full README.md of a benchmark: YAML front matter, then the sections of its family's template (or of the
    card's own `template`, e.g. `imported.md.j2`)."""
    header = yaml.safe_dump(front_matter(benchmark), sort_keys=False, allow_unicode=True, width=1000)
    template = card_template(benchmark.card.template or f"{benchmark.info.family}.md.j2")
    body = template.render(info=benchmark.info, card=benchmark.card, stats=split_statistics(benchmark))
    return f"---\n{header}---\n\n{body.strip()}\n"
