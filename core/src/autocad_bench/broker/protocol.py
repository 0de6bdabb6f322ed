"""Wire models of the broker HTTP protocol, shared by the client and the broker server.

Every request body and every JSON response body is one of these models; ``docs/
broker-protocol.md`` describes the endpoints and their replay rules. Request models are what
the server parses (unknown fields are rejected with 400); response models are what the
client parses (a mismatch is a protocol error, never silently ignored).
"""

from __future__ import annotations

import enum
import hashlib
import json
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, JsonValue, SerializerFunctionWrapHandler, model_serializer, model_validator

from autocad_bench.actions.models import Action
from autocad_bench.models import IDENTIFIER_PATTERN, JsonObject, StrictModel

PROTOCOL_VERSION = 1
"""Bumped on any incompatible change of the models or routes below."""

AUTHORIZATION_HEADER = "Authorization"
CONTENT_SHA256_HEADER = "X-Content-SHA256"
"""Header carrying the SHA-256 hex of a binary body (frames, artifacts)."""

ACTIONS_FRAME_MEDIA_TYPE = "application/vnd.autocad-bench.actions-frame"
"""``POST /actions`` answer carrying the post-batch frame with it (asked for with ``Accept``).

The body is the ``ActionsResponse`` JSON followed directly by the frame's PNG bytes; the
JSON's length in bytes is in :data:`ACTIONS_LENGTH_HEADER` and the PNG's SHA-256 is
``frame.sha256``. It saves the separate ``GET /frames/{sequence}`` of every turn."""

ACTIONS_LENGTH_HEADER = "X-Actions-Response-Length"
"""Length in bytes of the JSON part of an :data:`ACTIONS_FRAME_MEDIA_TYPE` body."""

WAIT_IDLE_LIMIT_S = 10.0
"""After a ``wait`` action's seconds, the longest a broker goes on waiting for the application
to go idle (so a dialog the wait was for is up on a loaded machine too). A client's deadline for
``POST /actions`` allows this much more per ``wait``."""

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
"""Request bodies above this size are refused with 413 (servers may choose a larger cap)."""

NAME_PATTERN = IDENTIFIER_PATTERN

Sha256Hex = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
Name = Annotated[str, Field(pattern=NAME_PATTERN)]
"""Session ids and artifact names: one path segment, no separators, no leading dot."""
RequestId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$")]
ActionRequestId = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
"""Action request ids are :func:`autocad_bench.actions.action_request_id` values."""
Label = Annotated[str, Field(min_length=1, max_length=256)]

PointerPosition = tuple[int, int]
"""``[x, y]`` of the desktop's pointer in desktop pixels (origin top-left), as the broker read it."""

BrokerState = Literal["idle", "leased", "ready", "released"]
"""``idle``: no lease; ``leased``: leased, not reset yet; ``ready``: reset done, actions
accepted; ``released``: the session ended (a new lease may start another)."""


class Route(enum.StrEnum):
    """Every endpoint as ``"METHOD /path"`` (the path template of aiohttp routing)."""

    HEALTH = "GET /health"
    LEASE = "POST /lease"
    RESET = "POST /reset"
    ACTIONS = "POST /actions"
    FRAME = "GET /frames/{sequence}"
    CHECKPOINT = "POST /checkpoint"
    ARTIFACT = "GET /artifacts/{name}"
    EVENTS = "GET /events"
    FRAME_EVENTS = "GET /frame-events"
    STATUS = "GET /status"
    RELEASE = "POST /release"

    @property
    def method(self) -> str:
        return self.value.split(" ", 1)[0]

    @property
    def path(self) -> str:
        return self.value.split(" ", 1)[1]


class ErrorCode(enum.StrEnum):
    """The ``code`` of an error body; each maps to one HTTP status (:data:`ERROR_STATUS`)."""

    BAD_REQUEST = "bad_request"
    UNAUTHORIZED = "unauthorized"
    NOT_FOUND = "not_found"
    UNKNOWN_SESSION = "unknown_session"
    LEASE_CONFLICT = "lease_conflict"
    RESET_KEY_CONFLICT = "reset_key_conflict"
    REQUEST_CONFLICT = "request_conflict"
    INDEX_CONFLICT = "index_conflict"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    WRONG_STATE = "wrong_state"
    BODY_TOO_LARGE = "body_too_large"
    BATCH_REJECTED = "batch_rejected"
    INTERNAL_ERROR = "internal_error"


ERROR_STATUS: dict[ErrorCode, int] = {
    ErrorCode.BAD_REQUEST: 400,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.UNKNOWN_SESSION: 404,
    ErrorCode.LEASE_CONFLICT: 409,
    ErrorCode.RESET_KEY_CONFLICT: 409,
    ErrorCode.REQUEST_CONFLICT: 409,
    ErrorCode.INDEX_CONFLICT: 409,
    ErrorCode.METHOD_NOT_ALLOWED: 405,
    ErrorCode.WRONG_STATE: 412,
    ErrorCode.BODY_TOO_LARGE: 413,
    ErrorCode.BATCH_REJECTED: 422,
    ErrorCode.INTERNAL_ERROR: 500,
}


class ErrorResponse(StrictModel):
    """Body of every non-200 response.

    ``next_index`` is set on ``index_conflict`` (the index the broker expects next);
    ``problems`` lists ``path: message`` lines on ``batch_rejected`` and ``bad_request``.
    A 401 always carries the same fixed body, whatever was wrong with the credentials.
    """

    code: ErrorCode
    message: str
    next_index: int | None = Field(default=None, ge=0)
    problems: tuple[str, ...] = ()


class HealthResponse(StrictModel):
    """``GET /health``: the identity the controller compares with the admission evidence."""

    protocol_version: int = PROTOCOL_VERSION
    broker_version: str
    input_driver_version: str
    pid: int = Field(ge=0)
    interactive_session_id: int = Field(ge=0)
    desktop_width: int = Field(ge=1)
    desktop_height: int = Field(ge=1)
    boot_id: str
    startup_id: str
    manifest_sha256: Sha256Hex
    app: str
    state: BrokerState
    session_id: Name | None = None
    deployment_id: str | None = None
    """From the image's current-boot readiness record, when the broker was given one."""
    readiness_startup_id: str | None = None
    """``startup_id`` of that readiness record (equal to ``startup_id`` when the record was
    written for this very broker start)."""
    pointer_prewarm_ok: bool | None = None
    """Whether the readiness record's real pointer prewarm succeeded."""


class LeaseRequest(StrictModel):
    """``POST /lease``: claim the desktop for one attempt of one task."""

    task_id: Label
    attempt_id: Label


class LeaseResponse(StrictModel):
    """The active lease; ``replayed`` when this identity already held it."""

    session_id: Name
    task_id: str
    attempt_id: str
    replayed: bool


class ResetRequest(StrictModel):
    """``POST /reset``: bring the application to its clean task state and capture frame 0.

    ``request_id`` must be exactly :func:`reset_request_id` of ``session_id``.
    """

    session_id: Name
    request_id: RequestId


def _without_unknown_pointer(data: dict[str, object]) -> dict[str, object]:
    """Drop ``pointer`` from a dumped model while it is ``None``.

    A broker that could not read its pointer then sends exactly what brokers from before the
    field sent, so clients of either age parse it; a missing field parses as ``None``.
    """
    if "pointer" in data and data["pointer"] is None:
        del data["pointer"]
    return data


class FrameInfo(StrictModel):
    """A stored PNG frame; fetch its bytes with ``GET /frames/{sequence}``.

    ``pointer`` is where the desktop's pointer was when the frame was captured (``[x, y]``
    in desktop pixels, read from the desktop itself, so moves the application or anything
    else made are included); ``None`` when the broker could not read it or predates the
    field.
    """

    sequence: int = Field(ge=0)
    sha256: Sha256Hex
    width: int = Field(ge=1)
    height: int = Field(ge=1)
    size: int = Field(ge=1)
    pointer: PointerPosition | None = None

    @model_serializer(mode="wrap")
    def _omit_unknown_pointer(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        return _without_unknown_pointer(handler(self))


class ResetResponse(StrictModel):
    """The sequence-0 frame of a clean desktop (cached: a replay returns the same frame)."""

    session_id: Name
    request_id: RequestId
    frame: FrameInfo
    next_index: int = Field(ge=0)
    replayed: bool


class ActionsRequest(StrictModel):
    """``POST /actions``: inject a validated batch as action indices ``expected_index``..."""

    session_id: Name
    request_id: ActionRequestId
    expected_index: int = Field(ge=0)
    actions: Annotated[tuple[Action, ...], Field(min_length=1)]

    @model_validator(mode="after")
    def _done_last(self) -> ActionsRequest:
        if any(action.type == "done" for action in self.actions[:-1]):
            raise ValueError("done must be the last action of the batch")
        return self


class ActionsEnvelope(StrictModel):
    """``POST /actions`` with the actions still unparsed: what a broker reads first.

    A malformed envelope is a 400; the actions themselves go through
    :func:`~autocad_bench.actions.validation.validate_batch` after the replay and index
    checks, so a bad batch is answered 422 with model-readable problems.
    """

    session_id: Name
    request_id: ActionRequestId
    expected_index: int = Field(ge=0)
    actions: list[JsonValue]


class ActionReceipt(StrictModel):
    """Proof that one action's input reached the desktop (not that the app accepted it).

    ``ok`` is false when injection failed; the broker then stops the batch, and later
    actions carry ``ok=false`` with no ``injected_at``.
    """

    index: int = Field(ge=0)
    type: str
    injected_at: datetime | None
    ok: bool
    error: str | None = None


class ActionsResponse(StrictModel):
    """Result of one batch: receipts, the post-batch frame and the next expected index."""

    session_id: Name
    request_id: ActionRequestId
    first_index: int = Field(ge=0)
    next_index: int = Field(ge=0)
    receipts: tuple[ActionReceipt, ...]
    frame: FrameInfo
    post_action_visual_stable: bool
    replayed: bool


class CheckpointRequest(StrictModel):
    """``POST /checkpoint``: save the drawing to the broker-owned attempt path."""

    session_id: Name
    request_id: RequestId


class ArtifactInfo(StrictModel):
    """A file the broker produced; fetch it with ``GET /artifacts/{name}``."""

    name: Name
    size: int = Field(ge=0)
    sha256: Sha256Hex


class CheckpointResponse(StrictModel):
    """The saved drawing; ``next_index`` is the action index the save reflects."""

    session_id: Name
    request_id: RequestId
    artifact: ArtifactInfo
    next_index: int = Field(ge=0)
    replayed: bool


class BrokerEvent(StrictModel):
    """One broker lifecycle event (lease, reset, batch, checkpoint, release, fault...)."""

    seq: int = Field(ge=0)
    at: datetime
    kind: str
    detail: JsonObject = Field(default_factory=dict)


class EventsResponse(StrictModel):
    """``GET /events``: every broker event so far, oldest first (read-only)."""
    events: tuple[BrokerEvent, ...]


class FrameEvent(StrictModel):
    """When and why one frame was captured (reset or the batch identified by request id).

    ``pointer`` is the frame's :attr:`FrameInfo.pointer`.
    """

    sequence: int = Field(ge=0)
    sha256: Sha256Hex
    width: int = Field(ge=1)
    height: int = Field(ge=1)
    captured_at: datetime
    request_id: str
    first_index: int = Field(ge=0)
    next_index: int = Field(ge=0)
    visual_stable: bool
    pointer: PointerPosition | None = None

    @model_serializer(mode="wrap")
    def _omit_unknown_pointer(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        return _without_unknown_pointer(handler(self))


class FrameEventsResponse(StrictModel):
    """``GET /frame-events``: the current session's captured frames, oldest first (empty without one)."""
    frame_events: tuple[FrameEvent, ...]


class StatusResponse(StrictModel):
    """``GET /status``: the broker's current session state (read-only)."""

    state: BrokerState
    session_id: Name | None
    task_id: str | None
    attempt_id: str | None
    next_index: int = Field(ge=0)
    last_frame_sequence: int | None
    checkpoints: tuple[ArtifactInfo, ...]


class ReleaseRequest(StrictModel):
    """``POST /release``: end the session; repeating it is harmless."""

    session_id: Name


class ReleaseResponse(StrictModel):
    """``POST /release``: the session ended; ``replayed`` when it had already been released."""
    session_id: Name
    released: Literal[True] = True
    replayed: bool


def reset_request_id(session_id: str) -> str:
    """The only reset request id a session accepts: ``reset-{session_id}``."""
    return f"reset-{session_id}"


def request_fingerprint(body: BaseModel | JsonValue) -> str:
    """SHA-256 of a request body's JSON value, deciding whether a replay is identical.

    Key order and whitespace do not matter (canonical JSON: sorted keys, no spaces, ASCII
    escapes); every value does. A model is fingerprinted through its JSON dump.
    """
    value = body.model_dump(mode="json") if isinstance(body, BaseModel) else body
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def actions_frame_body(response: ActionsResponse, png: bytes) -> tuple[bytes, dict[str, str]]:
    """Body and headers of an :data:`ACTIONS_FRAME_MEDIA_TYPE` answer (server side).

    ``png`` must be the frame ``response.frame`` describes; clients check it against
    ``frame.sha256``.
    """
    head = response.model_dump_json().encode()
    return head + png, {"Content-Type": ACTIONS_FRAME_MEDIA_TYPE, ACTIONS_LENGTH_HEADER: str(len(head))}


def wants_actions_frame(accept: str | None) -> bool:
    """Whether an ``Accept`` header value asks for :data:`ACTIONS_FRAME_MEDIA_TYPE`."""
    if not accept:
        return False
    return any(part.split(";", 1)[0].strip().lower() == ACTIONS_FRAME_MEDIA_TYPE for part in accept.split(","))
