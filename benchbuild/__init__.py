"""benchbuild: compositional-generalization benchmarks as Hugging Face datasets, and a model zoo to score on them.

Importing the package registers the zoo's models with transformers' Auto classes, so a checkpoint folder loads
with `AutoModelForSeq2SeqLM.from_pretrained(path)`. The `benchbuild` command line skips that at start-up (it costs
seconds: torch and transformers) and registers on demand in the commands that load models.
"""

import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

try:
    __version__ = version("benchbuild")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]


def _started_as_the_command_line() -> bool:
    program = sys.argv[0] if sys.argv else ""
    return Path(program).name == "benchbuild" or program == "-m"


if not _started_as_the_command_line():
    from benchbuild.zoo import register as _register

    _register()
