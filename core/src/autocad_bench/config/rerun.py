"""Starting a new batch that reruns only the rollouts of an earlier one that failed in named ways."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from autocad_bench.config.loading import LoadedConfig
from autocad_bench.errors import ConfigError, Problem


def select_failed(loaded: LoadedConfig, previous: Path, classes: set[str]) -> LoadedConfig:
    """Enable exactly the rollouts that failed in ``previous`` with one of ``classes``.

    The earlier batch is untouched (its failures stay recorded once); the new batch gets
    new attempt ids. Raises :class:`ConfigError` when nothing matches or the earlier
    batch state cannot be read.
    """
    state_path = previous / "batch-state.json"
    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
        failed = {r["rollout_id"] for r in state["rollouts"] if r.get("failure_class") in classes}
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ConfigError([Problem(str(state_path), f"cannot read the earlier batch state: {error}")]) from None
    if not failed:
        raise ConfigError([Problem(str(state_path), f"no rollout failed with {', '.join(sorted(classes))}")])
    unknown = failed - {r.rollout_id for r in loaded.config.rollouts}
    if unknown:
        raise ConfigError([Problem(loaded.at("$.rollouts"), f"rollouts of the earlier batch are missing here: "
                                                            f"{', '.join(sorted(unknown))}")])
    rollouts = [r.model_copy(update={"enabled": r.rollout_id in failed}) for r in loaded.config.rollouts]
    return replace(loaded, config=loaded.config.model_copy(update={"rollouts": rollouts}))
