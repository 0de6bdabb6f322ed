"""Helpers shared by the benchmarks: broker process, rollout directories, tables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
REFERENCE = REPO / "examples" / "tasks" / "line-and-circle" / "reference.png"


@contextmanager
def broker_process(count: int, width: int, height: int, tmp: Path, realistic: bool = False) -> Iterator[dict[str, Any]]:
    ready = tmp / f"brokers-{count}.json"
    args = [sys.executable, str(HERE / "_broker_server.py"), str(count), str(width), str(height), str(ready)]
    process = subprocess.Popen([*args, *(["--realistic-frames"] if realistic else [])])
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("broker process did not start")
            time.sleep(0.05)
        yield json.loads(ready.read_text())
    finally:
        process.terminate()
        process.wait(timeout=30)


def table(title: str, header: list[str], rows: list[list[Any]]) -> str:
    widths = [max(len(str(x)) for x in [h, *[r[i] for r in rows]]) for i, h in enumerate(header)]
    line = " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))
    out = [title, line, "-+-".join("-" * w for w in widths)]
    out += [" | ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


def rss_mib() -> float:
    with open(f"/proc/{os.getpid()}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0
