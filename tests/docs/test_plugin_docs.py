"""docs/plugins.md documents every hook specification."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pluggy

from autocad_bench import hookspecs

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"


def _spec_names() -> list[str]:
    marker = f"{hookspecs.PROJECT_NAME}_spec"
    return [name for name, value in vars(hookspecs).items()
            if inspect.isfunction(value) and hasattr(value, marker)]


def test_every_hook_spec_is_documented() -> None:
    text = DOC.read_text()
    documented = set(re.findall(r"\*\*`(\w+)\(", text))
    specs = set(_spec_names())
    assert specs, "no hook specs found"
    assert specs - documented == set(), f"undocumented hook specs: {sorted(specs - documented)}"
    assert documented - specs == set(), f"documented hooks that do not exist: {sorted(documented - specs)}"


def test_hook_groups_cover_all_specs() -> None:
    grouped = set(hookspecs.INFRASTRUCTURE_HOOKS + hookspecs.RECOVERY_HOOKS
                  + hookspecs.PROVIDER_HOOKS + hookspecs.EVALUATOR_HOOKS + hookspecs.OBSERVER_HOOKS)
    assert grouped == set(_spec_names())
    assert len(grouped) == sum(map(len, (hookspecs.INFRASTRUCTURE_HOOKS, hookspecs.RECOVERY_HOOKS,
                                         hookspecs.PROVIDER_HOOKS, hookspecs.EVALUATOR_HOOKS,
                                         hookspecs.OBSERVER_HOOKS))), "a hook is in two groups"


def test_every_hook_spec_has_a_docstring() -> None:
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    for name in _spec_names():
        assert inspect.getdoc(getattr(hookspecs, name)), name
