"""Every distribution declares what its code imports: a wheel installed alone must not rely on
a package that happens to arrive through another dependency.

The check reads each distribution's ``pyproject.toml`` and every module under its ``src/``,
maps each imported top-level module to the distribution that provides it (through the
installed metadata) and fails on an import whose distribution is not a dependency or an
extra of the importer. Imports guarded for optional use count when the module is declared
in an extra.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
DISTRIBUTIONS = sorted(p.parent for p in REPO.glob("*/pyproject.toml")) + sorted(
    p.parent for p in REPO.glob("*/*/pyproject.toml") if "examples" not in p.parts)
# Modules a distribution may import without declaring them (type-checking only, or vendored
# in the standard library of every supported Python).
ALLOWED = {"typing_extensions", "_typeshed", "pywintypes", "win32api", "win32con", "win32gui", "win32process",
           "win32event", "winreg", "msvcrt", "_winapi"}


def declared(pyproject: dict) -> set[str]:
    project = pyproject["project"]
    names = {canonicalize_name(project["name"])}
    requirements = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    names.update(canonicalize_name(Requirement(r).name) for r in requirements)
    return names


def _guarded(tree: ast.AST) -> set[int]:
    """ids of import nodes inside ``try: ... except ImportError`` (optional by construction)."""
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
                isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
                for h in node.handlers):
            for statement in node.body:
                guarded.update(id(n) for n in ast.walk(statement))
    return guarded


def _top(node: ast.AST) -> str | None:
    if isinstance(node, ast.Import):
        return node.names[0].name.split(".")[0]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return node.module.split(".")[0]
    return None


def imported_top_modules(src: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(src.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        optional = _guarded(tree)
        # A module this file imports under an ImportError guard is optional everywhere in the
        # file (the guarded probe decides; later imports run only when it succeeded).
        probed = {_top(n) for n in ast.walk(tree) if id(n) in optional and _top(n)}
        for node in ast.walk(tree):
            if id(node) in optional or (_top(node) in probed):
                continue
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], path)
    return found


def workspace_modules() -> dict[str, str]:
    """Top-level module -> distribution for this workspace (editable installs are not in
    ``packages_distributions``)."""
    modules: dict[str, str] = {}
    for distribution in [*DISTRIBUTIONS, REPO / "examples" / "third-party-backend"]:
        if not (distribution / "pyproject.toml").is_file():
            continue
        name = tomllib.loads((distribution / "pyproject.toml").read_text()).get("project", {}).get("name")
        if name and (distribution / "src").is_dir():
            modules.update({p.name: canonicalize_name(name) for p in (distribution / "src").iterdir() if p.is_dir()})
    return modules


def undeclared(distribution: Path) -> list[str]:
    pyproject = tomllib.loads((distribution / "pyproject.toml").read_text())
    if "project" not in pyproject or not (distribution / "src").is_dir():
        return []
    allowed = declared(pyproject)
    providers = {**packages_distributions(), **{m: [d] for m, d in workspace_modules().items()}}
    own = {p.name for p in (distribution / "src").iterdir() if p.is_dir()}
    problems = []
    for module, where in imported_top_modules(distribution / "src").items():
        if module in sys.stdlib_module_names or module in own or module in ALLOWED:
            continue
        if module == "pydantic_core" and "pydantic" in allowed:
            continue  # pydantic pins the pydantic-core it re-exports; declaring both would fight it
        dists = {canonicalize_name(d) for d in providers.get(module, [])}
        if not dists:
            problems.append(f"{where.relative_to(REPO)}: imports {module!r}, which no installed distribution provides")
        elif not dists & allowed:
            problems.append(f"{where.relative_to(REPO)}: imports {module!r} (from {', '.join(sorted(dists))}) "
                            f"but {pyproject['project']['name']} does not declare it")
    return problems


@pytest.mark.parametrize("distribution", DISTRIBUTIONS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_import_is_declared(distribution: Path) -> None:
    assert undeclared(distribution) == []


def test_the_check_sees_an_undeclared_import(tmp_path: Path) -> None:
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "__init__.py").write_text(
        "import yaml\nimport pydantic\ntry:\n    import toml\nexcept ImportError:\n    toml = None\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "pkg"\ndependencies = ["pydantic>=2"]\n')
    global REPO
    saved, REPO = REPO, tmp_path
    try:
        problems = undeclared(tmp_path)
    finally:
        REPO = saved
    assert len(problems) == 1 and "'yaml'" in problems[0]
