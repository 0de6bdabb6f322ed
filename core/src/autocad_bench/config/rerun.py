"""Starting a new batch that reruns only the rollouts of an earlier one that failed in named ways."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from autocad_bench.config.loading import LoadedConfig
from autocad_bench.errors import ConfigError, Problem
from autocad_bench.harness.layout import BatchPaths


def select_failed(loaded: LoadedConfig, previous: Path, classes: set[str]) -> LoadedConfig:
    """Restrict the batch to exactly the rollouts that failed in ``previous`` with one of ``classes``.

    Selection is per rollout, so per trial: when ``x.t2`` failed the new batch runs ``x.t2``
    (keeping its id and trial number) and not the other trials of ``x``. The configuration
    as written is unchanged; the selection travels as :attr:`LoadedConfig.only_rollouts`.
    The earlier batch is untouched (its failures stay recorded once); the new batch gets
    new attempt ids. Raises :class:`ConfigError` when nothing matches, when the earlier
    batch ran rollouts this configuration does not plan, or when its state cannot be read.
    """
    state_path = BatchPaths(previous).state
    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
        failed = {r["rollout_id"] for r in state["rollouts"] if r.get("failure_class") in classes}
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ConfigError([Problem(str(state_path), f"cannot read the earlier batch state: {error}")]) from None
    if not failed:
        raise ConfigError([Problem(str(state_path), f"no rollout failed with {', '.join(sorted(classes))}")])
    previous_id = state.get("batch_id") if isinstance(state, dict) else None
    selected = loaded.select(failed, source="the earlier batch")
    # Recorded in the new batch state, so metrics pooling both batches count each trial once.
    return replace(selected, rerun_of=previous_id if isinstance(previous_id, str) else None)
