"""What `build-lake-baroni-fr` is told: the pairs file and the sizes of the split (each field is its option)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer

from benchbuild.errors import BenchbuildError
from benchbuild.options import EncodingErrorsOption, SeedOption


@dataclass(frozen=True)
class LakeBaroniParameters:
    """Every option of `build-lake-baroni-fr` but where and how to save."""

    pairs: Annotated[Optional[Path], typer.Option(
        "--pairs", help="The English–French pairs file: one 'English<TAB>French' pair a line (Tatoeba's "
        "eng-fra.txt; a third column such as the attribution is ignored).")] = None
    train_size: Annotated[int, typer.Option("--train-size", min=1, help="Pairs drawn (seeded) into train; the rest "
                                            "of the filtered pairs are the test split.")] = 10_000
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Longest sentence kept, in tokens after "
                                            "normalisation (punctuation counts), on either side.")] = 9
    dax_repetitions: Annotated[int, typer.Option("--dax-repetitions", min=0, help="Copies of 'i am daxy .' → "
                                                 "'je suis daxiste .' added to train.")] = 1_000
    seed: SeedOption = 0
    encoding_errors: EncodingErrorsOption = "strict"

    def check(self) -> None:
        """Fail before any work on a missing pairs file."""
        if self.pairs is None:
            raise BenchbuildError("--pairs is required: the tab-separated English–French pairs file (Tatoeba's "
                                  "eng-fra.txt)")
        if not self.pairs.is_file():
            raise BenchbuildError(f"--pairs `{self.pairs}` does not exist or is not a file")
