"""The four plugin kinds, their entry-point groups and the extras that install known names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from autocad_bench.hookspecs import (
    INFRASTRUCTURE_HOOKS,
)

Kind = Literal["infrastructure", "providers", "evaluators", "observers"]


@dataclass(frozen=True, slots=True)
class KindInfo:
    """One plugin kind: the noun used in messages, its entry-point group, the hooks every plugin
    of the kind must implement and the extra that installs each known name.
    """

    kind: Kind
    noun: str
    group: str
    required_hooks: tuple[str, ...]
    extras: dict[str, str]


KINDS: dict[Kind, KindInfo] = {
    "infrastructure": KindInfo(
        "infrastructure",
        "backend",
        "autocad_bench.infrastructure",
        tuple(h for h in INFRASTRUCTURE_HOOKS if h != "create_trace_publisher"),
        {"aws": "aws", "local-hyperv": "hyperv", "local-xvfb": "xvfb", "ray": "ray"},
    ),
    "providers": KindInfo(
        "providers",
        "provider",
        "autocad_bench.providers",
        ("open_session",),
        {n: n for n in ("openai", "openrouter", "anthropic", "fireworks", "mantle", "bedrock", "openweight")},
    ),
    "evaluators": KindInfo(
        "evaluators",
        "evaluator",
        "autocad_bench.evaluators",
        ("evaluate_drawing", "check_gold_cache"),
        {"standard": "evaluator"},
    ),
    "observers": KindInfo("observers", "observer", "autocad_bench.observers", (), {}),
}

