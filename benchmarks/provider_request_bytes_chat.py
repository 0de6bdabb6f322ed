"""Request bytes and CPU per turn over a long scripted rollout: Fireworks, Mantle, Bedrock.

Each provider session runs TURNS turns (default 300) through its real SDK (OpenAI SDK for
Fireworks and Mantle, with SigV4 signing for Mantle; boto3 for Bedrock) against a local
wire fake on its own thread, with a new, distinct 1920x1080 desktop frame of about
FRAME_KIB KiB every turn. Printed per provider:

* request bytes at sampled turns (exact: the size the fake received), and the maximum
  against the provider's compaction limit (Fireworks 8 MiB, Mantle 3 MiB; Bedrock keeps
  a compact rebuilt history and has no byte trigger);
* compactions (or, for Bedrock, summarized exchanges) and the largest message count;
* adapter CPU per turn: the provider's own work on the calling thread (building the
  request from cached renderings, parsing, committing); whole-turn CPU adds the SDK's
  serialization and the HTTP exchange;
* ratios of the median of the last five turns to the median of turns 2-6 (turn 1 also
  encodes the reference). Target for the adapter: <= 2.

    uv run python benchmarks/provider_request_bytes_chat.py [TURNS] [--frame-kib N] [--only NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import random
import statistics
import struct
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

from _common import REFERENCE, REPO, table

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

BATCH = {"actions": [{"type": "click", "x": 900, "y": 500, "button": "left", "count": 1},
                     {"type": "type", "text": "line"}, {"type": "key", "keys": ["enter"]}]}
SAMPLES = (1, 2, 5, 8, 9, 10, 25, 50, 100, 150, 200, 250, 300)
MiB = 1024 * 1024
LIMITS = {"fireworks": 8 * MiB, "mantle": 3 * MiB, "bedrock": None}


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def frame_png(width: int, height: int, noisy_bytes: int, label: str) -> bytes:
    """A PNG of ``width`` x ``height``: flat background plus a noisy band of about ``noisy_bytes``."""
    row_bytes = width * 3
    noisy_rows = max(1, noisy_bytes // row_bytes)
    noise = random.Random(label).randbytes(noisy_rows * row_bytes)
    flat = b"\x00" + b"\x21" * row_bytes
    rows = [b"\x00" + noise[y * row_bytes:(y + 1) * row_bytes] if y < noisy_rows else flat for y in range(height)]
    return b"".join((
        b"\x89PNG\r\n\x1a\n",
        _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)),
        _chunk(b"tEXt", b"bench\x00" + label.encode()),
        _chunk(b"IDAT", zlib.compress(b"".join(rows), 1)),
        _chunk(b"IEND", b""),
    ))


def write_ref(root: Path, relative: str, data: bytes) -> ArtifactRef:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return ArtifactRef(path=relative, sha256=hashlib.sha256(data).hexdigest(), width=1920, height=1080)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def _open(name: str, url: str, request: SessionRequest) -> Any:
    if name == "fireworks":
        from autocad_bench_fireworks.provider import FireworksProvider

        return FireworksProvider().open_session(request, Credentials({"FIREWORKS_API_KEY": "fw-benchmark-key"}))
    if name == "mantle":
        from autocad_bench_mantle.provider import MantleProvider

        return MantleProvider().open_session(request, Credentials({}))
    from autocad_bench_bedrock.provider import BedrockProvider

    return BedrockProvider().open_session(request, Credentials({}))


def _spec(name: str, url: str) -> ModelSpec:
    if name == "fireworks":
        return ModelSpec(provider=name, model="accounts/fireworks/routers/kimi-k2p6-fast",
                         options={"base_url": url + "/inference/v1"})
    if name == "mantle":
        return ModelSpec(provider=name, model="moonshotai.kimi-k2.5",
                         options={"base_url": url + "/v1", "region": "us-east-1"})
    return ModelSpec(provider=name, model="anthropic.claude-sonnet-4-5-20250929-v1:0",
                     options={"endpoint_url": url, "region": "us-east-1"})


async def drive(name: str, session: Any, wire: Any, frames: list[ArtifactRef],
                turns: int) -> tuple[list[float], list[float], list[int], list[bool]]:
    """Per turn: adapter CPU, whole-turn CPU, message count, compacted."""
    adapter: list[float] = []
    whole: list[float] = []
    messages: list[int] = []
    compacted: list[bool] = []
    worker_cpu = [0.0]
    if name == "bedrock":
        # boto3 runs in a worker thread: count its CPU there too.
        call = session._client.converse

        def timed(**kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return call(**kwargs)
            finally:
                worker_cpu[0] += time.thread_time() - start

        session._client.converse = timed
    previous: ModelTurn | None = None
    for index in range(turns):
        wire.push_tool_call(BATCH, call_id=f"call_{index:04d}")
        observation = Observation(
            turn_index=index, frame=frames[index],
            feedback="" if previous is None else (
                f"Executed actions {3 * index - 3}..{3 * index - 1} (3 inputs delivered to the desktop). "
                f"Actions left in this rollout: {5000 - 3 * index}."),
            tool_use_id=None if previous is None else previous.tool_use_id,
            remaining_actions=5000 - 3 * index, post_action_visual_stable=None if previous is None else True,
        )
        worker_cpu[0] = 0.0
        start = time.thread_time()
        previous = await session.next_turn(observation)
        whole.append(time.thread_time() - start + worker_cpu[0])
        adapter.append(session.adapter_cpu_s)
        if name == "bedrock":
            messages.append(session.last_messages)
            compacted.append(False)
        else:
            inner = getattr(session, "inner", session)
            prepared = inner.last_request
            messages.append(prepared.messages)
            compacted.append(prepared.compacted)
    await session.aclose()
    return adapter, whole, messages, compacted


def section(name: str, turns: int, frame_kib: int, tmp: Path) -> str:
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))  # the wire fakes live with the tests
    from tests.providers.bedrock.wire_converse import ConverseWire
    from tests.providers.fireworks.wire_chat import ChatCompletionsWire

    root = tmp / name
    root.mkdir()
    reference = write_ref(root, "reference.png", REFERENCE.read_bytes())
    frames = [write_ref(root, f"frames/{i:06d}.png", frame_png(1920, 1080, frame_kib * 1024, f"{name}-{i}"))
              for i in range(turns)]
    frame_bytes = (root / frames[0].path).stat().st_size

    async def run() -> tuple[list[int], list[float], list[float], list[int], list[bool]]:
        wire: Any = ConverseWire(keep_bodies=False) if name == "bedrock" else ChatCompletionsWire(keep_bodies=False)
        with wire:
            request = SessionRequest(
                rollout_id="bench", attempt_id="bench.bench.1", model=_spec(name, wire.url),
                task_prompt="Draw a line from (0,0) to (100,0) and a circle of radius 20 at the origin.",
                reference=reference, rollout_dir=root, display=DisplaySize(width=1920, height=1080),
                action_schema=computer_action_schema(), action_budget=5000,
            )
            session = _open(name, wire.url, request)
            adapter, whole, messages, compacted = await drive(name, session, wire, frames, turns)
            return [r.size for r in wire.model_requests()], adapter, whole, messages, compacted

    sizes, adapter, whole, messages, compacted = asyncio.run(run())
    rows = []
    for turn in [t for t in SAMPLES if t <= turns] + ([turns] if turns not in SAMPLES else []):
        i = turn - 1
        rows.append([turn, f"{sizes[i]:,}", f"{sizes[i] / MiB:.2f}", messages[i], "yes" if compacted[i] else "",
                     f"{adapter[i] * 1e3:.3f}", f"{whole[i] * 1e3:.2f}"])
    early = slice(1, 6) if turns > 6 else slice(0, turns)
    late = slice(max(0, turns - 5), turns)
    adapter_ratio = _median(adapter[late]) / max(_median(adapter[early]), 1e-9)
    whole_ratio = _median(whole[late]) / max(_median(whole[early]), 1e-9)
    limit = LIMITS[name]
    bound = (f"max {max(sizes):,} bytes <= limit {limit:,}: {'PASS' if max(sizes) <= limit else 'FAIL'}"
             if limit else f"max {max(sizes):,} bytes (compact rebuilt history: two images per request)")
    lines = [
        table(f"[{name}] request bytes and CPU per turn ({turns} turns, frame PNG {frame_bytes:,} bytes)",
              ["turn", "request bytes", "MiB", "messages", "compacted", "adapter CPU ms", "whole-turn CPU ms"],
              rows),
        f"[{name}] {bound}; median {int(_median([float(s) for s in sizes])):,}; "
        f"compactions {sum(compacted)}; max messages {max(messages)}; total sent {sum(sizes) / MiB:,.1f} MiB",
        f"[{name}] adapter CPU ratio turn {turns} / turns 2-6 (medians): {adapter_ratio:.2f} "
        f"(target <= 2: {'PASS' if adapter_ratio <= 2 else 'FAIL'})",
        f"[{name}] adapter CPU turn {turns} / turn 1 (single turns, noisy): "
        f"{adapter[-1] / max(adapter[0], 1e-9):.2f}",
        f"[{name}] whole-turn CPU ratio (adapter + SDK + HTTP): {whole_ratio:.2f}",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("turns", nargs="?", type=int, default=300)
    parser.add_argument("--frame-kib", type=int, default=120)
    parser.add_argument("--only", choices=["fireworks", "mantle", "bedrock"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        # Static throwaway credentials through the standard AWS chain, isolated from real ones.
        os.environ.update({"AWS_ACCESS_KEY_ID": "AKIABENCHMARK0000001", "AWS_SECRET_ACCESS_KEY": "benchmark-secret",
                           "AWS_CONFIG_FILE": str(Path(tmp) / "none"),
                           "AWS_SHARED_CREDENTIALS_FILE": str(Path(tmp) / "none"),
                           "AWS_EC2_METADATA_DISABLED": "true"})
        os.environ.pop("AWS_SESSION_TOKEN", None)
        os.environ.pop("AWS_PROFILE", None)
        for name in [args.only] if args.only else ["fireworks", "mantle", "bedrock"]:
            print(section(name, args.turns, args.frame_kib, Path(tmp)))
            print()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
