"""Shared fixtures for the whole test suite."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


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
