"""The broker protocol of ``docs/broker-protocol.md``, written once, over a pluggable desktop.

:class:`BrokerService` is the aiohttp application both the real broker
(``autocad_bench_broker.server``) and the test fake
(:mod:`autocad_bench.testing.fake_broker`) serve. It owns every protocol rule:

- authentication before routing, body cap, JSON and schema checks, error bodies and status
  codes (:mod:`autocad_bench.broker.service.http`);
- the lease identity, the fixed reset key, state checks (412), the action ``expected_index``
  (409 with ``next_index``), whole-batch validation against the live display (422);
- exactly-once: answers of mutations are cached under their identity and replayed with
  ``replayed=true`` and no side effect; a request id reused with another body is a
  conflict; concurrent duplicates of one action request wait for the single execution
  (``Session.inflight``) and then replay it. Every mutation runs as a task shielded from its
  HTTP request, so a client that disconnects never leaves an executed but uncached mutation
  behind. A batch whose input was injected but whose frame could not be captured is
  answered 500, and that 500 is cached like a result so a replay cannot inject twice;
- frame bookkeeping (``FrameInfo``, frame events), the event log's shared kinds and the
  read-only routes.

What executes an action, takes a screenshot or saves a drawing is the
:class:`~autocad_bench.broker.service.driver.DesktopDriver`'s business.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import Callable, Coroutine, Sequence
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from aiohttp import web
from pydantic import BaseModel, JsonValue

from autocad_bench.actions import Action, BatchRejection, validate_batch
from autocad_bench.broker.protocol import (
    DEFAULT_MAX_BODY_BYTES,
    NAME_PATTERN,
    ActionsEnvelope,
    ActionsResponse,
    BrokerState,
    CheckpointRequest,
    CheckpointResponse,
    ErrorCode,
    ErrorResponse,
    EventsResponse,
    FrameEvent,
    FrameEventsResponse,
    FrameInfo,
    HealthResponse,
    LeaseRequest,
    PointerPosition,
    ReleaseRequest,
    ReleaseResponse,
    ResetRequest,
    ResetResponse,
    Route,
    StatusResponse,
    actions_frame_body,
    request_fingerprint,
    reset_request_id,
    wants_actions_frame,
)
from autocad_bench.broker.service.driver import DesktopDriver, EncodedFrame, FrameUnavailable
from autocad_bench.broker.service.events import EventLog, describe_error
from autocad_bench.broker.service.http import (
    Abort,
    Handler,
    Listener,
    Middleware,
    auth_middleware,
    binary,
    error_middleware,
    ok,
    parse_body,
)
from autocad_bench.broker.service.state import CachedAnswer, Session
from autocad_bench.models import JsonObject

D = TypeVar("D")
_M = TypeVar("_M", bound=BaseModel)
_T = TypeVar("_T")

_MAX_SEQUENCE_DIGITS = 9
_PLAIN_NAME = re.compile(NAME_PATTERN)


def is_plain_name(name: str) -> bool:
    """Whether ``name`` is one path segment allowed by the protocol (``Name`` pattern)."""
    return _PLAIN_NAME.fullmatch(name) is not None


class BrokerService(Generic[D]):
    """Protocol state of one broker plus the desktop driver it runs requests on.

    ``token`` is the bearer token (kept only as the expected header bytes), or a callable
    read on every request (test brokers re-arm theirs). ``middlewares``
    go *outside* authentication (tests use them to lose or damage messages). ``max_actions``
    is the per-session action budget a batch is validated against (``None``: only the batch's
    own length, as a test broker does). ``actions_frame=False`` never sends the frame with
    an actions answer (clients then fetch it).
    """

    def __init__(
        self,
        driver: DesktopDriver[D],
        token: str | Callable[[], str],
        *,
        events: EventLog | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_actions: int | None = None,
        actions_frame: bool = True,
        middlewares: Sequence[Middleware] = (),
    ) -> None:
        self.driver = driver
        self.events = events if events is not None else EventLog()
        self.max_body_bytes = max_body_bytes
        self.max_actions = max_actions
        self.actions_frame = actions_frame
        self._auth = auth_middleware(token)
        self._middlewares = tuple(middlewares)
        self.listener = Listener()
        self._sessions: dict[str, Session[D]] = {}
        self._current: Session[D] | None = None
        self._counter = 0
        self._lease_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()

    # Application ------------------------------------------------------------------------------

    def make_app(self) -> web.Application:
        """The aiohttp application: every :class:`Route`, behind authentication and error mapping."""
        app = web.Application(
            middlewares=[*self._middlewares, self._auth, error_middleware(self._fault)],
            client_max_size=self.max_body_bytes,
        )
        routes: dict[Route, Handler] = {
            Route.HEALTH: self._health,
            Route.LEASE: self._lease,
            Route.RESET: self._reset,
            Route.ACTIONS: self._actions,
            Route.FRAME: self._frame,
            Route.CHECKPOINT: self._checkpoint,
            Route.ARTIFACT: self._artifact,
            Route.EVENTS: self._events,
            Route.FRAME_EVENTS: self._frame_events,
            Route.STATUS: self._status,
            Route.RELEASE: self._release,
        }
        for route, handler in routes.items():
            app.router.add_route(route.method, route.path, handler)
        return app

    async def listen(self, host: str = "127.0.0.1", port: int = 0, *, shutdown_timeout: float = 0.5) -> str:
        """Serve :meth:`make_app` on ``host:port`` (0: a free port); returns the URL.

        Raises ``OSError`` if the address cannot be bound.
        """
        return await self.listener.start(self.make_app(), host, port, shutdown_timeout=shutdown_timeout)

    async def close(self) -> None:
        """Stop listening (in-flight requests get the shutdown timeout). Idempotent."""
        await self.listener.close()

    @property
    def current(self) -> Session[D] | None:
        """The active or last session (what the read-only routes describe)."""
        return self._current

    @property
    def state(self) -> BrokerState:
        return self._current.state if self._current is not None else "idle"

    def clear(self) -> None:
        """Forget every session and event (a test broker reused across examples)."""
        self._sessions.clear()
        self._current = None
        self.events.clear()

    def _fault(self, request: web.Request, error: Exception) -> None:
        self.events.add("fault", {"operation": f"{request.method} {request.path}", "error": describe_error(error)})

    def _session(self, session_id: str) -> Session[D]:
        session = self._sessions.get(session_id)
        if session is None:
            raise Abort(ErrorCode.UNKNOWN_SESSION, "unknown session")
        return session

    async def _parse(self, request: web.Request, model: type[_M]) -> _M:
        return await parse_body(request, model, self.max_body_bytes)

    def _spawn(self, coroutine: Coroutine[Any, Any, _T]) -> asyncio.Task[_T]:
        """Run a mutation as its own task, independent of the request that asked for it."""
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)

        def finished(done: asyncio.Task[_T]) -> None:
            self._tasks.discard(done)
            if not done.cancelled():
                done.exception()  # retrieved here: the requester may have gone away

        task.add_done_callback(finished)
        return task

    async def _shielded(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        return await asyncio.shield(self._spawn(coroutine))

    # Read-only routes -------------------------------------------------------------------------

    async def _health(self, request: web.Request) -> web.Response:
        identity = self.driver.identity
        width, height = self.driver.desktop_size()
        current = self._current
        return ok(
            HealthResponse.model_validate(
                {
                    "broker_version": identity.broker_version,
                    "input_driver_version": identity.input_driver_version,
                    "pid": identity.pid,
                    "interactive_session_id": identity.interactive_session_id,
                    "desktop_width": width,
                    "desktop_height": height,
                    "boot_id": identity.boot_id,
                    "startup_id": identity.startup_id,
                    "manifest_sha256": identity.manifest_sha256,
                    "app": identity.app,
                    "state": self.state,
                    "session_id": current.session_id if current else None,
                    **(await self.driver.readiness_fields()),
                }
            )
        )

    async def _frame(self, request: web.Request) -> web.Response:
        raw = request.match_info["sequence"]
        if not (raw.isascii() and raw.isdigit()) or len(raw) > _MAX_SEQUENCE_DIGITS:
            raise Abort(ErrorCode.BAD_REQUEST, "frame sequence must be a non-negative integer")
        sequence = int(raw)
        session = self._current
        if session is None or sequence >= len(session.frames):
            raise Abort(ErrorCode.NOT_FOUND, f"no frame {sequence}")
        info = session.frames[sequence]
        try:
            data = await self.driver.read_frame(session, info)
        except FrameUnavailable as error:
            self.events.add("fault", {"operation": "frame", "sequence": sequence, "error": str(error)})
            raise Abort(ErrorCode.INTERNAL_ERROR, "the stored frame is unavailable") from None
        return binary(data, "image/png", info.sha256)

    async def _artifact(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        # Refused before any file system access: only plain names recorded by a checkpoint.
        if not is_plain_name(name):
            raise Abort(ErrorCode.BAD_REQUEST, "artifact name must be a single plain file name")
        session = self._current
        info = session.artifacts.get(name) if session is not None else None
        if session is None or info is None:
            raise Abort(ErrorCode.NOT_FOUND, "no such artifact")
        try:
            data = await self.driver.read_artifact(session, info)
        except FrameUnavailable as error:
            self.events.add("fault", {"operation": "artifact", "name": name, "error": str(error)})
            raise Abort(ErrorCode.INTERNAL_ERROR, "the stored artifact is unavailable") from None
        return binary(data, "application/octet-stream", info.sha256)

    async def _events(self, request: web.Request) -> web.Response:
        return ok(EventsResponse(events=self.events.snapshot()))

    async def _frame_events(self, request: web.Request) -> web.Response:
        session = self._current
        return ok(FrameEventsResponse(frame_events=tuple(session.frame_events) if session else ()))

    async def _status(self, request: web.Request) -> web.Response:
        session = self._current
        return ok(
            StatusResponse(
                state=self.state,
                session_id=session.session_id if session else None,
                task_id=session.task_id if session else None,
                attempt_id=session.attempt_id if session else None,
                next_index=session.next_index if session else 0,
                last_frame_sequence=session.last_frame_sequence if session else None,
                checkpoints=tuple(session.checkpoint_artifacts) if session else (),
            )
        )

    # Lease ------------------------------------------------------------------------------------

    async def _lease(self, request: web.Request) -> web.Response:
        body = await self._parse(request, LeaseRequest)
        identity = (body.task_id, body.attempt_id)
        async with self._lease_lock:
            current = self._current
            if current is not None and current.state != "released":
                if current.identity != identity:
                    raise Abort(ErrorCode.LEASE_CONFLICT, "the desktop is leased to another attempt")
                return ok(current.lease_response(replayed=True))
            for known in self._sessions.values():
                # An identity names one session for good: a released one is not revived.
                if known.identity == identity:
                    return ok(known.lease_response(replayed=True))
            self._counter += 1
            # The random part keeps ids of a restarted broker from matching old ones.
            session_id = f"session-{self._counter}-{secrets.token_hex(4)}"
            session = Session(session_id, body.task_id, body.attempt_id, await self.driver.open_session(session_id))
            self._sessions[session_id] = session
            self._current = session
            self.events.add("lease", {"session_id": session_id, "task_id": body.task_id, "attempt_id": body.attempt_id})
            return ok(session.lease_response(replayed=False))

    # Reset ------------------------------------------------------------------------------------

    async def _reset(self, request: web.Request) -> web.Response:
        body = await self._parse(request, ResetRequest)
        session = self._session(body.session_id)
        expected = reset_request_id(session.session_id)
        if body.request_id != expected:
            raise Abort(ErrorCode.RESET_KEY_CONFLICT, f"reset request_id must be {expected!r}")
        if session.reset is not None:
            return ok(session.reset.model_copy(update={"replayed": True}))
        return ok(await self._shielded(self._do_reset(session)))

    async def _do_reset(self, session: Session[D]) -> ResetResponse:
        async with session.lock:
            if session.reset is not None:  # a concurrent duplicate finished first
                return session.reset.model_copy(update={"replayed": True})
            if session.state != "leased":
                raise Abort(ErrorCode.WRONG_STATE, f"session is {session.state}; reset needs a fresh lease")
            outcome = await self.driver.reset(session)
            request_id = reset_request_id(session.session_id)
            info = self._record_frame(session, outcome.frame, request_id, 0, 0, stable=True, pointer=outcome.pointer)
            response = ResetResponse(
                session_id=session.session_id, request_id=request_id, frame=info, next_index=0, replayed=False
            )
            session.reset = response
            session.state = "ready"
            detail: JsonObject = {"session_id": session.session_id, "frame": info.sequence, "frame_sha256": info.sha256}
            self.events.add("reset", detail | outcome.detail)
            return response

    # Actions ----------------------------------------------------------------------------------

    async def _actions(self, request: web.Request) -> web.Response:
        envelope = await self._parse(request, ActionsEnvelope)
        fingerprint = request_fingerprint(envelope)
        session = self._session(envelope.session_id)
        request_id = envelope.request_id
        with_frame = self.actions_frame and wants_actions_frame(request.headers.get("Accept"))
        while True:
            cached = session.actions.get(request_id)
            if cached is not None:
                replayed = _replayed_model(cached, fingerprint, ActionsResponse)
                return await self._actions_answer(session, replayed, with_frame)
            running = session.inflight.get(request_id)
            if running is None or running.done():
                break
            # A duplicate of a request that is executing right now: wait, then replay it.
            await asyncio.wait([running])
        task = self._spawn(self._execute_actions(session, envelope, fingerprint))
        session.inflight[request_id] = task
        task.add_done_callback(lambda _: _forget(session.inflight, request_id, task))
        return await self._actions_answer(session, await asyncio.shield(task), with_frame)

    async def _actions_answer(self, session: Session[D], response: ActionsResponse, with_frame: bool) -> web.Response:
        """The JSON answer, or JSON followed by the post-batch PNG when the client asked.

        If the frame cannot be read back the answer is plain JSON, and the client fetches
        the frame with ``GET /frames/{sequence}``.
        """
        if not with_frame:
            return ok(response)
        try:
            data = await self.driver.read_frame(session, response.frame)
        except FrameUnavailable as error:
            self.events.add("fault", {"operation": "frame", "sequence": response.frame.sequence, "error": str(error)})
            return ok(response)
        body, headers = actions_frame_body(response, data)
        return web.Response(body=body, headers=headers)

    async def _execute_actions(
        self, session: Session[D], envelope: ActionsEnvelope, fingerprint: str
    ) -> ActionsResponse:
        async with session.lock:
            request_id = envelope.request_id
            replayed = _replay_or_check_ready(session, session.actions, request_id, fingerprint, ActionsResponse)
            if replayed is not None:
                return replayed
            if envelope.expected_index != session.next_index:
                raise Abort(
                    ErrorCode.INDEX_CONFLICT,
                    f"expected_index is {envelope.expected_index}, the broker is at {session.next_index}",
                    next_index=session.next_index,
                )
            display = await self.driver.live_display()
            budget = self.max_actions - session.next_index if self.max_actions is not None else len(envelope.actions)
            # native=True: the broker performs every action type; the harness decides which
            # types a model's tool mode may use.
            checked = validate_batch({"actions": envelope.actions}, display, budget, native=True)
            if isinstance(checked, BatchRejection):
                problems = checked.messages()
                rejected: JsonObject = {
                    "session_id": session.session_id,
                    "request_id": envelope.request_id,
                    "problems": list[JsonValue](problems),
                }
                self.events.add("batch_rejected", rejected)
                raise Abort(ErrorCode.BATCH_REJECTED, "batch rejected; nothing was injected", problems=problems)
            actions = checked.actions
            first = session.next_index
            outcome = await self.driver.run_batch(session, envelope.request_id, actions, first, len(session.frames))
            # From here on the input happened: the indices are consumed whatever comes next.
            session.next_index = first + len(actions)
            detail: JsonObject = {
                "session_id": session.session_id,
                "request_id": envelope.request_id,
                "first_index": first,
                "next_index": session.next_index,
                "actions": [_wire(action) for action in actions],
            }
            failed = next((receipt for receipt in outcome.receipts if not receipt.ok), None)
            if failed is not None:
                detail["failed_index"] = failed.index
                detail["error"] = failed.error
            if outcome.frame is None:
                detail["frame_error"] = outcome.error
                self.events.add("actions", detail | outcome.detail)
                error = ErrorResponse(
                    code=ErrorCode.INTERNAL_ERROR,
                    message="the input was injected but no post-batch frame could be captured",
                )
                # Cached like a result: a replay must repeat this answer, never the input.
                session.actions[envelope.request_id] = CachedAnswer(fingerprint, error)
                raise Abort.of(error)
            info = self._record_frame(
                session,
                outcome.frame,
                envelope.request_id,
                first,
                session.next_index,
                stable=outcome.stable,
                pointer=outcome.pointer,
            )
            response = ActionsResponse(
                session_id=session.session_id,
                request_id=envelope.request_id,
                first_index=first,
                next_index=session.next_index,
                receipts=outcome.receipts,
                frame=info,
                post_action_visual_stable=outcome.stable,
                replayed=False,
            )
            session.actions[envelope.request_id] = CachedAnswer(fingerprint, response)
            detail.update({"frame": info.sequence, "frame_sha256": info.sha256, "visual_stable": outcome.stable})
            self.events.add("actions", detail | outcome.detail)
            return response

    def _record_frame(
        self,
        session: Session[D],
        png: EncodedFrame,
        request_id: str,
        first_index: int,
        next_index: int,
        *,
        stable: bool,
        pointer: PointerPosition | None,
    ) -> FrameInfo:
        """Append the frame's ``FrameInfo`` and ``FrameEvent`` (with the pointer read with it)."""
        sequence = len(session.frames)
        info = FrameInfo(
            sequence=sequence,
            sha256=png.sha256,
            width=png.width,
            height=png.height,
            size=len(png.data),
            pointer=pointer,
        )
        session.frames.append(info)
        session.frame_events.append(
            FrameEvent(
                sequence=sequence,
                sha256=png.sha256,
                width=png.width,
                height=png.height,
                captured_at=datetime.now(UTC),
                request_id=request_id,
                first_index=first_index,
                next_index=next_index,
                visual_stable=stable,
                pointer=pointer,
            )
        )
        return info

    # Checkpoint -------------------------------------------------------------------------------

    async def _checkpoint(self, request: web.Request) -> web.Response:
        body = await self._parse(request, CheckpointRequest)
        fingerprint = request_fingerprint(body)
        session = self._session(body.session_id)
        cached = session.checkpoints.get(body.request_id)
        if cached is not None:
            return ok(_replayed_model(cached, fingerprint, CheckpointResponse))
        return ok(await self._shielded(self._do_checkpoint(session, body, fingerprint)))

    async def _do_checkpoint(
        self, session: Session[D], body: CheckpointRequest, fingerprint: str
    ) -> CheckpointResponse:
        async with session.lock:
            checkpoints = session.checkpoints
            replayed = _replay_or_check_ready(session, checkpoints, body.request_id, fingerprint, CheckpointResponse)
            if replayed is not None:
                return replayed
            outcome = await self.driver.checkpoint(session, body.request_id)
            artifact = outcome.artifact
            response = CheckpointResponse(
                session_id=session.session_id,
                request_id=body.request_id,
                artifact=artifact,
                next_index=session.next_index,
                replayed=False,
            )
            session.checkpoints[body.request_id] = CachedAnswer(fingerprint, response)
            session.artifacts[artifact.name] = artifact
            session.checkpoint_artifacts.append(artifact)
            detail: JsonObject = {
                "session_id": session.session_id,
                "request_id": body.request_id,
                "artifact": artifact.model_dump(mode="json"),
                "next_index": session.next_index,
            }
            self.events.add("checkpoint", detail | outcome.detail)
            return response

    # Release ----------------------------------------------------------------------------------

    async def _release(self, request: web.Request) -> web.Response:
        body = await self._parse(request, ReleaseRequest)
        session = self._session(body.session_id)
        if session.released is not None:
            return ok(session.released.model_copy(update={"replayed": True}))
        return ok(await self._shielded(self._do_release(session)))

    async def _do_release(self, session: Session[D]) -> ReleaseResponse:
        async with session.lock:
            if session.released is not None:
                return session.released.model_copy(update={"replayed": True})
            detail = await self.driver.release(session)
            session.state = "released"
            session.released = ReleaseResponse(session_id=session.session_id, replayed=False)
            released: JsonObject = {"session_id": session.session_id}
            self.events.add("release", released | detail)
            return session.released


def _wire(action: Action) -> JsonObject:
    wire: JsonObject = action.model_dump(mode="json")
    return wire


def _forget(inflight: dict[str, asyncio.Task[Any]], request_id: str, task: asyncio.Task[Any]) -> None:
    if inflight.get(request_id) is task:
        del inflight[request_id]


def _replay_or_check_ready(
    session: Session[Any], cache: dict[str, CachedAnswer], request_id: str, fingerprint: str, model: type[_M]
) -> _M | None:
    """Under the session lock: the replay of an answered request, else ``None`` if the session
    may execute it now; :class:`Abort` for a conflict, a cached error or a session not ``ready``."""
    cached = cache.get(request_id)
    if cached is not None:
        return _replayed_model(cached, fingerprint, model)
    if session.state != "ready":
        raise Abort(ErrorCode.WRONG_STATE, f"session is {session.state}, not ready")
    return None


def _replayed_model(cached: CachedAnswer, fingerprint: str, model: type[_M]) -> _M:
    """The cached answer as a replay, or the conflict/cached error it stands for."""
    if cached.fingerprint != fingerprint:
        raise Abort(ErrorCode.REQUEST_CONFLICT, "request_id was already used with another body")
    if isinstance(cached.response, ErrorResponse):
        raise Abort.of(cached.response)
    if not isinstance(cached.response, model):
        raise TypeError(f"cached {type(cached.response).__name__} is not a {model.__name__}")
    return cached.response.model_copy(update={"replayed": True})


__all__ = ["BrokerService", "is_plain_name"]
