"""``python -m autocad_bench_ray.sentinel SPEC``: the node-side guard of one desktop.

Each desktop actor starts one sentinel in a session of its own, so it outlives the actor's
worker process. Every :data:`~autocad_bench_ray.bounds.SENTINEL_POLL_S` it checks:

- the worker record is gone: the actor tore the desktop down normally; exit;
- the actor's process died (``ray.kill``, node shutdown, a crash, ``kill -9``): tear down
  what the record names with local-xvfb's :func:`~autocad_bench_xvfb.sandbox.terminate_record`
  (Xvfb, broker, LibreCAD, runtime directory, record, token); exit;
- the heartbeat file is older than the TTL (the controller vanished and nobody re-attached):
  kill the actor's process, then tear down as above; exit.

SPEC is JSON without secrets.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from autocad_bench_ray.bounds import SENTINEL_POLL_S
from autocad_bench_xvfb.logs import LifecycleLog
from autocad_bench_xvfb.procs import ProcessRef
from autocad_bench_xvfb.registry import WorkerRegistry
from autocad_bench_xvfb.sandbox import terminate_record
from autocad_bench_xvfb.settings import LocalXvfbSettings


class SentinelSpec(BaseModel):
    """What one sentinel guards."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    actor: ProcessRef
    batch_id: str
    rollout_id: str
    worker_id: str
    settings: LocalXvfbSettings
    heartbeat_file: str
    ttl_s: float
    log_path: str
    node_work_dir: str


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def watch(spec: SentinelSpec) -> str:
    """Guard the desktop until it is gone; returns why the sentinel stopped."""
    settings = spec.settings
    assert settings.state_dir is not None
    registry = WorkerRegistry(Path(settings.state_dir))
    log = LifecycleLog(Path(spec.log_path))
    heartbeat = Path(spec.heartbeat_file)
    while True:
        record = registry.get(spec.batch_id, spec.rollout_id)
        if record is None or record.worker_id != spec.worker_id:
            return "torn down by its actor"
        reason = None
        if not spec.actor.is_alive():
            reason = f"desktop actor process {spec.actor.pid} died"
        else:
            seen = _mtime(heartbeat)
            if seen is not None and time.time() - seen > spec.ttl_s:
                reason = f"no heartbeat for {spec.ttl_s:g} s (the controller vanished)"
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    if spec.actor.is_alive():
                        os.kill(spec.actor.pid, signal.SIGKILL)
        if reason is not None:
            report = terminate_record(record, settings, registry, kill_owner=False)
            log.line(f"sentinel of worker {spec.worker_id}: {reason}; desktop torn down "
                     f"({'clean' if report.ok else '; '.join(report.errors)})")
            if report.ok:
                from autocad_bench_ray.desktop import remove_node_files

                remove_node_files(spec.node_work_dir, spec.batch_id, spec.rollout_id)
            return reason
        time.sleep(SENTINEL_POLL_S)


def main(argv: list[str] | None = None) -> int:
    """Entry point; 2 on a usage error."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m autocad_bench_ray.sentinel SPEC", file=sys.stderr)
        return 2
    watch(SentinelSpec.model_validate_json(args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
