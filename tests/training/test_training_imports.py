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


def _training_imports() -> dict[str, set[str]]:
    """Each training module's imports of other training modules: at the top, inside functions, and under
    TYPE_CHECKING alike (a circle of type-only imports is still a circle for a reader)."""
    names = {path.stem for path in TRAINING.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in sorted(TRAINING.glob("*.py")):
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            modules = ([node.module] if isinstance(node, ast.ImportFrom) and node.module else
                       [alias.name for alias in node.names] if isinstance(node, ast.Import) else [])
            for module in modules:
                if module.startswith("benchbuild.training."):
                    found.add(module.split(".")[2])
        graph[path.stem] = {name for name in found if name in names and name != path.stem}
    return graph


def test_training_has_no_import_circle():
    """The plan (`plan`), the prepared run (`prepared`), the loop and its bookkeeping and progress import one another
    one way only (issue #58: bookkeeping, loop and progress used to import each other in a circle)."""
    graph = _training_imports()
    assert {"plan", "prepared"} <= graph["loop"] and "prepared" in graph["bookkeeping"] | graph["progress"]
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import circle: {' -> '.join(path + (module,))}"
        if module in done:
            return
        for imported in sorted(graph[module]):
            visit(imported, path + (module,))
        done.add(module)

    for module in sorted(graph):
        visit(module, ())


def test_every_module_of_the_package_stays_under_500_lines():
    package = TRAINING.parent
    long = {str(path.relative_to(package)): count for path in sorted(package.rglob("*.py"))
            if (count := len(path.read_text(encoding="utf-8").splitlines())) >= 500}
    assert long == {}
