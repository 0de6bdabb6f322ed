"""A stand-in for ``autocad-bench-broker serve`` that misbehaves on request (for lifecycle tests).

Usage: ``python fake_broker_cli.py MODE serve --host ... --ready-file ... --broker-version ...``
(the backend appends everything from ``serve`` on). It follows the real interface: the token
only from ``AUTOCAD_BENCH_BROKER_TOKEN``, an atomically written ready file, an authenticated
``/health`` with the protocol's fields, graceful exit on SIGTERM. MODE breaks one rule:

- ``ok``: behaves;
- ``exit``: exits with status 3 before listening;
- ``silent``: never writes the ready file;
- ``wrong-pid``: the ready file names another PID;
- ``open``: ``/health`` answers without a token;
- ``ignore-term``: ignores SIGTERM (the backend must SIGKILL it);
- ``stray``: starts an "application" in its own session (HOME under the workdir) that
  ignores SIGTERM, and leaves it behind when it exits.

Standard library only.
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path


def _args(argv: list[str]) -> dict[str, str]:
    options = {}
    for index, item in enumerate(argv):
        if item.startswith("--") and index + 1 < len(argv):
            options[item[2:]] = argv[index + 1]
    return options


def main() -> int:
    mode = sys.argv[1]
    assert sys.argv[2] == "serve", sys.argv
    options = _args(sys.argv[3:])
    token = os.environ.get("AUTOCAD_BENCH_BROKER_TOKEN", "")
    if len(token) < 16:
        print("error: AUTOCAD_BENCH_BROKER_TOKEN is not set", file=sys.stderr)
        return 2
    if mode == "exit":
        return 3
    workdir = Path(options["workdir"])
    workdir.mkdir(parents=True, exist_ok=True)
    if mode == "stray":
        home = workdir / "app" / "home"
        home.mkdir(parents=True, exist_ok=True)
        subprocess.Popen(
            [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
             "time.sleep(600)"],
            env={"HOME": str(home), "PATH": os.environ.get("PATH", "")}, start_new_session=True,
        )
    if mode == "ignore-term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    display = options["display"]
    startup_id = f"fake-{os.getpid()}-{time.monotonic_ns()}"
    health = {
        "protocol_version": 1, "broker_version": options["broker-version"], "input_driver_version": "fake",
        "pid": os.getpid(), "interactive_session_id": int(display.lstrip(":")), "desktop_width": 1920,
        "desktop_height": 1080, "boot_id": "fake-boot", "startup_id": startup_id, "manifest_sha256": "0" * 64,
        "app": options["app"], "state": "idle", "session_id": None,
    }

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            authorized = self.headers.get("Authorization") == f"Bearer {token}" or mode == "open"
            body = json.dumps(health if authorized else {"code": "unauthorized"}).encode()
            self.send_response(200 if authorized and self.path == "/health" else 401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", int(options.get("port", "0"))), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    if mode != "silent":
        ready = Path(options["ready-file"])
        tmp = ready.with_name(ready.name + ".tmp")
        pid = os.getpid() + (1 if mode == "wrong-pid" else 0)
        tmp.write_text(json.dumps({"url": f"http://127.0.0.1:{port}", "port": port, "pid": pid,
                                   "startup_id": startup_id}))
        os.replace(tmp, ready)
    stop = threading.Event()
    if mode != "ignore-term":
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait(600)
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
