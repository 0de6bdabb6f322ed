"""The protocol's floor: what N concurrent rollouts cost with nothing but their unavoidable I/O.

    python benchmarks/_floor_probe.py BROKERS_JSON OUT_DIR TURNS LATENCY_S LAYOUT RESULT_JSON

Run by ``rollout_floor.py`` in a process of its own, so that its CPU is measured by ``wait4``
exactly as the controller's is. Each rollout does what the exactly-once protocol and a
resumable trace cannot do without, and nothing else, through the project's own
:class:`~autocad_bench.broker.client.BrokerClient` on one kept-alive connection:

- start: lease, reset, frame 0 (fetched, checksum-verified, written), one fsynced checkpoint;
- per turn: the model's latency (a sleep), the actions request with its frame (verified by
  SHA-256 in the client), the frame written to a file, one checkpoint line appended and
  fsynced (resume needs the batch recorded before the next is sent);
- end: drawing checkpoint and download (written, fsynced), events and frame events, release,
  one fsynced result.

No pydantic records of the harness, no run state, no model-turn or summary logs, no batch
state, no progress display, no provider, no backend lease, no evaluation. ``LAYOUT`` is
``threads`` (one thread and event loop per rollout, as shared mode runs its pilots) or
``loop`` (every rollout a task on one event loop). Writes the CPU of the rollouts (the
process's ``getrusage`` from the first lease to the last result, imports and broker start-up
excluded) to RESULT_JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import threading
import time
from pathlib import Path

from autocad_bench.actions.models import ClickAction, KeyAction, TypeAction
from autocad_bench.broker.client import BrokerClient


def _write(path: Path, data: bytes | memoryview, *, durable: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


START_SPACING_S = 0.001
"""Rollout ``i`` starts ``i`` ms after the first, in both layouts. Started all in the same
instant, 1,000 threads open 1,000 connections at once, overflow the brokers' accept backlog
and wait out SYN retransmissions (seen: connect timeouts, a tenth of the rollouts lost); the
controller spreads its start wave the same way by preparing each rollout first."""


async def rollout(url: str, token: str, root: Path, index: int, turns: int, latency: float) -> None:
    await asyncio.sleep(index * START_SPACING_S)
    folder = root / f"r{index:04d}"
    (folder / "frames").mkdir(parents=True)
    client = BrokerClient(url, token)
    actions = [ClickAction(type="click", x=900, y=500, button="left", count=1),
               TypeAction(type="type", text="line"), KeyAction(type="key", keys=["enter"])]
    async with client.keep_alive():
        lease = await client.lease("line-and-circle", f"floor-{index:04d}")
        reset = await client.reset(lease.session_id)
        png = await client.frame(reset.frame.sequence, expected_sha256=reset.frame.sha256)
        _write(folder / "frames" / f"{reset.frame.sequence:06d}.png", png, durable=False)
        _write(folder / "checkpoint.json", json.dumps({"next_index": reset.next_index}).encode(), durable=True)
        journal = os.open(folder / "journal.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        next_index = reset.next_index
        try:
            for turn in range(turns):
                await asyncio.sleep(latency)
                request_id = f"{index:032x}{turn:032x}"
                response, frame = await client.actions_with_frame(lease.session_id, request_id, next_index, actions)
                next_index = response.next_index
                _write(folder / "frames" / f"{response.frame.sequence:06d}.png", frame, durable=False)
                os.write(journal, json.dumps({"turn": turn, "next_index": next_index,
                                              "frame": response.frame.sha256}).encode() + b"\n")
                os.fsync(journal)
        finally:
            os.close(journal)
        saved = await client.checkpoint(lease.session_id, f"checkpoint-{lease.session_id}")
        drawing = await client.artifact(saved.artifact.name, expected_sha256=saved.artifact.sha256)
        _write(folder / saved.artifact.name, drawing, durable=True)
        events = await client.events()
        frame_events = await client.frame_events()
        _write(folder / "events.json", events.model_dump_json().encode(), durable=True)
        _write(folder / "frame_events.json", frame_events.model_dump_json().encode(), durable=True)
        await client.release(lease.session_id)
        _write(folder / "result.json", json.dumps({"status": "completed", "turns": turns}).encode(), durable=True)


def main() -> None:
    brokers = json.loads(Path(sys.argv[1]).read_text())
    root = Path(sys.argv[2])
    turns, latency, layout, result_path = int(sys.argv[3]), float(sys.argv[4]), sys.argv[5], Path(sys.argv[6])
    urls, token = brokers["urls"], brokers["token"]
    failures: list[str] = []

    def one(index: int) -> None:
        try:
            asyncio.run(rollout(urls[index], token, root, index, turns, latency))
        except Exception as error:
            failures.append(f"r{index:04d}: {type(error).__name__}: {error}")

    async def all_on_one_loop() -> None:
        results = await asyncio.gather(*(rollout(url, token, root, i, turns, latency) for i, url in enumerate(urls)),
                                       return_exceptions=True)
        failures.extend(f"r{i:04d}: {r!r}" for i, r in enumerate(results) if isinstance(r, BaseException))

    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.monotonic()
    if layout == "threads":
        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(urls))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    else:
        asyncio.run(all_on_one_loop())
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    result_path.write_text(json.dumps({
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "user_s": after.ru_utime - before.ru_utime, "sys_s": after.ru_stime - before.ru_stime,
        "wall_s": wall, "done": len(urls) - len(failures), "failures": failures[:5],
    }))


if __name__ == "__main__":
    main()
