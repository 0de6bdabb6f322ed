"""After the child: evidence retrieval and session release, then the decision whether a failed
handoff may be retried on the same worker or the worker replaced.

The pilot normally checkpoints, fetches events and releases by itself. A backend's lifecycle
calls :func:`finish_session` only to complete what a crashed or killed pilot left undone,
reading state from the broker (read-only calls) and releasing the session idempotently, each
step within its sub-cap of the backend's :class:`~autocad_bench.infrastructure.bounds.EvidenceBounds`.
The other functions read and amend the pilot's files of one rollout.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from autocad_bench.broker.client import BrokerClient
from autocad_bench.broker.errors import BrokerError
from autocad_bench.harness.checkpoints import load_checkpoint
from autocad_bench.harness.layout import RolloutPaths
from autocad_bench.harness.records import FailureClass, RolloutResult
from autocad_bench.infrastructure.bounds import EvidenceBounds
from autocad_bench.storage import atomic_write_bytes, atomic_write_json


async def finish_session(url: str, token: str, paths: RolloutPaths, log: Callable[[str], None],
                         bounds: EvidenceBounds) -> list[str]:
    """Fetch missing evidence and release a session the pilot left open; returns problems."""
    scale = bounds.scale
    problems: list[str] = []
    client = BrokerClient(url, token, operation_deadline_s=scale(bounds.status_s))
    session_id: str | None = None
    state = "unknown"
    try:
        async with asyncio.timeout(scale(bounds.total_s)):
            status = await client.status()
            session_id, state = status.session_id, status.state
            if state in ("leased", "ready"):
                log(f"the pilot left session {session_id} {state}; retrieving evidence")
                for path, fetch, key in ((paths.events, client.events, "events"),
                                         (paths.frame_events, client.frame_events, "frame_events")):
                    if _needs(path):
                        try:
                            value = await asyncio.wait_for(fetch(), scale(bounds.events_s))
                            atomic_write_json(path, value.model_dump(mode="json"))
                        except (BrokerError, TimeoutError) as error:
                            problems.append(f"{key}: {error or 'timed out'}")
                if status.checkpoints and not any(paths.drawing(s).exists() for s in (".dwg", ".dxf")):
                    latest = status.checkpoints[-1]
                    try:
                        data = await asyncio.wait_for(client.artifact(latest.name, expected_sha256=latest.sha256),
                                                      scale(bounds.artifact_s))
                        atomic_write_bytes(paths.drawing(Path(latest.name).suffix or ".dwg"), data)
                    except (BrokerError, TimeoutError) as error:
                        problems.append(f"drawing: {error or 'timed out'}")
    except (BrokerError, TimeoutError) as error:
        problems.append(f"evidence retrieval: {error or f'the {bounds.total_s:g} s budget ran out'}")
    if session_id is not None and state in ("leased", "ready"):
        try:
            async with asyncio.timeout(scale(bounds.release_s)):
                await client.release(session_id)
            log(f"session {session_id} released by the wrapper")
        except (BrokerError, TimeoutError) as error:
            problems.append(f"release: {error or f'timed out after {bounds.release_s:g} s'}")
    return problems


def _needs(path: Path) -> bool:
    try:
        json.loads(path.read_bytes())
        return False
    except (OSError, ValueError):
        return True


def read_result(paths: RolloutPaths) -> RolloutResult | None:
    """The rollout's ``result.json``, or ``None`` when it is missing, unreadable or invalid."""
    try:
        return RolloutResult.model_validate_json(paths.result.read_bytes())
    except (OSError, ValueError):
        return None


def model_started(paths: RolloutPaths) -> bool:
    """Whether any model request may have been made (then the sample is never replaced)."""
    result = read_result(paths)
    if result is not None and (result.model_responses > 0 or result.turns > 0 or result.actions > 0):
        return True
    try:
        checkpoint = load_checkpoint(paths)
    except FileNotFoundError:
        checkpoint = None
    except (OSError, ValueError):
        return True  # unreadable: assume the worst
    if checkpoint is not None and (checkpoint.turn_index > 0 or checkpoint.pending is not None
                                   or checkpoint.budget.turns > 0 or checkpoint.counters.responses > 0):
        return True
    try:
        return paths.model_turns.stat().st_size > 0
    except FileNotFoundError:
        return False


def handoff_failed(paths: RolloutPaths) -> bool:
    """The pilot recorded ``admission_failed`` and no model request happened."""
    result = read_result(paths)
    return (result is not None and result.failure_class == FailureClass.ADMISSION_FAILED
            and not model_started(paths))


def archive_attempt(paths: RolloutPaths, label: str, *, keep: Iterable[str] = ()) -> Path:
    """Move a failed handoff's pilot files aside (kept as evidence) so the pilot starts clean.

    The assignment, the reference and earlier archives stay, and so do the files named in
    ``keep`` (the backend's own records in the rollout directory).
    """
    target = paths.root / "admission-attempts" / label
    target.mkdir(parents=True, exist_ok=True)
    kept = {paths.assignment.name, "admission-attempts", paths.reference.name, *keep}
    for item in sorted(paths.root.iterdir()):
        if item.name in kept:
            continue
        shutil.move(str(item), str(target / item.name))
    return target


def mark_failure(paths: RolloutPaths, failure: FailureClass, detail: str) -> None:
    """Turn a completed result into a failed one (cleanup or evaluation failed afterwards)."""
    result = read_result(paths)
    if result is None or result.status != "completed":
        return
    atomic_write_json(paths.result, result.model_copy(update={
        "status": "failed", "failure_class": failure, "failure_detail": detail}).model_dump(mode="json"))
