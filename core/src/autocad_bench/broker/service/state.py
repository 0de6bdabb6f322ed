"""In-memory protocol state of a broker's sessions: replay caches, frames, checkpoints.

One :class:`Session` exists per lease. Its caches live as long as the broker process (a
session handles at most one rollout, so memory stays small: frame *bytes* stay with the
desktop driver, only their :class:`~autocad_bench.broker.protocol.FrameInfo` is kept here).
Every field is mutated only on the event loop, under the session's lock where the protocol
requires it, so no thread-safety is needed here.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from autocad_bench.broker.protocol import (
    ArtifactInfo,
    BrokerState,
    ErrorResponse,
    FrameEvent,
    FrameInfo,
    LeaseResponse,
    ReleaseResponse,
    ResetResponse,
)

D = TypeVar("D")


@dataclass(frozen=True, slots=True)
class CachedAnswer:
    """An answer stored under a request id, with the fingerprint of the body that earned it.

    ``response`` is the 200 model (``ActionsResponse``, ``CheckpointResponse``) or, for a
    batch whose input was injected but whose frame could not be captured, the
    :class:`ErrorResponse` that was answered: a replay must repeat it, never re-inject.
    """

    fingerprint: str
    response: BaseModel

    @property
    def is_error(self) -> bool:
        return isinstance(self.response, ErrorResponse)


@dataclass(eq=False)
class Session(Generic[D]):
    """One lease: identity, state machine position, caches and the driver's ``desktop`` data."""

    session_id: str
    task_id: str
    attempt_id: str
    desktop: D
    state: BrokerState = "leased"
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    reset: ResetResponse | None = None
    next_index: int = 0
    actions: dict[str, CachedAnswer] = field(default_factory=dict)
    inflight: dict[str, asyncio.Task[Any]] = field(default_factory=dict)
    """Action request ids whose execution is running: duplicates wait for it, then replay."""
    checkpoints: dict[str, CachedAnswer] = field(default_factory=dict)
    checkpoint_artifacts: list[ArtifactInfo] = field(default_factory=list)
    """Every successful checkpoint's artifact, in order (``GET /status``)."""
    artifacts: dict[str, ArtifactInfo] = field(default_factory=dict)
    """Servable artifacts by name: the latest checkpoint of each name."""
    frames: list[FrameInfo] = field(default_factory=list)
    """Frame ``n`` is ``frames[n]``: 0 from reset, then one per executed batch."""
    frame_events: list[FrameEvent] = field(default_factory=list)
    released: ReleaseResponse | None = None

    @property
    def identity(self) -> tuple[str, str]:
        return self.task_id, self.attempt_id

    def lease_response(self, *, replayed: bool) -> LeaseResponse:
        return LeaseResponse(
            session_id=self.session_id, task_id=self.task_id, attempt_id=self.attempt_id, replayed=replayed
        )

    @property
    def last_frame_sequence(self) -> int | None:
        return len(self.frames) - 1 if self.frames else None


__all__ = ["CachedAnswer", "Session"]
