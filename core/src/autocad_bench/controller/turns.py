"""The ``model_turn_recorded`` observer events, read from what each pilot writes.

A pilot runs in a thread of the controller (shared mode) or in a child process (subprocess
mode, every backend), and appends one line per model turn to its rollout's
``model_turn_summaries.jsonl``. :class:`TurnFeed` follows those files from the controller,
so observers get the same events whichever way the pilot runs. Only complete lines are read;
a line the pilot is still writing waits for the next poll.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from autocad_bench.events import ModelTurnEvent
from autocad_bench.harness.layout import BatchPaths
from autocad_bench.harness.trace import utcnow
from autocad_bench.plugins.host import PluginHost

log = logging.getLogger(__name__)


class TurnFeed:
    """Follows the turn summaries of a batch's rollouts and notifies observers of new turns.

    Turns already in a file when the feed first sees the rollout were announced by the
    controller that ran them (a resumed batch) and are skipped. Thread-safe; never raises
    for a missing, truncated or malformed file (the pilot owns it).
    """

    def __init__(self, host: PluginHost, batch_id: str, output_dir: Path) -> None:
        self._host = host
        self._batch_id = batch_id
        self._layout = BatchPaths(output_dir)
        self._offsets: dict[str, int] = {}
        self._paths: dict[str, Path] = {}
        self._lock = threading.RLock()  # also taken from a signal handler on a thread that may hold it

    def skip_existing(self, rollout_ids: Iterable[str]) -> None:
        """Start these rollouts' feeds at the current end of their files (turns of an earlier run)."""
        with self._lock:
            for rollout_id in rollout_ids:
                path = self._layout.rollout(rollout_id).turn_summaries
                self._offsets[rollout_id] = path.stat().st_size if path.is_file() else 0

    def poll(self, rollout_ids: Iterable[str]) -> int:
        """Notify observers of every complete new turn of these rollouts; the number sent."""
        if not self._host.has_implementations("model_turn_recorded"):
            return 0
        sent = 0
        with self._lock:
            for rollout_id in rollout_ids:
                for event in self._read(rollout_id):
                    self._host.notify("model_turn_recorded", event=event)
                    sent += 1
        return sent

    def _read(self, rollout_id: str) -> list[ModelTurnEvent]:
        path = self._paths.get(rollout_id)
        if path is None:
            path = self._paths[rollout_id] = self._layout.rollout(rollout_id).turn_summaries
        offset = self._offsets.get(rollout_id, 0)
        try:
            # Polled for every active rollout several times a second: a stat that shows
            # nothing new costs far less than opening and reading the file.
            if os.stat(path).st_size <= offset:
                return []
            with open(path, "rb") as handle:
                handle.seek(offset)
                data = handle.read()
        except OSError:
            return []
        complete = data[: data.rfind(b"\n") + 1]
        self._offsets[rollout_id] = offset + len(complete)
        events = []
        for line in complete.splitlines():
            try:
                record = json.loads(line)
                events.append(ModelTurnEvent(
                    batch_id=self._batch_id, rollout_id=rollout_id, turn_index=int(record["turn_index"]),
                    valid=bool(record["valid"]), actions=int(record["actions"]),
                    cost_usd=float(record["cost_usd"]), at=_at(record)))
            except (ValueError, KeyError, TypeError):
                log.warning("skipping a malformed turn summary of %s", rollout_id)
        return events


def _at(record: dict[str, object]) -> datetime:
    value = record.get("at")
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            pass
    return utcnow()
