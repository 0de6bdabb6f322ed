"""Shared fixtures for the whole test suite."""

from __future__ import annotations

import http.server
import os
import random
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import processes

REPO = Path(__file__).resolve().parents[1]
SHUFFLE_ENV = "AUTOCAD_BENCH_SHUFFLE"
"""An integer seed: run the collected tests in an order shuffled by it (scripts/stress-tests)."""
_OUTCOME = pytest.StashKey[dict[str, pytest.TestReport]]()


def pytest_configure(config: pytest.Config) -> None:
    # One token per pytest process (each xdist worker sets its own): every process a test
    # starts inherits it, so the session check finds what this process's tests leaked.
    os.environ[processes.SESSION_TOKEN_ENV] = uuid.uuid4().hex


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seed = os.environ.get(SHUFFLE_ENV)
    if seed:
        # Deterministic for a seed, and the same in every xdist worker (xdist requires it).
        random.Random(int(seed)).shuffle(items)


def pytest_report_header(config: pytest.Config) -> str | None:
    seed = os.environ.get(SHUFFLE_ENV)
    return f"shuffled test order: {SHUFFLE_ENV}={seed}" if seed else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    item.stash.setdefault(_OUTCOME, {})[report.when] = report
    return report


def outcome_failed(request: pytest.FixtureRequest) -> bool:
    """Whether the requesting test's setup or call failed (for a fixture's teardown)."""
    reports = request.node.stash.get(_OUTCOME, {})
    return any(report.failed for report in reports.values())


@pytest.fixture(scope="session", autouse=True)
def _no_leaked_processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """At the end of this pytest process's tests: kill and report what they left running.

    Per xdist worker: only processes carrying this process's token or naming its base
    temporary directory (another worker's, or another session's, are never touched).
    """
    yield
    if not processes.enabled():
        return
    token = os.environ.get(processes.SESSION_TOKEN_ENV)
    left = processes.settle(token=token, paths=[tmp_path_factory.getbasetemp()])
    if left:
        survivors = processes.kill_groups(left)
        lines = "\n".join(f"  {proc}" for proc in left)
        pytest.fail(f"tests of this session leaked {len(left)} process(es), now killed"
                    f"{f' ({len(survivors)} survived SIGKILL)' if survivors else ''}:\n{lines}", pytrace=False)


@pytest.fixture
def owned_processes(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """The test owns every process naming its ``tmp_path``: at teardown, whatever the outcome,
    their process groups are killed. A test that passed and still left one fails its teardown."""
    yield tmp_path
    if not processes.enabled():
        return
    failed = outcome_failed(request)
    left = processes.find(paths=[tmp_path]) if failed else processes.settle(paths=[tmp_path])
    if not left:
        return
    survivors = processes.kill_groups(left)
    lines = "\n".join(f"  {proc}" for proc in left)
    message = f"{len(left)} process(es) of this test were still running and were killed:\n{lines}"
    if survivors:
        message += f"\n{len(survivors)} survived SIGKILL"
    if failed and not survivors:
        request.node.add_report_section("teardown", "killed processes", message)
    else:
        pytest.fail(message, pytrace=False)


_IDLE_STATUS = (b'{"state": "idle", "session_id": null, "task_id": null, "attempt_id": null, '
                b'"next_index": 0, "last_frame_sequence": null, "checkpoints": []}')


class _HealthHandler(http.server.BaseHTTPRequestHandler):
    """An authenticated /health, and a /status with no session (a broker nobody leased)."""

    token = ""

    def do_GET(self) -> None:
        authorized = self.headers.get("Authorization") == f"Bearer {self.token}"
        body = {"/health": b'{"status": "ok"}', "/status": _IDLE_STATUS}.get(self.path) if authorized else None
        self.send_response(200 if body is not None else 401)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body if body is not None else b"{}")

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def health_server() -> Iterator[tuple[str, str]]:
    """A loopback HTTP server answering an authenticated /health: (url, token)."""
    token = "health-token-for-tests-31c9"

    class Handler(_HealthHandler):
        pass

    Handler.token = token
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", token
    finally:
        server.shutdown()
        server.server_close()
