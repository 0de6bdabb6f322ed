"""BrokerClient against the in-process fake broker, over real HTTP on loopback."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import socket
import struct
import time
import zlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from yarl import URL

from autocad_bench.actions import (
    ClickAction,
    DoneAction,
    KeyAction,
    MoveAction,
    TypeAction,
    ValidatedBatch,
    WaitAction,
    action_request_id,
    validate_batch,
)
from autocad_bench.broker import (
    BrokerClient,
    BrokerConflict,
    BrokerHTTPError,
    BrokerProtocolError,
    BrokerTransportExhausted,
)
from autocad_bench.broker.protocol import Route
from autocad_bench.errors import ConfigError
from autocad_bench.infrastructure.models import BROKER_TOKEN_ENV, BROKER_URL_ENV
from autocad_bench.providers.models import DisplaySize
from autocad_bench.testing.fake_broker import FakeBroker, Fault, FaultKind

SMALL = DisplaySize(width=64, height=48)
TOKEN = "tok-3f9a1c77e2b94d0c8a5d"


@pytest.fixture
async def broker() -> AsyncIterator[FakeBroker]:
    async with FakeBroker(token=TOKEN, display=SMALL) as fake:
        yield fake


def make_client(fake: FakeBroker, **options: Any) -> BrokerClient:
    options = {"wait_initial_s": 0.0, "wait_max_s": 0.0, "wait_jitter_s": 0.0, **options}
    return BrokerClient(fake.url, fake.token, **options)


@pytest.fixture
def client(broker: FakeBroker) -> BrokerClient:
    return make_client(broker)


async def ready(client: BrokerClient) -> str:
    lease = await client.lease("task-1", "attempt-1")
    await client.reset(lease.session_id)
    return lease.session_id


def rid(n: int) -> str:
    return action_request_id("attempt-1", f"toolu_{n}", 0)


BATCH = (ClickAction(x=5, y=6, button="left", count=1), TypeAction(text="LINE"), KeyAction(keys=("enter",)))


def routes(fake: FakeBroker, route: Route) -> list[Any]:
    return [r for r in fake.requests if r.route == route.value]


# Health, auth, configuration -----------------------------------------------------------------


async def test_health_reports_identity(client: BrokerClient, broker: FakeBroker) -> None:
    health = await client.health()
    assert (health.desktop_width, health.desktop_height) == (64, 48)
    assert health.state == "idle" and health.session_id is None
    assert health.boot_id == broker.boot_id


@pytest.mark.parametrize("header", [None, "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x"])
async def test_unauthorized_reveals_nothing(broker: FakeBroker, header: str | None) -> None:
    headers = {"Authorization": header} if header else {}
    async with aiohttp.ClientSession() as session, session.get(f"{broker.url}/status", headers=headers) as response:
        assert response.status == 401
        assert await response.json() == {
            "code": "unauthorized",
            "message": "unauthorized",
            "next_index": None,
            "problems": [],
        }
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{broker.url}/no-such-route", headers=headers) as response,
    ):
        assert response.status == 401


async def test_auth_failure_raises_http_error_without_retry(broker: FakeBroker) -> None:
    client = BrokerClient(broker.url, "not-the-token", wait_initial_s=0, wait_jitter_s=0)
    with pytest.raises(BrokerHTTPError) as caught:
        await client.health()
    assert (caught.value.status, caught.value.code) == (401, "unauthorized")
    assert len(broker.requests) == 1


def test_token_never_in_repr() -> None:
    client = BrokerClient("http://127.0.0.1:9", TOKEN)
    assert TOKEN not in repr(client) and TOKEN not in str(client)
    assert TOKEN not in repr(vars(client).get("_wait"))


@pytest.mark.parametrize(
    ("url", "options"),
    [
        ("ftp://127.0.0.1:1", {}),
        ("http://user:pw@127.0.0.1:1", {}),
        ("http://127.0.0.1:1/?token=x", {}),
        ("http://127.0.0.1:1", {"max_attempts": 9}),
        ("http://127.0.0.1:1", {"max_attempts": 0}),
        ("http://127.0.0.1:1", {"operation_deadline_s": 0}),
    ],
)
def test_unusable_settings_are_refused(url: str, options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        BrokerClient(url, TOKEN, **options)
    with pytest.raises(ValueError):
        BrokerClient("http://127.0.0.1:1", "")


def test_from_environ() -> None:
    client = BrokerClient.from_environ({BROKER_URL_ENV: "http://127.0.0.1:8765/", BROKER_TOKEN_ENV: TOKEN})
    assert client.base_url == "http://127.0.0.1:8765"
    with pytest.raises(ConfigError) as caught:
        BrokerClient.from_environ({BROKER_TOKEN_ENV: TOKEN})
    assert [p.location for p in caught.value.problems] == [BROKER_URL_ENV]
    assert TOKEN not in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        BrokerClient.from_environ({BROKER_URL_ENV: "ftp://x", BROKER_TOKEN_ENV: TOKEN})
    assert TOKEN not in str(caught.value)


async def test_token_absent_from_logs_and_errors(broker: FakeBroker, caplog: pytest.LogCaptureFixture) -> None:
    client = make_client(broker, max_attempts=3)
    broker.add_faults(*[Fault(FaultKind.TRUNCATE_RESPONSE)] * 3)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(BrokerTransportExhausted) as caught:
        await client.status()
    seen = [caught.value, caught.value.__cause__, caught.value.__context__]
    text = " ".join(f"{e!s} {e!r}" for e in seen if e is not None)
    text += " ".join(f"{r.getMessage()} {r.__dict__!r}" for r in caplog.records)
    assert caplog.records, "retries are logged"
    assert TOKEN not in text


# Lease and reset ---------------------------------------------------------------------------------


async def test_lease_replay_and_conflict(client: BrokerClient, broker: FakeBroker) -> None:
    first = await client.lease("task-1", "attempt-1")
    again = await client.lease("task-1", "attempt-1")
    assert (first.replayed, again.replayed) == (False, True)
    assert again.session_id == first.session_id
    with pytest.raises(BrokerConflict) as caught:
        await client.lease("task-1", "attempt-2")
    assert caught.value.code == "lease_conflict" and caught.value.next_index is None


async def test_lost_lease_response_is_replayed(client: BrokerClient, broker: FakeBroker) -> None:
    broker.add_faults(Fault(FaultKind.DROP_RESPONSE, Route.LEASE))
    lease = await client.lease("task-1", "attempt-1")
    assert lease.replayed
    assert [e.kind for e in (await client.events()).events] == ["lease"]


async def test_reset_replay_returns_the_cached_first_frame(client: BrokerClient, broker: FakeBroker) -> None:
    lease = await client.lease("task-1", "attempt-1")
    broker.add_faults(Fault(FaultKind.DROP_RESPONSE, Route.RESET), Fault(FaultKind.TRUNCATE_RESPONSE, Route.RESET))
    first = await client.reset(lease.session_id)
    again = await client.reset(lease.session_id)
    assert first.replayed and again.replayed
    assert first.frame == again.frame and first.frame.sequence == 0 and first.next_index == 0
    assert [e.kind for e in (await client.events()).events] == ["lease", "reset"]


async def test_reset_with_another_key_conflicts(client: BrokerClient, broker: FakeBroker) -> None:
    lease = await client.lease("task-1", "attempt-1")
    headers = {"Authorization": f"Bearer {TOKEN}"}
    body = {"session_id": lease.session_id, "request_id": "reset-other"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{broker.url}/reset", json=body, headers=headers) as response,
    ):
        assert response.status == 409
        assert (await response.json())["code"] == "reset_key_conflict"


async def test_unknown_session_is_404(client: BrokerClient) -> None:
    with pytest.raises(BrokerHTTPError) as caught:
        await client.reset("session-99")
    assert (caught.value.status, caught.value.code) == (404, "unknown_session")


async def test_actions_before_reset_are_refused(client: BrokerClient, broker: FakeBroker) -> None:
    lease = await client.lease("task-1", "attempt-1")
    with pytest.raises(BrokerHTTPError) as caught:
        await client.actions(lease.session_id, rid(0), 0, BATCH)
    assert (caught.value.status, caught.value.code) == (412, "wrong_state")
    assert broker.injected == []


# Actions -----------------------------------------------------------------------------------------


async def test_actions_inject_in_order_with_receipts(client: BrokerClient, broker: FakeBroker) -> None:
    session = await ready(client)
    result = await client.actions(session, rid(0), 0, BATCH)
    assert (result.first_index, result.next_index, result.replayed) == (0, 3, False)
    assert [(r.index, r.type, r.ok) for r in result.receipts] == [
        (0, "click", True),
        (1, "type", True),
        (2, "key", True),
    ]
    assert result.frame.sequence == 1 and result.post_action_visual_stable
    assert [(i.index, i.action) for i in broker.injected] == list(enumerate(BATCH))


async def test_validated_batch_is_accepted(client: BrokerClient, broker: FakeBroker) -> None:
    session = await ready(client)
    batch = validate_batch({"actions": [{"type": "move", "x": 1, "y": 2}, {"type": "done"}]}, SMALL, 10)
    assert isinstance(batch, ValidatedBatch)
    result = await client.actions(session, rid(0), 0, batch)
    assert result.next_index == 2


async def test_identical_replay_is_cached_without_side_effects(client: BrokerClient, broker: FakeBroker) -> None:
    session = await ready(client)
    first = await client.actions(session, rid(0), 0, BATCH)
    events_before = (await client.events()).events
    frames_before = (await client.frame_events()).frame_events
    again = await client.actions(session, rid(0), 0, BATCH)
    assert again.replayed and again.model_copy(update={"replayed": False}) == first
    assert len(broker.injected) == 3
    assert (await client.events()).events == events_before
    assert (await client.frame_events()).frame_events == frames_before


async def test_reused_id_with_another_body_conflicts(client: BrokerClient, broker: FakeBroker) -> None:
    session = await ready(client)
    await client.actions(session, rid(0), 0, BATCH)
    with pytest.raises(BrokerConflict) as caught:
        await client.actions(session, rid(0), 0, (MoveAction(x=1, y=1),))
    assert caught.value.code == "request_conflict"
    with pytest.raises(BrokerConflict):
        await client.actions(session, rid(0), 3, BATCH)
    assert len(broker.injected) == 3
    assert len(routes(broker, Route.ACTIONS)) == 3, "HTTP errors are never retried"


async def test_wrong_expected_index_conflicts_with_next_index(client: BrokerClient, broker: FakeBroker) -> None:
    session = await ready(client)
    await client.actions(session, rid(0), 0, BATCH)
    for wrong in (0, 2, 4):
        with pytest.raises(BrokerConflict) as caught:
            await client.actions(session, rid(1), wrong, (MoveAction(x=1, y=1),))
        assert (caught.value.status, caught.value.code, caught.value.next_index) == (409, "index_conflict", 3)
    result = await client.actions(session, rid(1), 3, (MoveAction(x=1, y=1),))
    assert (result.first_index, result.next_index) == (3, 4)


async def test_broker_side_validation_rejects_with_422(client: BrokerClient, broker: FakeBroker) -> None:
    session = await ready(client)
    with pytest.raises(BrokerHTTPError) as caught:
        await client.actions(session, rid(0), 0, (MoveAction(x=1, y=1), MoveAction(x=64, y=0)))
    assert (caught.value.status, caught.value.code) == (422, "batch_rejected")
    assert caught.value.problems == ("actions[1].x: 64 is outside the 64x48 display; x must be between 0 and 63",)
    assert broker.injected == []


async def test_http_500_is_not_retried(client: BrokerClient, broker: FakeBroker) -> None:
    session = await ready(client)
    broker.add_faults(Fault(FaultKind.HTTP_ERROR, Route.ACTIONS, status=500))
    with pytest.raises(BrokerHTTPError) as caught:
        await client.actions(session, rid(0), 0, BATCH)
    assert (caught.value.status, caught.value.code) == (500, "internal_error")
    assert not isinstance(caught.value, BrokerTransportExhausted)
    assert len(routes(broker, Route.ACTIONS)) == 1
    assert broker.injected == []


async def test_non_protocol_error_body_still_maps_to_http_error(broker: FakeBroker) -> None:
    async def plain_503(request: Any) -> web.Response:
        return web.Response(status=503, text="upstream down")

    app = web.Application()
    app.router.add_get("/health", plain_503)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        client = BrokerClient(f"http://127.0.0.1:{runner.addresses[0][1]}", TOKEN)
        with pytest.raises(BrokerHTTPError) as caught:
            await client.health()
        assert (caught.value.status, caught.value.code, caught.value.message) == (503, "http_503", "upstream down")
    finally:
        await runner.cleanup()


@pytest.mark.parametrize(
    "kind",
    [FaultKind.DROP_REQUEST, FaultKind.DROP_RESPONSE, FaultKind.TRUNCATE_RESPONSE, FaultKind.CORRUPT_RESPONSE],
)
async def test_transport_failures_are_retried_on_fresh_connections(
    client: BrokerClient, broker: FakeBroker, kind: FaultKind
) -> None:
    session = await ready(client)
    broker.add_faults(*[Fault(kind, Route.ACTIONS)] * 3)
    result = await client.actions(session, rid(0), 0, BATCH)
    attempts = routes(broker, Route.ACTIONS)
    assert len(attempts) == 4
    assert len({a.peer_port for a in attempts}) == 4, "every attempt uses a new connection"
    assert len({a.body_sha256 for a in attempts}) == 1, "every attempt resends the same body"
    assert result.replayed == (kind is not FaultKind.DROP_REQUEST)
    assert [i.index for i in broker.injected] == [0, 1, 2]
    assert {i.request_id for i in broker.injected} == {rid(0)}


async def test_keep_alive_reuses_one_connection_then_closes_it(client: BrokerClient, broker: FakeBroker) -> None:
    async with client.keep_alive():
        session = await ready(client)
        await client.actions(session, rid(0), 0, BATCH)
        await client.frame(1)
        await client.status()
        pool = client._pool
        assert pool is not None and not pool.closed
    assert len({r.peer_port for r in broker.requests}) == 1, "first attempts share the kept-alive connection"
    assert pool.closed and client._pool is None, "leaving the block closes the pool"
    await client.status()
    await client.status()
    assert len({r.peer_port for r in broker.requests}) == 3, "outside the block every attempt is a new connection"


async def test_keep_alive_blocks_nest(client: BrokerClient, broker: FakeBroker) -> None:
    async with client.keep_alive():
        async with client.keep_alive():
            await client.status()
        await client.status()
        assert client._pool is not None and not client._pool.closed
    assert client._pool is None
    assert len({r.peer_port for r in broker.requests}) == 1


@pytest.mark.parametrize(
    "kind",
    [FaultKind.DROP_REQUEST, FaultKind.DROP_RESPONSE, FaultKind.TRUNCATE_RESPONSE, FaultKind.CORRUPT_RESPONSE],
)
async def test_retries_never_reuse_a_kept_alive_connection(
    client: BrokerClient, broker: FakeBroker, kind: FaultKind
) -> None:
    async with client.keep_alive():
        session = await ready(client)
        (pooled,) = {r.peer_port for r in broker.requests}
        broker.add_faults(*[Fault(kind, Route.ACTIONS)] * 3)
        result = await client.actions(session, rid(0), 0, BATCH)
        again = await client.actions(session, rid(1), 3, (MoveAction(x=1, y=1),))
    attempts = routes(broker, Route.ACTIONS)
    assert len(attempts) == 5
    assert attempts[0].peer_port == pooled, "a first attempt may reuse the healthy kept-alive connection"
    retries = [a.peer_port for a in attempts[1:4]]
    assert len(set(retries)) == 3 and pooled not in retries, "every retry opens a new connection"
    assert len({a.body_sha256 for a in attempts[:4]}) == 1, "every attempt resends the same body"
    assert result.replayed == (kind is not FaultKind.DROP_REQUEST) and again.next_index == 4
    assert [i.index for i in broker.injected] == [0, 1, 2, 3]


async def test_no_hidden_resend_on_a_kept_alive_connection(broker: FakeBroker) -> None:
    client = make_client(broker, max_attempts=1)
    async with client.keep_alive():
        await client.status()
        broker.add_faults(Fault(FaultKind.DROP_REQUEST, Route.STATUS))
        with pytest.raises(BrokerTransportExhausted) as caught:
            await client.status()
    assert caught.value.attempts == 1
    assert len(routes(broker, Route.STATUS)) == 2, "aiohttp must not resend the GET on its own"


async def test_keep_alive_after_a_transport_failure_still_reaches_the_broker(
    client: BrokerClient, broker: FakeBroker
) -> None:
    async with client.keep_alive():
        session = await ready(client)
        broker.add_faults(Fault(FaultKind.DROP_RESPONSE, Route.ACTIONS))
        await client.actions(session, rid(0), 0, BATCH)
        for n in range(1, 4):
            await client.actions(session, rid(n), 2 + n, (MoveAction(x=1, y=1),))
    assert [i.index for i in broker.injected] == list(range(6))


async def test_eight_attempts_at_most(client: BrokerClient, broker: FakeBroker) -> None:
    session = await ready(client)
    broker.add_faults(*[Fault(FaultKind.DROP_REQUEST, Route.ACTIONS)] * 20)
    with pytest.raises(BrokerTransportExhausted) as caught:
        await client.actions(session, rid(0), 0, BATCH)
    assert (caught.value.attempts, caught.value.bound, caught.value.operation) == (8, "attempts", "POST /actions")
    assert "ServerDisconnectedError" in caught.value.last_error
    assert len(routes(broker, Route.ACTIONS)) == 8
    assert broker.injected == []


async def test_seven_failures_then_success_is_within_bounds(client: BrokerClient, broker: FakeBroker) -> None:
    session = await ready(client)
    broker.add_faults(*[Fault(FaultKind.DROP_RESPONSE, Route.ACTIONS)] * 7)
    result = await client.actions(session, rid(0), 0, BATCH)
    assert result.replayed and len(routes(broker, Route.ACTIONS)) == 8
    assert len(broker.injected) == 3


async def test_connection_refused_is_retried_then_exhausted() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = BrokerClient(f"http://127.0.0.1:{port}", TOKEN, wait_initial_s=0, wait_max_s=0, wait_jitter_s=0)
    with pytest.raises(BrokerTransportExhausted) as caught:
        await client.health()
    assert caught.value.attempts == 8 and caught.value.bound == "attempts"
    assert "ClientConnectorError" in caught.value.last_error


async def test_deadline_bounds_a_hanging_attempt(broker: FakeBroker) -> None:
    client = make_client(broker, operation_deadline_s=0.4)
    broker.add_faults(Fault(FaultKind.DELAY, Route.STATUS, delay_s=5))
    started = time.monotonic()
    with pytest.raises(BrokerTransportExhausted) as caught:
        await client.status()
    assert time.monotonic() - started < 1.5
    assert (caught.value.bound, caught.value.attempts) == ("deadline", 1)


async def test_a_deadline_that_passes_while_the_loop_is_busy_ends_the_attempt_it_interrupted(
    broker: FakeBroker,
) -> None:
    """The operation deadline is the only clock on an attempt. With the event loop blocked across
    the deadline, every timer due at that instant fires in one turn of the loop; a second timer
    inside aiohttp (its ``total``) then turned our cancellation into its own TimeoutError, and
    the interrupted attempt was reported, and under load retried, as a transport failure."""
    client = make_client(broker, operation_deadline_s=0.3)
    loop = asyncio.get_running_loop()
    for _ in range(3):
        broker.add_faults(Fault(FaultKind.DELAY, Route.STATUS, delay_s=5))
        loop.call_at(loop.time() + 0.25, time.sleep, 0.1)
        with pytest.raises(BrokerTransportExhausted) as caught:
            await client.status()
        assert (caught.value.bound, caught.value.attempts, caught.value.last_error) == ("deadline", 1, "")


async def test_deadline_bounds_backoff_between_attempts(broker: FakeBroker) -> None:
    client = BrokerClient(
        broker.url, TOKEN, operation_deadline_s=0.5, wait_initial_s=0.2, wait_max_s=5, wait_jitter_s=0
    )
    broker.add_faults(*[Fault(FaultKind.DROP_REQUEST, Route.STATUS)] * 20)
    started = time.monotonic()
    with pytest.raises(BrokerTransportExhausted) as caught:
        await client.status()
    assert time.monotonic() - started < 1.5
    assert caught.value.bound == "deadline" and 1 < caught.value.attempts < 8


async def test_actions_deadline_grows_with_wait_actions() -> None:
    async with FakeBroker(token=TOKEN, display=SMALL, wait_scale=1.0) as fake:
        client = make_client(fake, operation_deadline_s=0.4)
        session = await ready(client)
        result = await client.actions(session, rid(0), 0, (WaitAction(seconds=0.6),))
        assert result.next_index == 1


async def test_actions_deadline_allows_the_brokers_idle_wait_after_each_wait(broker: FakeBroker) -> None:
    """After a ``wait`` the broker may wait on (up to WAIT_IDLE_LIMIT_S) for the application to
    go idle; an answer that long in coming is not a transport failure."""
    client = make_client(broker, operation_deadline_s=0.4)
    session = await ready(client)
    broker.add_faults(Fault(FaultKind.DELAY, Route.ACTIONS, delay_s=1.5))
    result = await client.actions(session, rid(0), 0, (WaitAction(seconds=0.05),))
    assert result.next_index == 1 and not result.replayed
    broker.add_faults(Fault(FaultKind.DELAY, Route.ACTIONS, delay_s=1.5))
    with pytest.raises(BrokerTransportExhausted) as caught:
        await client.actions(session, rid(1), 1, (TypeAction(text="x"),))
    assert caught.value.bound == "deadline"


async def test_concurrent_duplicates_execute_once(client: BrokerClient, broker: FakeBroker) -> None:
    session = await ready(client)
    results = await asyncio.gather(*[client.actions(session, rid(0), 0, BATCH) for _ in range(4)])
    assert sorted(r.replayed for r in results) == [False, True, True, True]
    assert len({r.model_copy(update={"replayed": False}) for r in results}) == 1
    assert len(broker.injected) == 3


async def test_unstable_pixels_are_reported_not_raised() -> None:
    async with FakeBroker(token=TOKEN, display=SMALL, visual_stable=lambda sequence: sequence != 2) as fake:
        client = make_client(fake)
        session = await ready(client)
        first = await client.actions(session, rid(0), 0, BATCH)
        second = await client.actions(session, rid(1), 3, (DoneAction(),))
        assert (first.post_action_visual_stable, second.post_action_visual_stable) == (True, False)
        assert [e.visual_stable for e in (await client.frame_events()).frame_events] == [True, True, False]


async def test_failed_injection_fails_closed_in_receipts() -> None:
    async with FakeBroker(token=TOKEN, display=SMALL, fail_injection_at=frozenset({1})) as fake:
        client = make_client(fake)
        session = await ready(client)
        result = await client.actions(session, rid(0), 0, BATCH)
        assert [(r.ok, r.error) for r in result.receipts] == [
            (True, None),
            (False, "input injection failed"),
            (False, "not attempted"),
        ]
        assert result.receipts[2].injected_at is None
        assert [i.index for i in fake.injected] == [0]
        assert result.next_index == 3


async def test_body_too_large_is_413() -> None:
    async with FakeBroker(token=TOKEN, display=SMALL, max_body_bytes=2048) as fake:
        client = make_client(fake)
        session = await ready(client)
        with pytest.raises(BrokerHTTPError) as caught:
            await client.actions(session, rid(0), 0, (TypeAction(text="x" * 5000),))
        assert (caught.value.status, caught.value.code) == (413, "body_too_large")
        assert fake.injected == []


@pytest.mark.parametrize(("body", "code"), [(b"{not json", "bad_request"), (b'{"task_id": "t"}', "bad_request")])
async def test_bad_json_is_400(broker: FakeBroker, body: bytes, code: str) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{broker.url}/lease", data=body, headers=headers) as response,
    ):
        assert response.status == 400
        assert (await response.json())["code"] == code


# Frames, checkpoint, artifacts, read-only routes, release -------------------------------------


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    assert struct.unpack(">I", data[29:33])[0] == zlib.crc32(data[12:29])
    width, height = struct.unpack(">II", data[16:24])
    return width, height


async def test_full_hd_frames_are_real_pngs_verified_by_checksum() -> None:
    async with FakeBroker(token=TOKEN) as fake:
        client = make_client(fake)
        lease = await client.lease("task-1", "attempt-1")
        reset = await client.reset(lease.session_id)
        fake.add_faults(Fault(FaultKind.CORRUPT_RESPONSE, Route.FRAME), Fault(FaultKind.TRUNCATE_RESPONSE, Route.FRAME))
        data = await client.frame(0, expected_sha256=reset.frame.sha256)
        assert hashlib.sha256(data).hexdigest() == reset.frame.sha256 and len(data) == reset.frame.size
        assert png_size(data) == (1920, 1080) == (reset.frame.width, reset.frame.height)
        assert len(routes(fake, Route.FRAME)) == 3
        raw = zlib.decompress(data[data.index(b"IDAT") + 4 : data.index(b"IEND") - 8])
        assert len(raw) == 1080 * (1 + 1920 * 3)


async def test_frame_checksum_must_match_the_advertised_frame(client: BrokerClient, broker: FakeBroker) -> None:
    session = await ready(client)
    result = await client.actions(session, rid(0), 0, BATCH)
    with pytest.raises(BrokerProtocolError):
        await client.frame(0, expected_sha256=result.frame.sha256)
    with pytest.raises(BrokerHTTPError) as caught:
        await client.frame(7)
    assert caught.value.status == 404


async def test_checkpoint_is_state_idempotent(client: BrokerClient, broker: FakeBroker) -> None:
    session = await ready(client)
    await client.actions(session, rid(0), 0, BATCH)
    broker.add_faults(Fault(FaultKind.DROP_RESPONSE, Route.CHECKPOINT))
    saved = await client.checkpoint(session, "checkpoint-3")
    assert saved.replayed and saved.next_index == 3 and saved.artifact.name == "drawing.dxf"
    again = await client.checkpoint(session, "checkpoint-3")
    assert again.artifact == saved.artifact
    data = await client.artifact(saved.artifact.name, expected_sha256=saved.artifact.sha256)
    assert len(data) == saved.artifact.size
    assert b'"text": "LINE"' in data
    assert (await client.status()).checkpoints == (saved.artifact,)


@pytest.mark.parametrize("name", ["../etc/passwd", ".hidden", "a/b", "", "..", "x\\y"])
async def test_client_refuses_artifact_paths(client: BrokerClient, name: str) -> None:
    with pytest.raises(ValueError):
        await client.artifact(name)


@pytest.mark.parametrize(
    ("path", "status"),
    [("/artifacts/..%2F..%2Fetc%2Fpasswd", 400), ("/artifacts/.env", 400), ("/artifacts/nothing.dwg", 404)],
)
async def test_broker_refuses_path_traversal(broker: FakeBroker, path: str, status: int) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    url = URL(broker.url + path, encoded=True)
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as response:
        assert response.status == status


async def test_read_only_routes_change_nothing(client: BrokerClient, broker: FakeBroker) -> None:
    session = await ready(client)
    await client.actions(session, rid(0), 0, BATCH)
    before = ((await client.events()), (await client.frame_events()), (await client.status()))
    for _ in range(2):
        await client.events()
        await client.frame_events()
        await client.status()
        await client.health()
    after = ((await client.events()), (await client.frame_events()), (await client.status()))
    assert before == after
    assert before[2].next_index == 3 and before[2].last_frame_sequence == 1 and before[2].state == "ready"


async def test_release_is_state_idempotent(client: BrokerClient, broker: FakeBroker) -> None:
    session = await ready(client)
    broker.add_faults(Fault(FaultKind.DROP_RESPONSE, Route.RELEASE))
    first = await client.release(session)
    second = await client.release(session)
    assert first.replayed and second.replayed and first.released
    assert [e.kind for e in (await client.events()).events].count("release") == 1
    with pytest.raises(BrokerHTTPError) as caught:
        await client.actions(session, rid(0), 0, BATCH)
    assert caught.value.code == "wrong_state"
    assert (await client.status()).state == "released"
    again = await client.lease("task-1", "attempt-1")
    assert (again.session_id, again.replayed) == (session, True), "a released identity is not revived"
    assert (await client.status()).state == "released"
    fresh = await client.lease("task-2", "attempt-9")
    assert fresh.session_id != session and not fresh.replayed
    with pytest.raises(BrokerConflict):
        await client.lease("task-1", "attempt-1")


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/lease", 405, "method_not_allowed"),
        ("POST", "/frames/1", 405, "method_not_allowed"),
        ("GET", "/no-such-route", 404, "not_found"),
        ("GET", "/frames/abc", 400, "bad_request"),
        ("GET", "/frames/-1", 400, "bad_request"),
    ],
)
async def test_routing_errors_use_protocol_bodies(
    broker: FakeBroker, method: str, path: str, status: int, code: str
) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, broker.url + path, headers=headers) as response,
    ):
        assert response.status == status
        assert (await response.json())["code"] == code


# The post-batch frame in the actions answer -------------------------------------------------


async def test_actions_with_frame_is_one_round_trip(client: BrokerClient, broker: FakeBroker) -> None:
    session = await ready(client)
    result, png = await client.actions_with_frame(session, rid(0), 0, BATCH)
    assert (result.first_index, result.next_index, result.replayed) == (0, 3, False)
    assert hashlib.sha256(png).hexdigest() == result.frame.sha256 and len(png) == result.frame.size
    assert png_size(bytes(png)) == (SMALL.width, SMALL.height)
    assert len(routes(broker, Route.ACTIONS)) == 1 and not routes(broker, Route.FRAME), "no separate frame request"
    again, png_again = await client.actions_with_frame(session, rid(0), 0, BATCH)
    assert again.replayed and png_again == png and len(broker.injected) == 3


async def test_actions_with_frame_falls_back_to_a_frame_request() -> None:
    async with FakeBroker(token=TOKEN, display=SMALL, actions_frame=False) as fake:
        client = make_client(fake)
        session = await ready(client)
        result, png = await client.actions_with_frame(session, rid(0), 0, BATCH)
        assert hashlib.sha256(png).hexdigest() == result.frame.sha256
        assert [r.route for r in fake.requests][-2:] == [Route.ACTIONS.value, Route.FRAME.value]


@pytest.mark.parametrize("kind", [FaultKind.CORRUPT_RESPONSE, FaultKind.TRUNCATE_RESPONSE, FaultKind.DROP_RESPONSE])
async def test_a_damaged_frame_in_the_answer_is_replayed_not_reinjected(
    client: BrokerClient, broker: FakeBroker, kind: FaultKind
) -> None:
    session = await ready(client)
    broker.add_faults(Fault(kind, Route.ACTIONS))
    result, png = await client.actions_with_frame(session, rid(0), 0, BATCH)
    assert result.replayed and hashlib.sha256(png).hexdigest() == result.frame.sha256
    sent = routes(broker, Route.ACTIONS)
    assert len(sent) == 2 and sent[0].body_sha256 == sent[1].body_sha256, "the same request was re-sent"
    assert len(broker.injected) == 3, "nothing was injected twice"


async def test_a_bundle_without_its_length_header_is_a_protocol_error() -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=b"{}", headers={"Content-Type": "application/vnd.autocad-bench.actions-frame"})

    app = web.Application()
    app.router.add_post("/actions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        client = BrokerClient(f"http://127.0.0.1:{port}", TOKEN, wait_initial_s=0.0, wait_max_s=0.0)
        with pytest.raises(BrokerProtocolError, match="X-Actions-Response-Length"):
            await client.actions_with_frame("s", rid(0), 0, BATCH)
    finally:
        await runner.cleanup()
