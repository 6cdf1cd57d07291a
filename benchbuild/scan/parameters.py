"""What `build-scan` is told: which splittings, the seed, and an optional SCAN checkout (each field is its option)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer

from benchbuild.errors import BenchbuildError, did_you_mean
from benchbuild.options import SeedOption
from benchbuild.scan.official import check_official


@dataclass(frozen=True)
class ScanParameters:
    """The SCAN splittings to build and how; every field is a `build-scan` option."""

    split: Annotated[Optional[list[str]], typer.Option("--split", help="A splitting to build (repeatable); default: all. "
                                                       "An unknown name gets the nearest valid one.")] = None
    seed: SeedOption = 0
    official: Annotated[Optional[Path], typer.Option("--official", help="A SCAN checkout: take the canonical train/test "
                                                     "files as they are, rows in the files' order, instead of applying "
                                                     "the rule (simple, length, addprim, template).")] = None

    def names(self) -> list[str]:
        """The requested splittings in canonical order (all when none is named); an unknown name is refused with the nearest valid one."""
        from benchbuild.scan.splits import splittings  # numpy: not at the command line's start-up

        valid = list(splittings())
        if not self.split:
            return valid
        unknown = [name for name in self.split if name not in valid]
        if unknown:
            families = dict.fromkeys(name.split("_")[0] for name in valid)
            raise BenchbuildError(f"unknown SCAN split {unknown[0]!r}: {did_you_mean(unknown[0], valid)}({len(valid)} "
                                  f"splittings, in families {', '.join(name + '*' for name in families)}: the SCAN "
                                  "table of README.md names them all)")
        requested = set(self.split)
        return [name for name in valid if name in requested]

    def check(self) -> None:
        """Fail before any work on an unknown splitting or a checkout that lacks a requested canonical file."""
        names = self.names()
        if self.official is not None:
            check_official(Path(self.official), names)
