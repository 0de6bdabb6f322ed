"""Task packs: suites, tasks and gold caches that an installed distribution ships, by name.

A configuration may name a suite instead of pointing at a file: ``"task_suite": "smoke"``.
The name is looked up in the installed *task packs* (entry-point group
``autocad_bench.task_packs``; the evaluator distribution ships the pack ``standard``), and
the configuration is completed from the pack before anything else reads it: the suite file,
and unless the configuration sets them, ``tasks_dir``, ``evaluation.gold_cache`` and
``evaluation.evaluator_version``. Every downstream reader (admission, the controller, the
recorded batch state, metrics) therefore sees concrete absolute paths and a concrete
evaluator version, exactly as if the user had written them.

A name is a bare identifier (no path separator, no ``.json`` suffix); ``"pack:suite"``
picks one pack when several ship a suite of that name. Anything else is a file path,
relative to the configuration file, as before.

Entry points are read when a configuration names a suite, never at import.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

from pydantic import Field, ValidationError

from autocad_bench.errors import ConfigError, Problem
from autocad_bench.models import StrictModel

TASK_PACK_GROUP = "autocad_bench.task_packs"
"""Entry-point group: each entry point loads to a zero-argument callable returning a :class:`TaskPack`."""

_NAME = r"[A-Za-z0-9][A-Za-z0-9_-]*"
_NAMED_SUITE = re.compile(rf"(?:(?P<pack>{_NAME}):)?(?P<suite>{_NAME})")


class TaskPack(StrictModel):
    """What one installed pack ships: ``suites_dir/<suite>.json`` files over one task directory.

    ``gold_cache`` and ``evaluator_version`` are the gold cache built for these tasks and the
    evaluator version that built it (``None`` for a pack without a gold cache: its suites can
    be run unevaluated, or with a gold cache the configuration names).
    """

    name: str = Field(pattern=rf"^{_NAME}$")
    description: str = ""
    suites_dir: Path
    tasks_dir: Path
    gold_cache: Path | None = None
    evaluator_version: str | None = None

    def suite_names(self) -> list[str]:
        """The suites this pack ships, sorted."""
        return sorted(p.stem for p in self.suites_dir.glob("*.json") if p.is_file())

    def suite_file(self, suite: str) -> Path | None:
        """The file of suite ``suite``, or ``None`` when this pack has no such suite."""
        path = self.suites_dir / f"{suite}.json"
        return path if path.is_file() else None


def is_suite_name(reference: str) -> bool:
    """Whether a ``task_suite`` value names a packaged suite rather than a file path."""
    return _NAMED_SUITE.fullmatch(reference) is not None


def installed_packs(
    load: Callable[[], Iterable[EntryPoint]] | None = None,
) -> tuple[list[TaskPack], list[str]]:
    """Every installed task pack, and one message per pack that failed to load.

    ``load`` replaces the entry-point lookup (tests). A broken pack never hides the others.
    """
    found = load() if load is not None else entry_points(group=TASK_PACK_GROUP)
    packs: list[TaskPack] = []
    broken: list[str] = []
    for point in sorted(found, key=lambda p: p.name):
        try:
            pack = point.load()()
            packs.append(pack if isinstance(pack, TaskPack) else TaskPack.model_validate(pack))
        except (ImportError, AttributeError, TypeError, ValueError, ValidationError) as error:
            broken.append(f"task pack {point.name!r} ({point.value}) failed to load: {error}")
    return packs, broken


def find_suite(reference: str, location: str, packs: list[TaskPack] | None = None,
               broken: list[str] | None = None) -> tuple[TaskPack, Path]:
    """The pack and suite file a suite name refers to.

    Raises :class:`ConfigError` at ``location`` when no installed pack ships the suite (the
    message lists what is installed and how to install the standard pack), when the name is
    ambiguous between packs, or when ``pack:`` names a pack that is not installed.
    """
    match = _NAMED_SUITE.fullmatch(reference)
    if match is None:
        raise ConfigError([Problem(location, f"{reference!r} is not a suite name")])
    if packs is None:
        packs, broken = installed_packs()
    wanted_pack, suite = match["pack"], match["suite"]
    candidates = [p for p in packs if wanted_pack is None or p.name == wanted_pack]
    hits = [(p, f) for p in candidates if (f := p.suite_file(suite)) is not None]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        names = ", ".join(f"{p.name}:{suite}" for p, _ in hits)
        raise ConfigError([Problem(location, f"suite {suite!r} is shipped by several task packs; name one: {names}")])
    known = [f"{p.name}: {', '.join(p.suite_names()) or '(no suites)'}" for p in packs]
    if wanted_pack is not None and not candidates:
        why = f"no task pack named {wanted_pack!r} is installed"
    else:
        why = f"no installed task pack ships a suite named {suite!r}"
    listing = f" (installed: {'; '.join(known)})" if known else (
        ' (no task pack is installed: pip install "autocad-bench[evaluator]" ships the standard one)')
    extra = f"; {'; '.join(broken)}" if broken else ""
    raise ConfigError([Problem(location, f"{why}{listing}; a path to a suite file must end in .json{extra}")])
