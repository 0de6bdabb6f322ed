"""Broker overhead: one action through the broker vs the same input and capture done directly.

On a private 1920x1080 Xvfb display (with LibreCAD running on it by default), each iteration
measures, alternating, in one run:

- **direct: move + grab + PNG**: PyAutoGUI injects one ``move``, mss grabs the screen once,
  the frame is PNG-encoded (the minimum desktop work of one action); with
  ``--settle-delay-s`` it sleeps that long before the grab, like the polls;
- **direct: move + stability poll + PNG**: the same with ``stable_frame`` under the broker's
  policy instead of a single grab (the desktop work the broker is asked to do);
- **broker**: ``BrokerClient.actions`` with that one ``move`` (fresh TCP connection, JSON,
  whole-batch validation, injection, post-action stability poll, PNG encode and store,
  receipt), then ``BrokerClient.frame`` fetching the PNG with its checksum verified, so
  every path ends with the PNG bytes in hand.

The broker is a separate process, as in production: the real ``autocad-bench-broker serve``
CLI with LibreCAD, or with ``--no-librecad`` a broker on a do-nothing application adapter.
Its stability poll runs with ``--settle-delay-s 0 --settle-interval-s 0`` by default, to
measure overhead rather than the deliberate settle wait (pass the production defaults, 0.1
and 0.1, to see what a batch really costs). With no settle delay, the busy target's frames
are mostly taken before LibreCAD's redraw (see below); ``--settle-delay-s 0.05`` lets every
path see the redraw and still compares the same waits. Two pointer targets: ``quiet``, the strip below
the LibreCAD window (the pixels do not change, so the broker reuses the previous frame's
PNG), and ``busy``, LibreCAD's drawing area (the crosshair is redrawn after each move, so
the poll needs a third grab and a fresh encode). Without LibreCAD both targets are quiet.
Every timed path starts from a settled screen (an untimed poll after the previous move).
For the busy target the run also counts the frames that show the redrawn crosshair (compared
with a reference frame of each position taken after a long settle) and their medians: with
no settle delay a single grab, and often two back-to-back raw grabs of the stability poll,
come back before LibreCAD has redrawn (10-20 ms after the move here), and such a stale frame
costs less (the broker even reuses the previous PNG without converting anything).

    uv run python benchmarks/broker_roundtrip.py [--iterations 40] [--no-librecad]
        [--settle-delay-s 0] [--settle-interval-s 0] [--png-level 6] [--target 1.25]

Prints the timing table with ratios to both direct paths and PNG KiB/ms per compression
level. Exit status 1 when the broker's overhead (busy target, broker / direct poll) exceeds
``--target``. The numbers are noisy on a shared machine; the load average is printed first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import ezdxf
from _common import table

from autocad_bench.actions import MoveAction, action_request_id
from autocad_bench.broker.client import BrokerClient
from autocad_bench_broker.display import XvfbDisplay
from autocad_bench_broker.drivers.capture import MssCapture, StabilityPolicy, encode_png, stable_frame
from autocad_bench_broker.drivers.input import PyAutoGUIDriver

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "examples" / "tasks" / "line-and-circle" / "template.dxf"
QUIET = ((200, 1066), (260, 1068))
"""Below the 1920x1050 LibreCAD window: the root window, which does not react to the pointer."""
BUSY = ((900, 500), (960, 520))
"""Over LibreCAD's drawing area: the crosshair and the coordinate display follow the pointer."""
SETTLED = StabilityPolicy(window_s=2.0, interval_s=0.02, settle_s=0.05)
"""Untimed wait between the paths: the screen has redrawn for the previous move."""
PATHS = (
    "direct: move + grab + PNG",
    "direct: move + stability poll + PNG",
    "broker: POST /actions",
    "broker: POST /actions + GET frame",
)


# -- the broker on a do-nothing adapter (``--no-librecad``), run as a child process -----------


def _serve_static(display: str, workdir: Path, ready_file: Path, delay: float, interval: float, level: int) -> None:
    from autocad_bench_broker.apps.base import (
        ApplicationAdapter,
        CheckpointResult,
        HandoffEvidence,
        KillResult,
        ReadyResult,
    )
    from autocad_bench_broker.identity import package_sha256
    from autocad_bench_broker.server import BrokerServer, BrokerSettings

    capture = MssCapture(display)

    class StaticAdapter(ApplicationAdapter):
        """No application: the handoff is the empty desktop's stable frame."""

        name = "none"

        @property
        def pid(self) -> int | None:
            return None

        @property
        def attempt_path(self) -> Path | None:
            return None

        def launch(self, template: Path, attempt_path: Path) -> None:
            return None

        def verify_ready(self) -> ReadyResult:
            frame, stable = stable_frame(capture)
            evidence = HandoffEvidence(
                app=self.name, pid=None, process_alive=True, display_size=capture.size, initial_frame_stable=stable
            )
            return ReadyResult(evidence=evidence, frame=frame)

        def checkpoint(self) -> CheckpointResult:
            return CheckpointResult(ok=False, path="", error="no application")

        def kill(self) -> KillResult:
            return KillResult(pid=None, signal_sent="none")

    async def main() -> None:
        settings = BrokerSettings(
            workdir=workdir,
            template=TEMPLATE,
            broker_version="benchmark",
            manifest_sha256=package_sha256(),
            interactive_session_id=int(display.lstrip(":")),
            stability=StabilityPolicy(window_s=1.5, interval_s=interval, settle_s=delay),
            png_compress_level=level,
        )
        token = os.environ["AUTOCAD_BENCH_BROKER_TOKEN"]
        server = BrokerServer(settings, token, PyAutoGUIDriver(display), capture, StaticAdapter())
        url = await server.start()
        ready_file.write_text(json.dumps({"url": url, "port": server.port, "pid": os.getpid()}))
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        await server.stop()

    asyncio.run(main())


# -- the benchmark ------------------------------------------------------------------------------


@contextmanager
def broker(display: str, tmp: Path, args: argparse.Namespace, token: str) -> Iterator[dict[str, Any]]:
    ready_file = tmp / "ready.json"
    if args.no_librecad:
        command = [
            sys.executable, __file__, "_serve-static", display, str(tmp / "runtime"), str(ready_file),
            str(args.settle_delay_s), str(args.settle_interval_s), str(args.png_level),
        ]  # fmt: skip
    else:
        template = TEMPLATE
        if not template.is_file():
            template = tmp / "template.dxf"
            ezdxf.new("R2007").saveas(template)
        command = [
            sys.executable, "-m", "autocad_bench_broker", "serve", "--app", "librecad", "--display", display,
            "--workdir", str(tmp / "runtime"), "--template", str(template), "--ready-file", str(ready_file),
            "--broker-version", "windows-autocad-2019-v11", "--log-level", "warning",
            "--settle-delay-s", str(args.settle_delay_s), "--settle-interval-s", str(args.settle_interval_s),
            "--png-compress-level", str(args.png_level),
        ]  # fmt: skip
    env = dict(os.environ, AUTOCAD_BENCH_BROKER_TOKEN=token)
    process = subprocess.Popen(command, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not ready_file.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the broker did not start")
            time.sleep(0.05)
        time.sleep(0.05)  # the static server writes non-atomically
        yield json.loads(ready_file.read_text())
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=40)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _stats(samples: list[float]) -> tuple[float, float, float]:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return statistics.median(ordered), p90, statistics.fmean(ordered)


async def measure(args: argparse.Namespace, display: str, url: str, token: str) -> int:
    client = BrokerClient(url, token)
    lease = await client.lease("benchmark", "attempt-1")
    reset = await client.reset(lease.session_id)
    await client.frame(0, expected_sha256=reset.frame.sha256)
    await asyncio.sleep(1.0)  # let the application finish drawing after the handoff
    driver = PyAutoGUIDriver(display)
    capture = MssCapture(display)
    policy = StabilityPolicy(window_s=1.5, interval_s=args.settle_interval_s, settle_s=args.settle_delay_s)
    index, turn = reset.next_index, 0
    rows: list[list[Any]] = []
    ratios: dict[str, tuple[float, float]] = {}
    notes: list[str] = []
    try:
        for label, points in (("quiet", QUIET), ("busy", BUSY)):
            samples: dict[str, list[float]] = {name: [] for name in PATHS}
            stable = polled_stable = 0
            # What each pointer position looks like once the application has redrawn: a path's
            # frame is "fresh" when it shows the new position, "stale" when the poll (or the
            # single grab) came back before the redraw.
            reference: dict[tuple[int, int], tuple[str, str]] = {}
            for point in points:
                driver.move(*point)
                settled_frame, _ = stable_frame(capture, StabilityPolicy(window_s=3.0, interval_s=0.05, settle_s=0.5))
                reference[point] = (settled_frame.sha256, encode_png(settled_frame, args.png_level).sha256)
            fresh: dict[str, list[float]] = {name: [] for name in PATHS}  # samples of fresh frames
            for iteration in range(args.warmup + args.iterations):
                x, y = points[iteration % 2]
                other = points[(iteration + 1) % 2]
                # Each path moves the pointer from the other point, so every move is a change,
                # and starts (untimed) from a settled screen that shows the other point.
                stable_frame(capture, SETTLED)
                started = time.perf_counter()
                driver.move(x, y)
                if policy.settle_s > 0:
                    time.sleep(policy.settle_s)  # the same deliberate wait as the polls
                png = encode_png(capture.grab(), args.png_level)
                grab_ms = (time.perf_counter() - started) * 1000
                grab_sha = png.frame_sha256
                driver.move(*other)
                stable_frame(capture, SETTLED)
                started = time.perf_counter()
                driver.move(x, y)
                frame, settled = stable_frame(capture, policy)
                png = encode_png(frame, args.png_level)
                poll_ms = (time.perf_counter() - started) * 1000
                driver.move(*other)
                stable_frame(capture, SETTLED)
                turn += 1
                request_id = action_request_id("attempt-1", f"toolu_{turn}", 0)
                started = time.perf_counter()
                result = await client.actions(lease.session_id, request_id, index, [MoveAction(x=x, y=y)])
                actions_ms = (time.perf_counter() - started) * 1000
                data = await client.frame(result.frame.sequence, expected_sha256=result.frame.sha256)
                total_ms = (time.perf_counter() - started) * 1000
                index = result.next_index
                assert data and png.data
                if iteration >= args.warmup:
                    for name, value in zip(PATHS, (grab_ms, poll_ms, actions_ms, total_ms), strict=True):
                        samples[name].append(value)
                    stable += result.post_action_visual_stable
                    polled_stable += settled
                    pixels, png_sha = reference[(x, y)]
                    broker_fresh = result.frame.sha256 == png_sha
                    shown = (grab_sha == pixels, frame.sha256 == pixels, broker_fresh, broker_fresh)
                    for name, ok, value in zip(PATHS, shown, (grab_ms, poll_ms, actions_ms, total_ms), strict=True):
                        if ok:
                            fresh[name].append(value)
            grab_base = statistics.median(samples[PATHS[0]])
            poll_base = statistics.median(samples[PATHS[1]])
            for name in PATHS:
                median, p90, mean = _stats(samples[name])
                rows.append(
                    [label, name, f"{median:.1f}", f"{p90:.1f}", f"{mean:.1f}",
                     f"{median / grab_base:.2f}", f"{median / poll_base:.2f}"]
                )  # fmt: skip
            broker_total = statistics.median(samples[PATHS[3]])
            ratios[label] = (broker_total / grab_base, broker_total / poll_base)
            note = (
                f"{label}: pixels settled in {stable}/{args.iterations} broker batches, "
                f"{polled_stable}/{args.iterations} direct polls"
            )
            if label == "busy":
                # Only these frames show the result of the move; the others came back before
                # LibreCAD redrew (possible with no settle delay: two grabs can both precede it).
                shown_ms = [
                    f"{what} {len(fresh[name])}"
                    + (f" (median {statistics.median(fresh[name]):.1f} ms)" if fresh[name] else "")
                    for what, name in (("broker", PATHS[3]), ("direct poll", PATHS[1]), ("direct grab", PATHS[0]))
                ]
                note += f"; frames showing the redrawn crosshair: {', '.join(shown_ms)}"
            notes.append(note)
        # The pieces of the direct path, and the PNG cost of the frame on screen (app still up).
        grabs, raw_grabs, frame = [], [], capture.grab()
        grab_raw = getattr(capture, "grab_raw", None)  # absent before raw grabs existed (A/B runs)
        last = grab_raw() if grab_raw is not None else None
        for _ in range(10):
            started = time.perf_counter()
            frame = capture.grab()
            grabs.append((time.perf_counter() - started) * 1000)
            if grab_raw is not None:
                started = time.perf_counter()
                raw = grab_raw()
                raw.same_pixels(last)
                raw_grabs.append((time.perf_counter() - started) * 1000)
                last = raw
        png_rows = []
        for level in sorted({1, 6, 9, args.png_level}):
            encodes = [encode_png(frame, level) for _ in range(5)]
            png_rows.append(
                [level, f"{len(encodes[0].data) / 1024:.0f}", f"{statistics.median(e.encode_ms for e in encodes):.1f}"]
            )
    finally:
        await client.release(lease.session_id)
        driver.close()
        capture.close()
    print(
        table(
            f"One move action, {args.iterations} iterations per target, PNG level {args.png_level}, "
            f"settle delay {args.settle_delay_s:g} s, interval {args.settle_interval_s:g} s"
            f"{'' if args.no_librecad else ', LibreCAD running'} (ms; ratios to the two direct paths)",
            ["target", "path", "median", "p90", "mean", "/grab", "/poll"],
            rows,
        )
    )
    print("\n".join(notes))
    print(f"\none mss grab (BGRX->RGB and SHA-256 included): median {statistics.median(grabs):.1f} ms")
    if raw_grabs:
        print(f"one raw grab compared with the previous (an extra poll grab): {statistics.median(raw_grabs):.1f} ms")
    print()
    print(table("PNG per 1920x1080 frame (current screen, median of 5)", ["level", "KiB", "encode ms"], png_rows))
    print()
    for label, (to_grab, to_poll) in ratios.items():
        print(f"{label}: broker (actions + frame) / direct grab = {to_grab:.2f}, / direct poll = {to_poll:.2f}")
    overhead = ratios["busy"][1]
    verdict = "meets" if overhead <= args.target else "MISSES"
    print(f"broker overhead (busy target, vs the same poll done directly): {overhead:.2f} {verdict} {args.target:g}")
    return 0 if overhead <= args.target else 1


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "_serve-static":
        display, workdir, ready, delay, interval, level = sys.argv[2:8]
        _serve_static(display, Path(workdir), Path(ready), float(delay), float(interval), int(level))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--no-librecad", action="store_true", help="a broker with no application on the display")
    parser.add_argument("--settle-delay-s", type=float, default=0.0)
    parser.add_argument("--settle-interval-s", type=float, default=0.0)
    parser.add_argument("--png-level", type=int, default=6)
    parser.add_argument("--target", type=float, default=1.25)
    args = parser.parse_args()
    token = secrets.token_urlsafe(24)
    print(f"load average before the run: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    with (
        tempfile.TemporaryDirectory(prefix="broker-roundtrip-") as name,
        XvfbDisplay(1920, 1080) as xvfb,
        broker(xvfb.name, Path(name), args, token) as ready,
    ):
        return asyncio.run(measure(args, xvfb.name, ready["url"], token))


if __name__ == "__main__":
    sys.exit(main())
