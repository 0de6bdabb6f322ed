"""The task families of the suite and the instances they make (see :mod:`.base`).

:func:`families` lists every family in suite order; :func:`default_instances` is the default
suite: each family's fixed instances, then ``default_count`` instances generated with
:data:`~.base.DEFAULT_SEED`; :func:`generate` makes a fresh set for any seed.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from autocad_bench_evaluator.suite.definitions import TaskDefinition
from autocad_bench_evaluator.suite.families.base import DEFAULT_SEED, Family, Plan, split_of


@functools.cache
def families() -> tuple[Family, ...]:
    """Every family, in suite order (draft, reproduce, edit, annotate, solid)."""
    from autocad_bench_evaluator.suite.families import annotate, draft, edit, solid

    found = (*draft.families(), *edit.families(), *annotate.families(), *solid.families())
    ids = [family.family_id for family in found]
    if len(set(ids)) != len(ids):  # pragma: no cover - a programming error
        raise RuntimeError("duplicate family ids")
    return found


def family(family_id: str) -> Family:
    """The family ``family_id``; raises ``KeyError`` naming the known ones."""
    for found in families():
        if found.family_id == family_id:
            return found
    raise KeyError(f"unknown family {family_id!r}; known: {', '.join(f.family_id for f in families())}")


@functools.cache
def default_instances() -> tuple[TaskDefinition, ...]:
    """The default suite: per family its fixed instances, then its generated ones."""
    found: list[TaskDefinition] = []
    for fam in families():
        for fixed in fam.fixed:
            found.append(_as_fixed(fixed, fam))
        found += [fam.instance(DEFAULT_SEED, index) for index in range(fam.default_count)]
    ids = [task.task_id for task in found]
    if len(set(ids)) != len(ids):  # pragma: no cover - a programming error
        raise RuntimeError("duplicate task ids in the default suite")
    return tuple(found)


def generate(seed: int, family_ids: Iterable[str] | None = None, count: int | None = None) -> list[TaskDefinition]:
    """Fresh instances for ``seed``: ``count`` per family (default: the family's default count).

    Fixed-only families have nothing to generate and are left out (named explicitly, they
    raise ``ValueError``). Raises ``KeyError`` for an unknown family id.
    """
    chosen = [family(f) for f in family_ids] if family_ids is not None else [f for f in families() if f.generative]
    found: list[TaskDefinition] = []
    for fam in chosen:
        if not fam.generative:
            raise ValueError(f"family {fam.family_id} has only fixed instances; it cannot generate new ones")
        n = fam.default_count if count is None else count
        found += [fam.instance(seed, index) for index in range(n)]
    return found


def _as_fixed(task: TaskDefinition, fam: Family) -> TaskDefinition:
    from dataclasses import replace

    return replace(task, skill=fam.skill, family=fam.family_id, family_version=fam.version, seed=None, split="dev")


__all__ = ["DEFAULT_SEED", "Family", "Plan", "default_instances", "families", "family", "generate", "split_of"]
