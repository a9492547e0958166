"""The layers of ``design.md`` point one way: a package of kernelopt imports from the packages below it,
never from one above. Read from the source's own import statements (lazy imports inside functions too)."""

from __future__ import annotations

import ast
from pathlib import Path

import kernelopt

# Top to bottom; one rank may hold several packages that do not import each other's.
LAYERS = [
    {"cli", "api"},
    {"pipeline"},
    {"report"},
    {"deliver"},
    {"search"},
    {"agents"},
    {"knowledge"},
    {"evaluate"},
    {"verify"},
    {"capture"},
    {"measure"},
    {"problem"},
    {"workers", "store"},
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}
SOURCE = Path(kernelopt.__file__).parent


def imported_modules(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return [name for name in names if name.startswith("kernelopt.")]


def upward_imports(root: Path) -> list[str]:
    """``file -> module`` for every import of a package from a higher layer; a package the table does not
    know is named too, so a new package is placed before it is used."""
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if len(parts) == 1:  # config.py, errors.py, __main__.py: below or beside every layer
            continue
        if parts[0] not in RANK:
            found.append(f"{path.relative_to(root)}: package {parts[0]!r} is in no layer")
            continue
        for module in imported_modules(path):
            other = module.split(".")[1]
            if other in RANK and RANK[other] < RANK[parts[0]]:
                found.append(f"{path.relative_to(root)} -> {module}")
    return found


def test_no_package_imports_from_a_layer_above_it() -> None:
    assert upward_imports(SOURCE) == []


def test_the_check_finds_an_upward_import_and_an_unplaced_package(tmp_path: Path) -> None:
    (tmp_path / "capture").mkdir()
    (tmp_path / "capture" / "passes.py").write_text("from kernelopt.search.nodes import Node\n")
    (tmp_path / "newthing").mkdir()
    (tmp_path / "newthing" / "a.py").write_text("import kernelopt.store\n")
    (tmp_path / "search").mkdir()
    (tmp_path / "search" / "ok.py").write_text("def f():\n    from kernelopt.capture import compat\n")
    assert upward_imports(tmp_path) == [
        "capture/passes.py -> kernelopt.search.nodes",
        "newthing/a.py: package 'newthing' is in no layer",
    ]


def test_the_private_api_fence_does_not_import_kernelopt_s_own_rewrites() -> None:
    """``capture/compat`` is the bottom of the capture layer: the compile options of kernelopt's own (the
    rewrites and the CUDA ops they call) sit above it and hand it their passes, not the other way round."""
    fence = imported_modules(SOURCE / "capture" / "compat.py")
    assert "kernelopt.capture.compile_stop" in fence  # read: the stop mechanism is the fence's own
    assert [module for module in fence if module.startswith("kernelopt.capture.rewrites")] == []
