"""The conditions a run was measured under: part of every number's identity.

Two results are comparable only when they were measured on the same suite, with the same
evaluator version, the same step budget and the same tool mode. The controller writes a
:class:`RunConditions` into ``batch-state.json`` when a batch starts; every metric, the
leaderboard and ``compare`` read it back and refuse to merge rows that differ.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

from pydantic import Field

from autocad_bench.models import StrictModel

ToolMode = Literal["function", "native"]
"""How a model drives the desktop: ``function`` is our own ``computer_action`` function tool,
``native`` the model maker's own computer-use tool or action language."""

TOOL_MODES: tuple[ToolMode, ...] = ("function", "native")

DEFAULT_TOOL_MODE: ToolMode = "function"
"""The tool mode of a rollout that does not name one: our own ``computer_action`` function."""


class RunConditions(StrictModel):
    """What a batch was measured under (``conditions`` in ``batch-state.json``).

    ``suite`` is the suite's ``name`` and ``suite_sha256`` the digest of its file, so an
    edited suite with the same name is still a different suite. ``step_budget`` is the
    turn cap (``budgets.max_turns``; ``None`` means uncapped). ``trials`` is how many
    rollouts each (task, model) assignment was asked for.
    """

    suite: str | None = None
    suite_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    evaluator_version: str | None = None
    step_budget: int | None = Field(default=None, ge=1)
    max_actions: int | None = Field(default=None, ge=1)
    trials: int = Field(default=1, ge=1)
    recorded: bool = Field(default=True, description="False when the batch state did not record its conditions "
                                                     "(an older batch) or they could not be read: such a run "
                                                     "is never pooled with another or compared")


def suite_identity(path: Path | None) -> tuple[str | None, str | None]:
    """(name, sha256) of a suite file; (None, None) without one. The name falls back to the
    file stem when the file has no readable ``name``."""
    if path is None:
        return None, None
    import json

    data = path.read_bytes()
    name: str | None = path.stem
    try:
        loaded = json.loads(data)
        if isinstance(loaded, dict) and isinstance(loaded.get("name"), str):
            name = loaded["name"]
    except ValueError:
        pass
    return name, hashlib.sha256(data).hexdigest()
