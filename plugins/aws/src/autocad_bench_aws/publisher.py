"""Live trace mirroring to S3 (``AUTOCAD_BENCH_TRACE_DESTINATION`` / ``AUTOCAD_BENCH_TRACE_PREFIX``).

The destination is ``s3://bucket[/prefix]`` or a bare bucket name; the legacy names
``AUTOCAD_BENCH_TRACE_S3_BUCKET`` / ``AUTOCAD_BENCH_TRACE_S3_PREFIX`` are accepted too
(:func:`trace_destination`). Objects are written under ``<prefix>/<batch_id>/<path relative
to the batch output directory>``.

The publisher mirrors by itself: a background thread rescans the batch directory every few
seconds and uploads files whose size or modification time changed, so traces are live even
when nobody calls :meth:`S3TracePublisher.publish` (which only queues a file for the next
upload round). :meth:`S3TracePublisher.close` (also run at interpreter exit) does a last
round within its bound. Uploads never raise into the caller; failures are counted.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autocad_bench.infrastructure import TracePublisher
from autocad_bench.models import JsonObject
from autocad_bench_aws.bounds import TRACE_FLUSH_S, TRACE_SCAN_S, scaled
from autocad_bench_aws.calls import AwsCallError, AwsSession, call

DESTINATION_ENV = "AUTOCAD_BENCH_TRACE_DESTINATION"
PREFIX_ENV = "AUTOCAD_BENCH_TRACE_PREFIX"
LEGACY_BUCKET_ENV = "AUTOCAD_BENCH_TRACE_S3_BUCKET"
LEGACY_PREFIX_ENV = "AUTOCAD_BENCH_TRACE_S3_PREFIX"
_SKIP = (".tmp", ".partial")


def trace_destination(environ: Mapping[str, str]) -> tuple[str, str] | None:
    """(destination, prefix) from the current or the legacy variables; None when unset."""
    if environ.get(DESTINATION_ENV):
        return environ[DESTINATION_ENV], environ.get(PREFIX_ENV, "")
    if environ.get(LEGACY_BUCKET_ENV):
        return f"s3://{environ[LEGACY_BUCKET_ENV]}", environ.get(LEGACY_PREFIX_ENV, "")
    return None


def parse_destination(destination: str, prefix: str = "") -> tuple[str, str]:
    """(bucket, key prefix) of ``s3://bucket/some/prefix`` or ``bucket``; raises ValueError."""
    text = destination.strip()
    if text.startswith("s3://"):
        text = text[5:]
    elif "://" in text:
        raise ValueError(f"trace destination {destination!r} is not an S3 location")
    bucket, _, path = text.partition("/")
    if not bucket:
        raise ValueError("the trace destination names no bucket")
    parts = [p.strip("/") for p in (path, prefix) if p.strip("/")]
    return bucket, "/".join(parts)


class S3TracePublisher(TracePublisher):
    """See the module docstring."""

    def __init__(self, session: AwsSession, batch_id: str, output_dir: Path, bucket: str, prefix: str,
                 *, scan_s: float | None = None, flush_s: float | None = None) -> None:
        self.session = session
        self.batch_id = batch_id
        self.output_dir = output_dir
        self.bucket = bucket
        self.prefix = prefix
        self.scan_s = scan_s if scan_s is not None else scaled(TRACE_SCAN_S)
        self.flush_s = flush_s if flush_s is not None else scaled(TRACE_FLUSH_S)
        self.uploaded = 0
        self.failed = 0
        self._seen: dict[str, tuple[int, int]] = {}
        self._queued: set[Path] = set()
        self._lock = threading.Lock()
        # One round at a time: close() must not start its final round while the scanner thread
        # is still in one (it took the queue, and the final round's deadline could then expire
        # before the queued files were sent: a published file missing from S3).
        self._round_lock = threading.Lock()
        self._stop = threading.Event()
        self._closed = False
        # Build the S3 client now (no request is sent): built lazily, its service-model load
        # (hundreds of milliseconds, seconds under load) was paid inside close()'s flush
        # budget, and the final round could run out before the last files were sent.
        session.s3  # noqa: B018
        self._thread = threading.Thread(target=self._run, name="s3-trace-publisher", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def key(self, path: Path) -> str:
        relative = path.relative_to(self.output_dir).as_posix()
        return "/".join(p for p in (self.prefix, self.batch_id, relative) if p)

    def describe(self) -> JsonObject:
        return {"destination": f"s3://{self.bucket}", "prefix": "/".join(p for p in (self.prefix, self.batch_id) if p),
                "backend": "aws", "scan_interval_s": self.scan_s}

    def publish(self, path: Path) -> None:
        with contextlib.suppress(Exception), self._lock:
            self._queued.add(Path(path))

    def _run(self) -> None:
        while not self._stop.wait(self.scan_s):
            self.round()

    def round(self, deadline: float | None = None) -> int:
        """Upload every new or changed file once, the published ones first; returns how many
        were uploaded. Rounds never overlap (see ``_round_lock``)."""
        with self._round_lock:
            return self._round(deadline)

    def _round(self, deadline: float | None) -> int:
        with self._lock:
            queued, self._queued = self._queued, set()
        scanned: set[Path] = set()
        with contextlib.suppress(OSError):
            scanned.update(p for p in self.output_dir.rglob("*") if p.is_file())
        count = 0
        for path in [*sorted(queued), *sorted(scanned - queued)]:
            if deadline is not None and time.monotonic() > deadline:
                break
            if path.name.endswith(_SKIP) or path.name.startswith("."):
                continue
            try:
                info = path.stat()
                key = self.key(path)
            except (OSError, ValueError):
                continue
            marker = (info.st_size, info.st_mtime_ns)
            if self._seen.get(key) == marker:
                continue
            try:
                body = path.read_bytes()
                call("PutObject", functools.partial(self.session.s3.put_object, Bucket=self.bucket, Key=key, Body=body))
            except (OSError, AwsCallError):
                self.failed += 1
                continue
            self._seen[key] = marker
            self.uploaded += 1
            count += 1
        return count

    def close(self) -> None:
        """Stop the scanner and upload what changed since its last round, all within
        ``flush_s``: waiting for the scanner's round in flight counts against the same
        budget, so close() returns in about ``flush_s`` however slow S3 is. Files not sent
        by then stay unsent (counted nowhere: the local trace is the record)."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + self.flush_s
        self._stop.set()
        self._thread.join(timeout=self.flush_s)
        if not self._round_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            return  # the scanner's round is still sending; it already holds the queue
        try:
            self._round(deadline)
        finally:
            self._round_lock.release()


def describe_failure(error: Exception) -> dict[str, Any]:
    """A disabled trace-publisher status whose reason is ``error``'s type and message
    (nothing in the package calls it at present).
    """
    return {"enabled": False, "reason": f"{type(error).__name__}: {error}"}
