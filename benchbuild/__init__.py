"""benchbuild: compositional-generalization benchmarks as Hugging Face datasets, and a model zoo to score on them.

Importing the package has no side effects. The model zoo registers itself with transformers' Auto classes when
`benchbuild.zoo` is imported: `import benchbuild.zoo`, then `AutoModelForSeq2SeqLM.from_pretrained(run_dir)`.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("benchbuild")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
