"""Croissant 1.0 metadata (MLCommons' JSON-LD format for datasets) of a published benchmark, and its check.

`croissant_metadata` builds the JSON-LD itself, from the benchmark's facts: one FileObject per parquet split file
(with its sha256) and one RecordSet per split whose fields are that split's own columns, read from the file's
columns; the Responsible-AI fields come from `benchbuild.publishing.responsible_ai`. `check_croissant` loads the
written file with `mlcroissant` (the `publish` extra): no validation error or warning is allowed, and for every split
the records it yields must equal the benchmark's rows, in order.
"""

from __future__ import annotations

import json
import logging
import math
import re
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import datasets
import pyarrow as pa

from benchbuild.errors import BenchbuildError

CONFORMS_TO = "http://mlcommons.org/croissant/1.0"
# The standard @context of Croissant 1.0 (mlcroissant warns about any other).
CONTEXT: dict[str, Any] = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/",
    "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "samplingRate": "cr:samplingRate",
    "sc": "https://schema.org/",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
}

# The licence ids benchbuild's cards use, as SPDX identifiers (their URLs are case-sensitive).
SPDX = {"bsd-3-clause": "BSD-3-Clause", "mit": "MIT", "apache-2.0": "Apache-2.0", "cc-by-2.0": "CC-BY-2.0",
        "cc-by-4.0": "CC-BY-4.0", "cc-by-sa-4.0": "CC-BY-SA-4.0", "cc-by-nc-4.0": "CC-BY-NC-4.0",
        "cc-by-nc-nd-4.0": "CC-BY-NC-ND-4.0", "cc0-1.0": "CC0-1.0"}

COLUMN_DESCRIPTIONS = {"id": "The row's id, stable across rebuilds of the benchmark.",
                       "source": "The input sequence.", "target": "The reference output sequence."}


def data_type(arrow_type: pa.DataType, where: str) -> str:
    """The Croissant data type of a column's Arrow type (a column holding only nulls is described as text)."""
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type) or pa.types.is_null(arrow_type):
        return "sc:Text"
    if pa.types.is_boolean(arrow_type):
        return "sc:Boolean"
    if pa.types.is_integer(arrow_type):
        return "sc:Integer"
    if pa.types.is_floating(arrow_type):
        return "sc:Float"
    raise BenchbuildError(f"{where} holds {arrow_type}: croissant.json describes text, integer, float and boolean "
                          "columns only")


def spdx_licence(card_licence: str) -> str:
    """The card's licence as Croissant recommends it: the SPDX URL of a known id, else the card's text."""
    spdx = SPDX.get(card_licence.strip().lower())
    return f"https://spdx.org/licenses/{spdx}.html" if spdx else card_licence


def croissant_metadata(*, name: str, description: str, licence: str, languages: Sequence[str],
                       keywords: Sequence[str], cite_as: str, published: date, files: Mapping[str, tuple[str, str]],
                       columns: Mapping[str, pa.Schema], rai: Mapping[str, Any],
                       author_fields: Mapping[str, Any]) -> dict[str, Any]:
    """The croissant.json of a published benchmark. `files` maps each split to its parquet file (path relative to
    the folder, sha256); `columns` to its own columns (the record set lists these, in order); `author_fields` holds
    what only the author can give (`url`, `creator`), placeholders included."""
    distribution, record_sets = [], []
    for split, (path, sha256) in files.items():
        distribution.append({"@type": "cr:FileObject", "@id": path, "name": path, "contentUrl": path,
                             "encodingFormat": "application/x-parquet", "sha256": sha256})
        fields = []
        for column in columns[split]:
            field = {"@type": "cr:Field", "@id": f"{split}/{column.name}", "name": column.name,
                     "dataType": data_type(column.type, f"split {split}, column {column.name!r},"),
                     "source": {"fileObject": {"@id": path}, "extract": {"column": column.name}}}
            if column.name in COLUMN_DESCRIPTIONS:
                field["description"] = COLUMN_DESCRIPTIONS[column.name]
            fields.append(field)
        record_sets.append({"@type": "cr:RecordSet", "@id": split, "name": split,
                            "description": f"The `{split}` split, one record a row, in the benchmark's order.",
                            "field": fields})
    return {
        "@context": CONTEXT,
        "@type": "sc:Dataset",
        "conformsTo": CONFORMS_TO,
        "name": name,
        "description": description,
        **author_fields,
        "license": licence,
        "inLanguage": list(languages),
        "keywords": list(keywords),
        "version": "1.0.0",
        "datePublished": published.isoformat(),
        "citeAs": cite_as,
        **rai,
        "distribution": distribution,
        "recordSet": record_sets,
    }


def check_croissant(path: Path, splits: Mapping[str, datasets.Dataset], advance: Callable[..., None]) -> None:
    """Load the croissant.json at `path` with mlcroissant and compare, split by split, the records it yields with
    the rows of `splits` (the benchmark's, each with its own columns). A validation error, a warning (an issue or a
    logged one, such as a non-standard @context), a `rai:` field mlcroissant does not read as written, a missing or
    extra record, or a value that differs is a BenchbuildError naming it. `advance(amount=N)` reports rows checked."""
    import mlcroissant

    with _logged_warnings("absl") as logged:
        try:
            dataset = mlcroissant.Dataset(jsonld=str(path))
        except mlcroissant.ValidationError as error:
            raise BenchbuildError(f"mlcroissant rejects croissant.json: {_one_line(error)}") from None
        warnings = sorted(dataset.metadata.ctx.issues.warnings) + logged
        if warnings:
            raise BenchbuildError(f"mlcroissant warns about croissant.json: {_one_line('; '.join(warnings))}")
        _check_responsible_ai(dataset.metadata, json.loads(Path(path).read_text(encoding="utf-8-sig")))
        for name, split in splits.items():
            _check_records(dataset.records(record_set=name), name, split, advance)
        if logged:
            raise BenchbuildError(f"mlcroissant warns while reading croissant.json: {_one_line('; '.join(logged))}")


def _check_responsible_ai(metadata: Any, written: Mapping[str, Any]) -> None:
    """Every `rai:` field as mlcroissant reads it (`rai:dataCollection` is its `data_collection`) equals the text
    written: the fields are machine-readable, not just present."""
    for key, value in written.items():
        if key.startswith("rai:"):
            attribute = re.sub(r"(?<!^)(?=[A-Z])", "_", key[len("rai:"):]).lower()
            if getattr(metadata, attribute, None) != value:
                raise BenchbuildError(f"mlcroissant does not read croissant.json's {key} as written (it reads "
                                      f"{getattr(metadata, attribute, None)!r})")


def _check_records(records: Iterable[Mapping[str, Any]], name: str, split: datasets.Dataset,
                   advance: Callable[..., None]) -> None:
    """The records of split `name`'s record set equal its rows, in order."""
    records = iter(records)
    number = 0
    for batch in split.data.table.to_batches(8192):
        for row in batch.to_pylist():
            number += 1
            record = next(records, None)
            if record is None:
                raise BenchbuildError(f"croissant.json yields {number - 1:,} records of split {name} but it has "
                                      f"{len(split):,} rows")
            for column, value in row.items():
                found = _plain(record.get(f"{name}/{column}"))
                if found != _plain(value):
                    raise BenchbuildError(f"croissant.json's record {number:,} of split {name} holds {column} = "
                                          f"{found!r} where the benchmark's row holds {value!r}")
        advance(amount=batch.num_rows)
    if next(records, None) is not None:
        raise BenchbuildError(f"croissant.json yields more records of split {name} than its {len(split):,} rows")


@contextmanager
def _logged_warnings(logger_name: str) -> Iterator[list[str]]:
    """Collect the warnings a library logs (mlcroissant logs through absl) instead of letting them print."""
    messages: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: messages.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger(logger_name)
    logger.addHandler(handler)
    propagate, logger.propagate = logger.propagate, False
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def _plain(value: Any) -> Any:
    """A record's or a row's value as plain Python: text decoded, numpy scalars unwrapped, NaN as a null."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if hasattr(value, "item") and not isinstance(value, (str, list, dict)):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _one_line(error: Any) -> str:
    return " ".join(str(error).split())[:600]
