"""benchbuild: compositional-generalization benchmarks as Hugging Face datasets, and a model zoo to score on them."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("benchbuild")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
