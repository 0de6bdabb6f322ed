"""Test helpers shared by the Chat Completions and AWS provider tests.

Sessions are driven the way the core drives them: one observation per turn answering the
previous turn's tool call, frames written under the rollout directory with their checksums.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autocad_bench.actions.schema import computer_action_schema
from autocad_bench.broker.client import BrokerClient
from autocad_bench.config.models import BudgetConfig
from autocad_bench.harness.assignment import PilotAssignment
from autocad_bench.harness.pilot import Pilot
from autocad_bench.models import ArtifactRef
from autocad_bench.plugins import PluginHost, PluginRegistry
from autocad_bench.providers.models import DisplaySize, ModelSpec, ModelTurn, Observation, SessionRequest
from autocad_bench.storage import atomic_write_json
from autocad_bench.testing.fake_broker import FakeBroker, png_frame
from autocad_bench.testing.wire import RecordedRequest, Reply, WireServer

DISPLAY = DisplaySize(width=64, height=48)
MOVE = {"actions": [{"type": "move", "x": 3, "y": 4}]}
DONE = {"actions": [{"type": "done"}]}


def write_image(root: Path, relative: str, data: bytes) -> ArtifactRef:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return ArtifactRef(path=relative, sha256=hashlib.sha256(data).hexdigest(), width=DISPLAY.width,
                       height=DISPLAY.height)


def noise_png(size: int, seed: int) -> bytes:
    """A PNG-framed blob of ``size`` incompressible bytes (the adapters never decode images)."""
    return b"\x89PNG\r\n\x1a\n" + random.Random(seed).randbytes(max(0, size - 8))


def small_frames(root: Path, count: int) -> list[ArtifactRef]:
    return [write_image(root, f"frames/{i:06d}.png", png_frame(DISPLAY.width, DISPLAY.height, i, i))
            for i in range(count)]


def reference(root: Path) -> ArtifactRef:
    return write_image(root, "reference.png", png_frame(DISPLAY.width, DISPLAY.height, 99, 7))


def session_request(model: ModelSpec, root: Path, ref: ArtifactRef, resume_state: Any = None,
                    rollout_id: str = "r-1", attempt_id: str = "b.r-1.1") -> SessionRequest:
    return SessionRequest(
        rollout_id=rollout_id, attempt_id=attempt_id, model=model, task_prompt="Draw a 100 mm line.",
        reference=ref, rollout_dir=root, display=DISPLAY, action_schema=computer_action_schema(),
        action_budget=5000, resume_state=resume_state,
    )


def observation(frame: ArtifactRef, index: int, previous: ModelTurn | None, feedback: str | None = None) -> Observation:
    return Observation(
        turn_index=index, frame=frame,
        feedback=(feedback if feedback is not None
                  else "" if previous is None else f"Executed 1 action; turn {index}."),
        tool_use_id=None if previous is None else previous.tool_use_id,
        remaining_actions=5000 - index, post_action_visual_stable=None if previous is None else True,
    )


def messages_raw(body: bytes, key: str = "messages") -> bytes:
    """The exact bytes of the message array inside a request body."""
    marker = f'"{key}":'.encode()
    start = body.index(marker) + len(marker)
    text = body.decode()
    char_start = len(body[:start].decode())
    _, end = json.JSONDecoder().raw_decode(text, char_start)
    return text[char_start:end].encode()


def assert_append_only(bodies: list[bytes], key: str = "messages") -> None:
    """Each request's message array is a byte-identical prefix of the next one's."""
    for before, after in itertools.pairwise(bodies):
        a, b = messages_raw(before, key), messages_raw(after, key)
        assert b.startswith(a[:-1]) and b[len(a) - 1:len(a)] == b",", "the history prefix was rewritten"


def scan_for(root: Path, secrets: list[str]) -> list[Path]:
    """Files under ``root`` that contain any of ``secrets``."""
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if any(s.encode() in data for s in secrets):
                found.append(path)
    return found


def scripted_default(script: Callable[[int], Reply]) -> Callable[[RecordedRequest], Reply]:
    """A wire ``default`` that answers the n-th model request with ``script(n)`` (0-based)."""
    counter = {"n": 0}

    def answer(_: RecordedRequest) -> Reply:
        n = counter["n"]
        counter["n"] += 1
        return script(n)

    return answer


def run_pilot(tmp: Path, model: ModelSpec, environ: dict[str, str], credential_names: tuple[str, ...],
              budgets: BudgetConfig | None = None) -> tuple[dict[str, Any], Path]:
    """Run the real core pilot for one rollout against a FakeBroker; returns (result.json, rollout dir)."""
    ref_png = tmp / "reference-source.png"
    ref_png.write_bytes(png_frame(DISPLAY.width, DISPLAY.height, 99, 7))

    async def scenario() -> dict[str, Any]:
        async with FakeBroker(display=DISPLAY) as broker:
            rollout = tmp / "rollout"
            rollout.mkdir()
            assignment = PilotAssignment(
                batch_id="b", rollout_id="r", attempt_id="b.r.1", task_id="t", task_prompt="Draw a line.",
                reference_png=str(ref_png), model=model, budgets=budgets or BudgetConfig(), display=DISPLAY,
                credential_names=credential_names, infrastructure_backend="test")
            atomic_write_json(rollout / "assignment.json", assignment.model_dump(mode="json"))
            client = BrokerClient(broker.url, broker.token, wait_initial_s=0.0005, wait_max_s=0.001,
                                  wait_jitter_s=0.0, operation_deadline_s=10)
            pilot = Pilot(rollout, environ, host=PluginHost(registry=PluginRegistry(), environ={}), broker=client)
            await pilot.run()
            return dict(json.loads((rollout / "result.json").read_text()))

    return asyncio.run(scenario()), tmp / "rollout"


def model_requests(wire: WireServer) -> list[RecordedRequest]:
    return wire.model_requests()


def aws_environment(monkeypatch: Any, tmp: Path, access_key: str, secret_key: str,
                    token: str | None = None) -> None:
    """Static test credentials through the standard AWS chain, isolated from any real configuration."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_REGION",
                 "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_BEDROCK",
                 "AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "AWS_ENDPOINT_URL_BEDROCK_MANTLE", "AWS_BEARER_TOKEN_BEDROCK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret_key)
    if token is not None:
        monkeypatch.setenv("AWS_SESSION_TOKEN", token)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
