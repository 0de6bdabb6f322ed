"""What a broker's desktop must do: the only part a real broker and the test fake implement twice.

:class:`~autocad_bench.broker.service.app.BrokerService` owns the protocol (routes,
authentication, replay caches, index and state checks, events, frame bookkeeping) and calls a
:class:`DesktopDriver` for everything that touches a desktop: opening a session's storage,
bringing the application to its clean state, injecting a batch and capturing the frame after
it, reading stored frames and artifacts back, saving the drawing and ending the session.

A driver never answers HTTP. It reports failures it can explain by raising
:class:`~autocad_bench.broker.service.http.Abort` (typically ``internal_error`` with a message
free of secrets and paths, after logging the details as events); any other exception is a
driver bug that the service answers with 500 and logs as a ``fault``. Mutating methods are
called under the session's lock, at most one at a time per session.

``D`` is the driver's own per-session data (storage directories, the latest PNG...), created
by :meth:`DesktopDriver.open_session` and handed back as ``session.desktop``.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Protocol, Self, TypeVar

from autocad_bench.actions import Action
from autocad_bench.broker.protocol import ActionReceipt, ArtifactInfo, FrameInfo, PointerPosition
from autocad_bench.models import JsonObject
from autocad_bench.providers.models import DisplaySize

if TYPE_CHECKING:
    from autocad_bench.broker.service.state import Session

D = TypeVar("D")


class EncodedFrame(Protocol):
    """A captured screenshot as PNG: its bytes, their SHA-256 hex and its pixel size."""

    @property
    def data(self) -> bytes: ...

    @property
    def sha256(self) -> str: ...

    @property
    def width(self) -> int: ...

    @property
    def height(self) -> int: ...


@dataclass(frozen=True, slots=True)
class PngFrame:
    """A plain :class:`EncodedFrame` (drivers with their own image type need not use it)."""

    data: bytes = field(repr=False)
    sha256: str
    width: int
    height: int


@dataclass(frozen=True, slots=True)
class BrokerIdentity:
    """The fixed part of ``GET /health``: who this broker is, set once at start.

    The desktop size, the state, the session and the optional readiness fields are added
    by the service at each call.
    """

    broker_version: str
    input_driver_version: str
    pid: int
    interactive_session_id: int
    boot_id: str
    startup_id: str
    manifest_sha256: str
    app: str


@dataclass(frozen=True, slots=True)
class ResetOutcome:
    """A clean handoff: frame 0 (already stored as sequence 0) and details for the event.

    ``pointer`` is where the desktop's pointer was when frame 0 was captured (``None``: the
    driver could not read it); it becomes ``FrameInfo.pointer``.
    """

    frame: EncodedFrame
    detail: JsonObject = field(default_factory=dict)
    pointer: PointerPosition | None = None


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """What happened to an injected batch.

    ``receipts`` has one entry per action (a failed injection stops the batch). ``frame``
    is the post-batch screenshot, already stored under the sequence the driver was given,
    with ``stable`` telling whether the pixels settled; ``None`` (with ``error`` saying why)
    when no frame at all could be captured or stored. ``detail`` joins the ``actions`` event.
    ``pointer`` is where the desktop's pointer was when ``frame`` was captured, read from
    the desktop (not inferred from the actions); ``None`` when it could not be read.
    """

    receipts: tuple[ActionReceipt, ...]
    frame: EncodedFrame | None
    stable: bool = True
    error: str | None = None
    detail: JsonObject = field(default_factory=dict)
    pointer: PointerPosition | None = None


@dataclass(frozen=True, slots=True)
class CheckpointOutcome:
    """A saved drawing, stored as artifact ``artifact.name``, and details for the event."""

    artifact: ArtifactInfo
    detail: JsonObject = field(default_factory=dict)


class FrameUnavailable(Exception):
    """A frame or artifact that was recorded can no longer be read back unchanged.

    The message is a short description for the event log (no paths or secrets needed by the
    client: the client only sees a generic 500, or a plain JSON actions answer).
    """


class Served(abc.ABC):
    """A broker object that listens between :meth:`start` and :meth:`stop`, also as ``async with``."""

    @abc.abstractmethod
    async def start(self) -> object:
        """Start listening; what can fail depends on the broker (at least ``OSError``)."""

    @abc.abstractmethod
    async def stop(self) -> None:
        """Stop listening and release what :meth:`start` acquired; idempotent."""

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


class DesktopDriver(abc.ABC, Generic[D]):
    """The desktop under a :class:`~autocad_bench.broker.service.app.BrokerService`.

    Implementations: ``autocad_bench_broker.server`` (a real display, input driver and CAD
    adapter) and :class:`autocad_bench.testing.fake_broker.FakeBroker` (in memory).
    """

    @property
    @abc.abstractmethod
    def identity(self) -> BrokerIdentity:
        """The fixed health fields of this broker."""

    @abc.abstractmethod
    def desktop_size(self) -> tuple[int, int]:
        """The last known desktop size for ``GET /health`` (cheap; never blocks)."""

    async def readiness_fields(self) -> JsonObject:
        """Optional ``HealthResponse`` fields (``deployment_id``...); none by default."""
        return {}

    @abc.abstractmethod
    async def open_session(self, session_id: str) -> D:
        """Create the per-session data of a new lease (directories...); may raise ``OSError``."""

    @abc.abstractmethod
    async def reset(self, session: Session[D]) -> ResetOutcome:
        """Bring the application to its clean task state and store frame 0.

        Raises :class:`Abort` (500) when no clean handoff was reached; the session then
        stays ``leased``.
        """

    @abc.abstractmethod
    async def live_display(self) -> DisplaySize:
        """The live desktop size a batch is validated against; :class:`Abort` 500 if unknown."""

    @abc.abstractmethod
    async def run_batch(
        self, session: Session[D], request_id: str, actions: Sequence[Action], first_index: int, sequence: int
    ) -> BatchOutcome:
        """Inject validated ``actions`` of request ``request_id`` (indices from ``first_index``),
        then capture and store frame ``sequence``.

        Must not raise once input may have reached the desktop: failures are receipts or a
        missing frame in the outcome.
        """

    @abc.abstractmethod
    async def read_frame(self, session: Session[D], info: FrameInfo) -> bytes:
        """The stored PNG of ``info`` exactly as recorded; :class:`FrameUnavailable` otherwise."""

    @abc.abstractmethod
    async def checkpoint(self, session: Session[D], request_id: str) -> CheckpointOutcome:
        """Save the drawing and store it as an artifact; :class:`Abort` 500 if that fails."""

    @abc.abstractmethod
    async def read_artifact(self, session: Session[D], info: ArtifactInfo) -> bytes:
        """The stored bytes of artifact ``info``; :class:`FrameUnavailable` if they changed or vanished."""

    @abc.abstractmethod
    async def release(self, session: Session[D]) -> JsonObject:
        """End the session's application (never raises); the result is the ``release`` event detail."""


__all__ = [
    "BatchOutcome",
    "BrokerIdentity",
    "CheckpointOutcome",
    "DesktopDriver",
    "EncodedFrame",
    "FrameUnavailable",
    "PngFrame",
    "ResetOutcome",
    "Served",
]
