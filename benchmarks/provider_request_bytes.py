"""Request bytes per turn and adapter CPU per turn over a long scripted rollout, per provider.

Each provider session runs TURNS turns (default 300) against a local Responses wire fake
(real SDK, real HTTP; the fake runs on its own thread so its CPU is not counted). Every
turn brings a new, distinct desktop frame of about FRAME_KIB KiB (PNG; real CAD
screenshots are mostly flat colour and compress to roughly this size). Printed per
provider:

* the curve of request bytes per turn (sampled turns);
* adapter CPU per turn: CPU time of the provider's own request building (history,
  image encodings, body assembly), measured on the calling thread;
* whole-turn CPU: everything ``next_turn`` does on the calling thread (adapter, SDK,
  HTTP send of the body, response parsing);
* ratios of the median of the last five turns to the median of turns 2-6 (turn 1 also
  encodes the reference). Target for the adapter: <= 2 (cached encodings, no
  re-encoding of historical images); ``encodings`` must equal 1 + TURNS.

Sections: ``openai``, ``openrouter`` (other provider owners add theirs in their own files).

    uv run python benchmarks/provider_request_bytes.py [TURNS] [--frame-kib N] [--only openai|openrouter]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import random
import statistics
import struct
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import REFERENCE, table

from autocad_bench.actions.schema import computer_action_schema
from autocad_bench.models import ArtifactRef
from autocad_bench.providers.models import (
    Credentials,
    DisplaySize,
    ModelSpec,
    ModelTurn,
    Observation,
    SessionRequest,
)
from autocad_bench.providers.session import ProviderSession
from autocad_bench.testing.wire import ResponsesWire

BATCH = {"actions": [{"type": "click", "x": 900, "y": 500, "button": "left", "count": 1},
                     {"type": "type", "text": "line"}, {"type": "key", "keys": ["enter"]}]}
SAMPLES = (1, 2, 5, 10, 25, 50, 100, 150, 200, 250, 300)
KEY = "sk-benchmark-not-a-real-key"


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def frame_png(width: int, height: int, noisy_bytes: int, label: str) -> bytes:
    """A PNG of ``width`` x ``height``: flat background plus a noisy band of about ``noisy_bytes``."""
    row_bytes = width * 3
    noisy_rows = max(1, noisy_bytes // row_bytes)
    noise = random.Random(label).randbytes(noisy_rows * row_bytes)
    flat = b"\x00" + b"\x21" * row_bytes
    rows = [b"\x00" + noise[y * row_bytes:(y + 1) * row_bytes] if y < noisy_rows else flat for y in range(height)]
    raw = b"".join(rows)
    return b"".join((
        b"\x89PNG\r\n\x1a\n",
        _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)),
        _chunk(b"tEXt", b"bench\x00" + label.encode()),
        _chunk(b"IDAT", zlib.compress(raw, 1)),
        _chunk(b"IEND", b""),
    ))


def write_ref(root: Path, relative: str, data: bytes, width: int, height: int) -> ArtifactRef:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return ArtifactRef(path=relative, sha256=hashlib.sha256(data).hexdigest(), width=width, height=height)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


async def drive(
    session: ProviderSession,
    build_name: str,
    wire: ResponsesWire,
    frames: list[ArtifactRef],
    turns: int,
) -> tuple[list[int], list[float], list[float]]:
    """Run ``turns`` turns; per turn: request bytes, adapter CPU (s), whole-turn CPU (s)."""
    adapter: list[float] = []
    original: Callable[..., Any] = getattr(session, build_name)

    def timed(observation: Observation) -> Any:
        start = time.thread_time()
        try:
            return original(observation)
        finally:
            adapter.append(time.thread_time() - start)

    setattr(session, build_name, timed)
    whole: list[float] = []
    previous: ModelTurn | None = None
    for index in range(turns):
        wire.push_tool_call(BATCH)
        observation = Observation(
            turn_index=index,
            frame=frames[index],
            feedback="" if previous is None else (
                f"Executed actions {3 * index - 3}..{3 * index - 1} (3 inputs delivered to the desktop). "
                f"Actions left in this rollout: {5000 - 3 * index}."),
            tool_use_id=None if previous is None else previous.tool_use_id,
            remaining_actions=5000 - 3 * index,
            post_action_visual_stable=None if previous is None else True,
        )
        start = time.thread_time()
        previous = await session.next_turn(observation)
        whole.append(time.thread_time() - start)
    sizes = [r.size for r in wire.model_requests()]
    await session.aclose()
    return sizes, adapter, whole


def section(name: str, turns: int, frame_kib: int, tmp: Path) -> str:
    display = DisplaySize(width=1920, height=1080)
    root = tmp / name
    root.mkdir()
    reference = write_ref(root, "reference.png", REFERENCE.read_bytes(), display.width, display.height)
    frames = [write_ref(root, f"frames/{i:06d}.png", frame_png(1920, 1080, frame_kib * 1024, f"{name}-{i}"),
                        1920, 1080) for i in range(turns)]
    frame_bytes = (root / frames[0].path).stat().st_size

    async def run() -> tuple[list[int], list[float], list[float], int]:
        with ResponsesWire(keep_bodies=False) as wire:
            if name == "openai":
                from autocad_bench_openai.provider import OpenaiProvider

                provider: Any = OpenaiProvider()
                options: dict[str, Any] = {"base_url": wire.url + "/v1"}
                model, credential, build = "gpt-5.5", "OPENAI_API_KEY", "build_body"
            else:
                from autocad_bench_openrouter.provider import OpenrouterProvider

                provider = OpenrouterProvider()
                options = {"base_url": wire.url + "/api/v1"}
                model, credential, build = "anthropic/claude-sonnet-4.5", "OPENROUTER_API_KEY", "build_body"
            request = SessionRequest(
                rollout_id="bench", attempt_id="bench.bench.1",
                model=ModelSpec(provider=name, model=model, options=options),
                task_prompt="Draw a line from (0,0) to (100,0) and a circle of radius 20 at the origin.",
                reference=reference, rollout_dir=root, display=display,
                action_schema=computer_action_schema(), action_budget=5000,
            )
            session = provider.open_session(request, Credentials({credential: KEY}))
            sizes, adapter, whole = await drive(session, build, wire, frames, turns)
            return sizes, adapter, whole, session.encodings

    sizes, adapter, whole, encodings = asyncio.run(run())
    rows = []
    for turn in [t for t in SAMPLES if t <= turns] + ([turns] if turns not in SAMPLES else []):
        i = turn - 1
        rows.append([turn, f"{sizes[i]:,}", f"{sizes[i] / 1024 / 1024:.2f}", f"{adapter[i] * 1e3:.3f}",
                     f"{whole[i] * 1e3:.2f}"])
    early = slice(1, 6) if turns > 6 else slice(0, turns)
    late = slice(max(0, turns - 5), turns)
    adapter_ratio = _median(adapter[late]) / max(_median(adapter[early]), 1e-9)
    whole_ratio = _median(whole[late]) / max(_median(whole[early]), 1e-9)
    lines = [
        table(f"[{name}] request bytes and CPU per turn ({turns} turns, frame PNG {frame_bytes:,} bytes)",
              ["turn", "request bytes", "MiB", "adapter CPU ms", "whole-turn CPU ms"], rows),
        f"[{name}] total bytes sent: {sum(sizes) / 1024 / 1024:,.1f} MiB; images base64-encoded: {encodings} "
        f"(expected {turns + 1}: reference once, each frame once)",
        f"[{name}] adapter CPU ratio turn {turns} / turn 2-6 (medians): {adapter_ratio:.2f} "
        f"(target <= 2: {'PASS' if adapter_ratio <= 2 else 'FAIL'})",
        f"[{name}] whole-turn CPU ratio (adapter + SDK + HTTP send): {whole_ratio:.2f}",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("turns", nargs="?", type=int, default=300)
    parser.add_argument("--frame-kib", type=int, default=120)
    parser.add_argument("--only", choices=["openai", "openrouter"])
    args = parser.parse_args()
    names = [args.only] if args.only else ["openai", "openrouter"]
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            print(section(name, args.turns, args.frame_kib, Path(tmp)))
            print()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
