"""The child command the backend conformance kit hands a backend instead of the pilot.

``python -m autocad_bench.testing.conformance_child RECORD_DIR PLAN [PAYLOAD...]``

``RECORD_DIR`` is where the child writes what happened (first and plain, so that a backend
that mangles the arguments still leaves a record of how). ``PLAN`` is JSON (no secrets):
``exit_code``,
``sleep_s`` (how long to stay running, e.g. until the kit cancels the rollout), ``helper``
(start a helper process of its own that sleeps as long, as a pilot's subprocess would) and
``health`` (check that ``AUTOCAD_BENCH_BROKER_URL`` answers ``/health`` with the token in
``AUTOCAD_BENCH_BROKER_TOKEN``). ``PAYLOAD`` is arbitrary arguments the backend must pass
through unchanged.

The child writes ``<pid>.started.json`` once it has looked around (its exact argv, its
process ids, a SHA-256 per environment variable so that no secret value reaches the disk,
the broker URL and the ``/health`` outcome, with the desktop's ``boot_id`` and
``startup_id`` it answered), then ``<pid>.exited.json`` with the code it
exits with. On SIGTERM it behaves like the pilot's graceful stop: it stops its helper,
records ``terminated`` and exits ``128 + SIGTERM``. Nothing here runs at import.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import FrameType
from typing import Any

MODULE = "autocad_bench.testing.conformance_child"
BROKER_URL_ENV = "AUTOCAD_BENCH_BROKER_URL"
BROKER_TOKEN_ENV = "AUTOCAD_BENCH_BROKER_TOKEN"
HEALTH_ATTEMPTS = 3
HEALTH_TIMEOUT_S = 5.0


def value_digest(value: str) -> str:
    """How the child records an environment value (never the value itself)."""
    return hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()


def process_start_ticks(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot (``/proc``), None where unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def check_health(url: str | None, token: str | None) -> dict[str, Any]:
    """``GET {url}/health`` with the bearer token: ``{"ok": bool, "detail": str}``."""
    if not url:
        return {"ok": False, "detail": f"{BROKER_URL_ENV} is not set"}
    detail = ""
    for attempt in range(HEALTH_ATTEMPTS):
        request = urllib.request.Request(url.rstrip("/") + "/health",
                                         headers={"Authorization": f"Bearer {token or ''}"})
        try:
            with urllib.request.urlopen(request, timeout=HEALTH_TIMEOUT_S) as response:
                return {"ok": response.status == 200, "detail": f"/health answered {response.status}",
                        "desktop": _desktop(response.read())}
        except urllib.error.HTTPError as error:
            return {"ok": False, "detail": f"/health answered {error.code}"}
        except (urllib.error.URLError, OSError, ValueError) as error:
            detail = f"{url}/health unreachable: {getattr(error, 'reason', error)}"
        if attempt + 1 < HEALTH_ATTEMPTS:
            time.sleep(0.5)
    return {"ok": False, "detail": detail}


def _desktop(body: bytes) -> list[str] | None:
    """The desktop a ``/health`` body names (its ``boot_id`` and ``startup_id``), None if it names none.

    Tells one desktop from another when the URL does not (a backend that tunnels to its
    workers hands each rollout another local port to the same desktop).
    """
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict) or not data.get("boot_id") or not data.get("startup_id"):
        return None
    return [str(data["boot_id"]), str(data["startup_id"])]


def _write(path: Path, data: dict[str, Any]) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(data), encoding="utf-8")
    os.replace(temporary, path)


def main(argv: list[str]) -> int:
    """Run as the kit's child: record into ``argv[0]``, act on the rest, return the exit code.

    Called by ``python -m autocad_bench.testing.conformance_child`` inside the backend under
    test; a record directory that cannot be written raises ``OSError`` (the kit then finds no
    record and reports the child as never run).
    """
    record_dir = Path(argv[0])
    pid = os.getpid()
    try:
        plan = json.loads(argv[1])
    except (IndexError, ValueError):
        plan = {"exit_code": 2}  # recorded below with the argv that could not be read
    helper: subprocess.Popen[bytes] | None = None

    def stop(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if helper is not None and helper.poll() is None:
            helper.terminate()
            helper.wait()
        _write(record_dir / f"{pid}.exited.json", {"pid": pid, "exit_code": 128 + signum, "terminated": True})
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    environ = dict(os.environ)
    health = check_health(environ.get(BROKER_URL_ENV), environ.get(BROKER_TOKEN_ENV)) if plan.get("health") else None
    sleep_s = float(plan.get("sleep_s", 0))
    if plan.get("helper"):
        helper = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({sleep_s!r})"],
                                  stdin=subprocess.DEVNULL)
    _write(record_dir / f"{pid}.started.json", {
        "pid": pid, "start": process_start_ticks(pid), "ppid": os.getppid(), "pgid": os.getpgid(0),
        "sid": os.getsid(0), "orig_argv": list(sys.orig_argv), "argv": argv,
        "environ": {key: value_digest(value) for key, value in environ.items()},
        "broker_url": environ.get(BROKER_URL_ENV), "health": health,
        "helper": None if helper is None else {"pid": helper.pid, "start": process_start_ticks(helper.pid)},
    })
    deadline = time.monotonic() + sleep_s
    while time.monotonic() < deadline:
        time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
    if helper is not None:
        helper.terminate()
        helper.wait()
    code = int(plan.get("exit_code", 0))
    _write(record_dir / f"{pid}.exited.json", {"pid": pid, "exit_code": code, "terminated": False})
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
