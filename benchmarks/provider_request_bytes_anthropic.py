"""Anthropic provider: request bytes per turn over a long scripted rollout, and adapter CPU per turn.

A real ``AnthropicSession`` (official SDK, retries off) talks to a local Messages wire fake
for TURNS turns (default 300). Every turn sends a new realistic 1920x1080 PNG screenshot
(about 430 KB, 570 KB as base64). The fake answers with one ``computer_action`` call and a
deterministic token estimate (1,600 tokens per image); for server-compaction models it
returns a ``compaction`` block once the estimate reaches the 150,000-token trigger, as the
API would. Configurations (busy ~430 KB frames, and sparse ~144 KB frames):

* ``claude-fable-5``: deterministic client checkpoint (24 turns / 90,000 tokens);
* ``claude-opus-4-7``: official server compaction, plus the 24 MiB guard (with busy frames
  the guard trips long before 150,000 tokens; with sparse frames compaction comes first);
* ``claude-opus-4-7`` with ``server_compaction: false``: the 24 MiB guard alone.

It prints the request bytes at selected turns (bounded by compaction and the guard), and
the adapter CPU per turn (request planning, byte accounting, image encoding, response
handling; thread CPU time, the fake runs on another thread) averaged over turns 1-10 and
over the last ten turns. Target: last/first <= 2. ``adapter+SDK`` adds the SDK's own
request serialization and HTTP handling on the same thread.

    uv run python benchmarks/provider_request_bytes_anthropic.py [TURNS]
"""

from __future__ import annotations

import asyncio
import hashlib
import statistics
import struct
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

from _broker_server import realistic_png
from _common import REPO, table

sys.path.insert(0, str(REPO))

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
from autocad_bench.testing.wire import RecordedRequest, Reply
from autocad_bench_anthropic.provider import AnthropicProvider
from autocad_bench_anthropic.session import AnthropicSession
from tests.providers.anthropic.messages_wire import MessagesWire, estimated_input_tokens

DISPLAY = DisplaySize(width=1920, height=1080)
MIB = 1024 * 1024
SHOW = [1, 2, 10, 24, 25, 26, 40, 50, 75, 100, 150, 200, 250, 300]
CONFIGS: list[tuple[str, str, dict[str, Any], str]] = [
    ("fable, 430 KB", "claude-fable-5", {}, "busy"),
    ("server, 430 KB", "claude-opus-4-7", {}, "busy"),
    ("guard only, 430 KB", "claude-opus-4-7", {"server_compaction": False}, "busy"),
    ("fable, 144 KB", "claude-fable-5", {}, "sparse"),
    ("server, 144 KB", "claude-opus-4-7", {}, "sparse"),
]


def cad_png(width: int, height: int, lines: int, texts: int) -> bytes:
    """A synthetic CAD screenshot: dark background, ``lines`` random lines, ``texts`` labels."""
    import io
    import random

    from PIL import Image, ImageDraw

    rng = random.Random(7)
    image = Image.new("RGB", (width, height), (33, 33, 33))
    draw = ImageDraw.Draw(image)
    for _ in range(lines):
        x, y = rng.randrange(width), rng.randrange(height)
        draw.line([(x, y), (x + rng.randrange(-300, 300), y + rng.randrange(-300, 300))],
                  fill=(rng.randrange(256), rng.randrange(256), rng.randrange(256)), width=1)
    for _ in range(texts):
        draw.text((rng.randrange(width), rng.randrange(height)), "LINE 100,0 CIRCLE 20", fill=(220, 220, 220))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def unique_png(base: bytes, index: int) -> bytes:
    """``base`` with a per-turn text chunk before IEND (a distinct, valid PNG per turn)."""
    return base[:-12] + _chunk(b"tEXt", f"Comment\x00turn {index}".encode()) + base[-12:]


class Rollout:
    def __init__(self, root: Path, base: bytes) -> None:
        self.root = root
        self.base = base
        (root / "frames").mkdir(parents=True)
        data = realistic_png(640, 360)
        (root / "reference.png").write_bytes(data)
        self.reference = ArtifactRef(path="reference.png", sha256=hashlib.sha256(data).hexdigest())

    def frame(self, index: int) -> ArtifactRef:
        data = unique_png(self.base, index)
        relative = f"frames/{index:06d}.png"
        (self.root / relative).write_bytes(data)
        return ArtifactRef(path=relative, sha256=hashlib.sha256(data).hexdigest(),
                           width=DISPLAY.width, height=DISPLAY.height)


def fake_model(wire: MessagesWire, sizes: list[int], trigger: int | None) -> Any:
    def build(request: RecordedRequest) -> Reply:
        sizes.append(len(request.body))
        estimate = estimated_input_tokens(request.json())
        index = len(sizes) - 1
        before: list[dict[str, Any]] = []
        usage: dict[str, Any] = {"input_tokens": estimate, "cache_read_input_tokens": 0,
                                 "cache_creation_input_tokens": 0, "output_tokens": 60}
        if trigger is not None and estimate >= trigger:
            before = [{"type": "compaction", "content": f"Summary of the first {index} turns: drawing in progress.",
                       "encrypted_content": f"opaque-{index}"}]
            usage["iterations"] = [{"type": "compaction", "input_tokens": estimate, "output_tokens": 800,
                                    "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}]
            usage["input_tokens"] = 3_000
        actions = [{"type": "click", "x": 900 + index % 50, "y": 500, "button": "left", "count": 1},
                   {"type": "type", "text": "line"}, {"type": "key", "keys": ["enter"]}]
        return wire.tool_call_reply({"actions": actions}, call_id=f"toolu_{index:04d}", before=before, usage=usage)

    return build


async def run(label: str, model: str, options: dict[str, Any], turns: int, base: bytes) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp_name:
        rollout = Rollout(Path(tmp_name), base)
        sizes: list[int] = []
        wire = MessagesWire()
        mode_trigger = 150_000 if model != "claude-fable-5" and options.get("server_compaction", True) else None
        wire.default = fake_model(wire, sizes, mode_trigger)
        adapter_cpu: list[float] = []
        total_cpu: list[float] = []
        with wire:
            request = SessionRequest(
                rollout_id="bench", attempt_id="bench.r.1",
                model=ModelSpec(provider="anthropic", model=model, options={"base_url": wire.url, **options}),
                task_prompt="Draw a line from (0,0) to (100,0) and a circle of radius 20 at (50,50); save.",
                reference=rollout.reference, rollout_dir=rollout.root, display=DISPLAY,
                action_schema=computer_action_schema(), action_budget=5000)
            session = AnthropicProvider().open_session(request, Credentials({"ANTHROPIC_API_KEY": "sk-bench-0000"}))
            assert isinstance(session, AnthropicSession)
            previous: ModelTurn | None = None
            try:
                for index in range(turns):
                    observation = Observation(
                        turn_index=index, frame=rollout.frame(index),
                        feedback="" if previous is None else (
                            f"Executed actions {3 * index - 3}..{3 * index - 1} (3 inputs delivered to the desktop). "
                            "A receipt proves the input reached the desktop, not that the application accepted "
                            f"it: check the screenshot. Actions left in this rollout: {5000 - 3 * index}."),
                        tool_use_id=None if previous is None else previous.tool_use_id,
                        remaining_actions=5000 - 3 * index, post_action_visual_stable=True)
                    started = time.thread_time()
                    previous = await session.next_turn(observation)
                    total_cpu.append(time.thread_time() - started)
                    adapter_cpu.append(session.stats.adapter_cpu_s)
                    assert session.stats.request_bytes == sizes[-1], "measured bytes differ from the wire"
                    wire.clear()  # do not keep hundreds of megabytes of request bodies
                counters = session.checkpoint()["state"]["counters"]
            finally:
                await session.aclose()
    return {"label": label, "sizes": sizes, "adapter": adapter_cpu, "total": total_cpu, "counters": counters}


def main(turns: int) -> None:
    import anthropic  # imported once up front: the import is not per-turn adapter work

    del anthropic
    frames = {"busy": realistic_png(DISPLAY.width, DISPLAY.height), "sparse": cad_png(1920, 1080, 150, 60)}
    for kind, data in frames.items():
        print(f"{kind} frame: {len(data):,} bytes PNG, {len(data) * 4 // 3:,} bytes base64")
    print(f"turns: {turns}\n")
    results = [asyncio.run(run(label, model, options, turns, frames[kind]))
               for label, model, options, kind in CONFIGS]
    shown = [t for t in SHOW if t <= turns]
    rows = [[t, *(f"{r['sizes'][t - 1] / MIB:.2f}" for r in results)] for t in shown]
    rows.append(["max", *(f"{max(r['sizes']) / MIB:.2f}" for r in results)])
    print(table("Request bytes (MiB) at turn", ["turn", *(r["label"] for r in results)], rows))
    print()
    window = min(10, max(1, turns // 3))
    cpu_rows = []
    for r in results:
        first = statistics.mean(r["adapter"][:window]) * 1000
        last = statistics.mean(r["adapter"][-window:]) * 1000
        first_total = statistics.mean(r["total"][:window]) * 1000
        last_total = statistics.mean(r["total"][-window:]) * 1000
        c = r["counters"]
        cpu_rows.append([
            r["label"], f"{first:.2f}", f"{last:.2f}", f"{last / first:.2f}",
            f"{first_total:.1f}", f"{last_total:.1f}", f"{last_total / first_total:.2f}",
            c["client_checkpoints"], c["server_compactions"], c["screenshots_removed"], c["pairs_dropped"],
        ])
    print(table(
        f"Adapter CPU per turn (ms, mean of turns 1-{window} vs the last {window})",
        ["config", "adapter first", "adapter last", "ratio", "adapter+SDK first", "adapter+SDK last", "ratio",
         "client ckpts", "server compactions", "screens removed", "pairs dropped"],
        cpu_rows,
    ))
    worst = max(statistics.mean(r["adapter"][-window:]) / statistics.mean(r["adapter"][:window]) for r in results)
    print(f"\nworst adapter CPU ratio (last/first): {worst:.2f} (target <= 2)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
