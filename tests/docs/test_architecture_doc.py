"""docs/architecture.md names only things that exist, so the walk-through cannot rot silently.

Checked: every backticked repository path (a path whose first segment is a top-level
directory of the repository, such as ``core/src/autocad_bench/controller/batch.py``; ``*``
may stand for one segment), every relative Markdown link, and every backticked dotted
module name of a workspace package (``autocad_bench.harness.checkpoints``, optionally
followed by one attribute defined in that module).
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"

REPOSITORY_ROOTS = ("benchmarks", "broker-win", "core", "docs", "evaluator", "examples", "plugins",
                    "providers", "scripts", "tests")
SOURCE_ROOTS = (REPO / "core" / "src", REPO / "broker-win" / "src", REPO / "evaluator" / "src",
                *sorted((REPO / "plugins").glob("*/src")), *sorted((REPO / "providers").glob("*/src")),
                REPO / "examples" / "third-party-backend")

CODE_SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
MODULE = re.compile(r"(?:autocad_bench\w*|example_autocad_backend)(?:\.\w+)+")


def _text() -> str:
    return DOC.read_text(encoding="utf-8")


def _code_spans() -> list[str]:
    spans = []
    for line in _text().splitlines():
        spans += CODE_SPAN.findall(line)
    return spans


def _repository_paths() -> list[str]:
    return [span for span in _code_spans()
            if "/" in span and " " not in span and span.split("/", 1)[0] in REPOSITORY_ROOTS]


def _exists(path: str) -> bool:
    path = path.rstrip("/")
    if "*" in path:
        return any(REPO.glob(path))
    return (REPO / path).exists()


def _module_file(dotted: str) -> Path | None:
    parts = dotted.split(".")
    for root in SOURCE_ROOTS:
        base = root.joinpath(*parts)
        if (base / "__init__.py").is_file():
            return base / "__init__.py"
        if base.with_suffix(".py").is_file():
            return base.with_suffix(".py")
    return None


def _defines(source: Path, name: str) -> bool:
    pattern = rf"^\s*(?:async\s+def|def|class)\s+{re.escape(name)}\b|^{re.escape(name)}\s*[:=]"
    return re.search(pattern, source.read_text(encoding="utf-8"), re.MULTILINE) is not None


def test_the_doc_names_repository_paths() -> None:
    paths = _repository_paths()
    assert len(paths) >= 40, f"expected the walk-through to name its files, found only {paths}"


def test_every_repository_path_exists() -> None:
    missing = sorted({path for path in _repository_paths() if not _exists(path)})
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_no_placeholder_in_a_repository_path() -> None:
    # A repository path with <placeholders> cannot be checked; output-tree paths
    # (rollouts/<id>/...) start with no repository directory and are not concerned.
    bad = sorted({path for path in _repository_paths() if "<" in path or ">" in path})
    assert not bad, f"write these as real paths: {bad}"


def test_every_relative_link_resolves() -> None:
    broken = []
    for target in LINK.findall(_text()):
        if "://" in target or target.startswith(("#", "mailto:")):
            continue
        if not (DOC.parent / target.split("#", 1)[0]).exists():
            broken.append(target)
    assert not broken, f"docs/architecture.md links to missing files: {broken}"


def test_every_dotted_module_name_resolves() -> None:
    unresolved = []
    for span in _code_spans():
        if not MODULE.fullmatch(span):
            continue
        if _module_file(span) is not None:
            continue
        parent, _, attribute = span.rpartition(".")
        source = _module_file(parent)
        if source is None or not _defines(source, attribute):
            unresolved.append(span)
    assert not unresolved, f"docs/architecture.md names modules or attributes that do not exist: {unresolved}"
