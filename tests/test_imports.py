"""Imports: the dataset side never loads torch, transformers, numba or matplotlib, whatever the program is called;
importing `benchbuild` has no side effects; the package's parts depend on each other one way (no import cycles)."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

import benchbuild

PACKAGE = Path(benchbuild.__file__).parent
HEAVY = ("torch", "transformers", "numba", "matplotlib")


def loaded_after(statement: str, program: str, folder: Path) -> list[str]:
    """Which of HEAVY (and the zoo) a fresh interpreter holds after `statement`, run as `program`."""
    code = (f"import sys\n{statement}\n"
            f"print(*[name for name in {(*HEAVY, 'benchbuild.zoo')!r} if name in sys.modules])\n")
    if program == "-c":
        command = [sys.executable, "-c", code]
    else:  # a script of that name: sys.argv[0] is the program's name
        script = folder / program
        script.write_text(code, encoding="utf-8")
        command = [sys.executable, str(script)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=folder, check=True)
    return result.stdout.split()


@pytest.mark.parametrize("program", ["-c", "benchbuild", "build_data.py"])
@pytest.mark.parametrize("module", ["benchbuild.benchmark", "benchbuild.scan.build"])
def test_the_dataset_side_loads_no_torch_transformers_or_numba(tmp_path, module, program):
    assert loaded_after(f"import {module}", program, tmp_path) == []


def test_importing_benchbuild_only_sets_the_version(tmp_path):
    statement = "import benchbuild\nassert benchbuild.__all__ == ['__version__'] and benchbuild.__version__"
    assert loaded_after(statement, "-c", tmp_path) == []


def test_builders_configuration_readers_and_the_command_line_load_no_model_code(tmp_path):
    # Sweep files and run states too: `sweep --dry-run` / `--status` and the GPU queue's checks of its sweep files
    # read them in a second, not after the seconds torch and transformers take.
    statement = ("import benchbuild.nounadj.build, benchbuild.react.build, benchbuild.cli, benchbuild.toml_schema, "
                 "benchbuild.pipeline, benchbuild.cards, benchbuild.papers, benchbuild.evaluation.comp, "
                 "benchbuild.sweep.spec, benchbuild.sweep.state, benchbuild.training.selection")
    assert loaded_after(statement, "-c", tmp_path) == []


def part_of(module: str) -> str:
    """The top-level module or subpackage a module belongs to: benchbuild.zoo.catalogue -> benchbuild.zoo."""
    return ".".join(module.split(".")[:2])


def imports_between_parts() -> dict[str, dict[str, list[str]]]:
    """part -> imported part -> the files that import it; imports inside functions count too."""
    graph: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(("benchbuild", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "benchbuild":
                targets = [f"benchbuild.{alias.name}" for alias in node.names if alias.name != "__version__"]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("benchbuild."):
                targets = [node.module]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names if alias.name.startswith("benchbuild.")]
            else:
                continue
            for target in targets:
                if part_of(target) != part_of(module):
                    graph[part_of(module)][part_of(target)].append(path.name)
    return graph


def reaches(graph, start: str, goal: str) -> bool:
    """Whether `goal` is reachable from `start` along `graph` (node -> the nodes it imports)."""
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return False


def test_no_two_parts_of_the_package_import_each_other_even_indirectly():
    graph = imports_between_parts()
    cycles = [f"{a} -> {b} ({', '.join(files)}) -> ... -> {a}" for a in sorted(graph)
              for b, files in sorted(graph[a].items()) if reaches(graph, b, a)]
    assert cycles == []


def test_cards_evaluation_and_the_zoo_do_not_import_what_lies_downstream():
    graph = imports_between_parts()
    assert "benchbuild.benchmark" not in graph["benchbuild.cards"]
    assert "benchbuild.nounadj" not in graph["benchbuild.evaluation"]
    assert "benchbuild.training" not in graph["benchbuild.zoo"]


def test_attention_owns_its_dropout_and_imports_nothing_of_the_zoo_that_uses_it():
    """`zoo/attention` is a part the zoo's models build on: it reaches no zoo module outside itself (its dropout
    masks live in `zoo/attention/hash_masks.py`, which the layers' `zoo/dropout.py` imports, not the reverse)."""
    outside = []
    for path in sorted((PACKAGE / "zoo" / "attention").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module else
                     [alias.name for alias in node.names] if isinstance(node, ast.Import) else [])
            outside += [f"{path.name}: {name}" for name in names
                        if name.startswith("benchbuild.zoo") and not name.startswith("benchbuild.zoo.attention")]
    assert outside == []


def _module_imports(folder: Path) -> dict[str, set[str]]:
    """module -> the benchbuild modules it imports (inside functions and under TYPE_CHECKING too), for the modules
    of one folder of the package."""
    graph: dict[str, set[str]] = {}
    for path in sorted(folder.glob("*.py")):
        module = ".".join(("benchbuild", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("benchbuild"):
                targets.add(node.module)
                targets.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names if alias.name.startswith("benchbuild"))
        graph[module] = targets
    return graph


def test_evaluation_and_the_report_import_nothing_of_training():
    """The model card belongs to the run folder (`benchbuild.model_card`) and recipe arithmetic to the recipe type
    (`benchbuild.zoo.recipe`): scoring and reporting a run needs no training code."""
    found = [f"{module}: {target}" for part in ("evaluation", "report")
             for module, targets in _module_imports(PACKAGE / part).items()
             for target in sorted(targets) if target.startswith("benchbuild.training")]
    assert found == []


def test_no_two_modules_of_the_report_import_each_other_even_indirectly():
    graph = _module_imports(PACKAGE / "report")
    inside = {module: {target for target in targets if target in graph} for module, targets in graph.items()}
    cycles = [f"{a} -> {b} -> ... -> {a}" for a in sorted(inside) for b in sorted(inside[a])
              if reaches(inside, b, a)]
    assert cycles == []


def test_no_module_is_over_500_lines_unless_its_docstring_says_why_it_is_one_piece():
    """Issue #46: a newcomer finds one concern per file; a module that must stay longer says so ("one piece")."""
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > 500 and "one piece" not in (ast.get_docstring(ast.parse(text)) or ""):
            long.append(f"{path.relative_to(PACKAGE.parent)} ({text.count(chr(10))} lines)")
    assert not long, f"over 500 lines without saying why: {long}"
