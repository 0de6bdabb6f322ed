"""Shared scaffolding of the anthropic provider tests: a rollout directory, sessions, observations."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

from autocad_bench.actions.schema import computer_action_schema
from autocad_bench.models import ArtifactRef, JsonObject
from autocad_bench.providers.models import (
    Credentials,
    DisplaySize,
    ModelSpec,
    ModelTurn,
    Observation,
    SessionRequest,
)
from autocad_bench.testing.fake_broker import png_frame
from autocad_bench.testing.wire import RecordedRequest
from autocad_bench_anthropic.provider import AnthropicProvider
from autocad_bench_anthropic.session import AnthropicSession
from tests.providers.anthropic.messages_wire import MessagesWire

SECRET = "sk-ant-test-7f3c1e9a0b2d4c6e8f"
DISPLAY = DisplaySize(width=64, height=48)
MOVE = {"actions": [{"type": "move", "x": 3, "y": 4}]}
SERVER_MODEL = "claude-opus-4-7"
FABLE_MODEL = "claude-fable-5"


class Rollout:
    """A rollout directory with a reference and frames written on demand."""

    def __init__(self, root: Path, *, frame_bytes: int = 0, seed: int = 7) -> None:
        self.root = root
        self.frame_bytes = frame_bytes
        self.rng = random.Random(seed)
        data = png_frame(DISPLAY.width, DISPLAY.height, 99, 7)
        self.reference = self._write("reference.png", data)
        self.frames: dict[int, ArtifactRef] = {}

    def _write(self, relative: str, data: bytes) -> ArtifactRef:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return ArtifactRef(path=relative, sha256=hashlib.sha256(data).hexdigest(),
                           width=DISPLAY.width, height=DISPLAY.height)

    def frame(self, index: int) -> ArtifactRef:
        """Frame ``index`` (a small PNG, padded with ``frame_bytes`` of incompressible noise)."""
        if index not in self.frames:
            data = png_frame(DISPLAY.width, DISPLAY.height, index, index)
            if self.frame_bytes:
                data += self.rng.randbytes(self.frame_bytes)
            self.frames[index] = self._write(f"frames/{index:06d}.png", data)
        return self.frames[index]


def session_request(rollout: Rollout, model: str, wire: MessagesWire, *,
                    resume_state: JsonObject | None = None, **options: Any) -> SessionRequest:
    return SessionRequest(
        rollout_id="r1",
        attempt_id="b.r1.1",
        model=ModelSpec(provider="anthropic", model=model,
                        options={"base_url": wire.url, "timeout_s": 20, **options}),
        task_prompt="Draw a circle of radius 50 at the origin and save the drawing.",
        reference=rollout.reference,
        rollout_dir=rollout.root,
        display=DISPLAY,
        action_schema=computer_action_schema(),
        action_budget=5000,
        resume_state=resume_state,
    )


def open_session(rollout: Rollout, model: str, wire: MessagesWire, *,
                 resume_state: JsonObject | None = None, **options: Any) -> AnthropicSession:
    request = session_request(rollout, model, wire, resume_state=resume_state, **options)
    session = AnthropicProvider().open_session(request, Credentials({"ANTHROPIC_API_KEY": SECRET}))
    assert isinstance(session, AnthropicSession)
    return session


def observation(rollout: Rollout, index: int, previous: ModelTurn | None = None,
                feedback: str | None = None) -> Observation:
    return Observation(
        turn_index=index,
        frame=rollout.frame(index),
        feedback=feedback if feedback is not None else ("" if previous is None else f"Executed move; turn {index}."),
        tool_use_id=None if previous is None else previous.tool_use_id,
        remaining_actions=5000 - index,
        post_action_visual_stable=None if previous is None else True,
    )


def bodies(wire: MessagesWire) -> list[dict[str, Any]]:
    return [r.json() for r in wire.model_requests()]


def message_kinds(body: dict[str, Any]) -> list[str]:
    """``role:block,block`` per message, e.g. ``user:tool_result`` (compact view for asserts)."""
    out = []
    for message in body["messages"]:
        kinds = ",".join(b["type"] for b in message["content"])
        out.append(f"{message['role']}:{kinds}")
    return out


def assert_pairs_complete(body: dict[str, Any]) -> None:
    """Every tool_use is answered by the next message, and every tool_result answers the previous."""
    messages = body["messages"]
    for i, message in enumerate(messages):
        for block in message["content"]:
            if block["type"] == "tool_use":
                assert i + 1 < len(messages), "a tool_use without result is only allowed in a response"
                answered = [b.get("tool_use_id") for b in messages[i + 1]["content"] if b["type"] == "tool_result"]
                assert block["id"] in answered, f"tool_use {block['id']} is not answered"
            if block["type"] == "tool_result":
                previous = [b["id"] for b in messages[i - 1]["content"] if b["type"] == "tool_use"]
                assert block["tool_use_id"] in previous, "an orphan tool_result"


def files_contain(root: Path, needle: str) -> list[Path]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and needle.encode() in path.read_bytes():
            hits.append(path)
    return hits


def request_sizes(requests: list[RecordedRequest]) -> list[int]:
    return [len(r.body) for r in requests]


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
