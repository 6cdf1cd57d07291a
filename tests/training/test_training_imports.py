"""Data flows training -> run folder -> evaluation: training never imports evaluation (no package-level cycle)."""

import ast
import subprocess
import sys
from pathlib import Path

import benchbuild.training

TRAINING = Path(benchbuild.training.__file__).parent


def test_importing_every_training_module_loads_no_evaluation_module():
    # A fresh interpreter, so that modules other tests imported do not count.
    code = ("import importlib, pkgutil, sys, benchbuild.training as training\n"
            "for module in pkgutil.iter_modules(training.__path__):\n"
            "    importlib.import_module(f'benchbuild.training.{module.name}')\n"
            "print(*sorted(name for name in sys.modules if name.startswith('benchbuild.')), sep='\\n')")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert {"benchbuild.training.loop", "benchbuild.training.checkpoints", "benchbuild.training.batching"} <= set(loaded)
    assert [name for name in loaded if name.startswith("benchbuild.evaluation")] == []


def test_no_training_module_imports_evaluation_even_inside_a_function():
    imported = []  # (file, module) for every import statement, lazy ones inside functions included
    for path in sorted(TRAINING.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported += [(path.name, f"{node.module}.{alias.name}") for alias in node.names]
            elif isinstance(node, ast.Import):
                imported += [(path.name, alias.name) for alias in node.names]
    assert ("loop.py", "benchbuild.zoo") in imported  # imported inside `prepare`: lazy imports are seen
    assert [(file, name) for file, name in imported if name.startswith("benchbuild.evaluation")] == []
