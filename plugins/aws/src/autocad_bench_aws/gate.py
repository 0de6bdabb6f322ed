"""The image release gate: ``autocad-bench-aws-gate --config CONFIG --output REPORT``.

It launches one untouched clone of the configured image, runs the full handoff path of a
rollout (status checks, SSM, current-boot readiness, authenticated exact-process tunnel),
then a disposable smoke through the broker: lease, reset and its frame 0, one scripted
action batch, checkpoint and the drawing artifact, events, frame events, status, release.
The clone is terminated in ``finally``. The report is bound to the image id and the broker
version; ``gate_report`` in the infrastructure spec makes preflight require a passing one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

REPORT_FORMAT = "autocad-bench-aws-gate/1"
GATE_TASK = "release-gate-smoke"


class GateCheck(BaseModel):
    """One step of the release gate: whether it passed, the detail or error, and how long it took."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    passed: bool
    detail: str = ""
    seconds: float = 0.0


class GateReport(BaseModel):
    """The gate's verdict for one image and broker version."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: str = REPORT_FORMAT
    image_id: str
    broker_version: str
    instance_type: str = ""
    region: str = ""
    passed: bool
    instance_id: str | None = None
    started_at: str
    finished_at: str
    checks: list[GateCheck] = Field(default_factory=list)


async def run_gate(spec: Any, *, session: Any = None, output_dir: Path, log: Callable[[str], None] | None = None
                   ) -> GateReport:
    """Run the gate for ``spec`` (an :class:`~autocad_bench.infrastructure.InfrastructureSpec`)."""
    from autocad_bench.broker.client import BrokerClient
    from autocad_bench.infrastructure import EvaluationArguments, RolloutLaunchRequest
    from autocad_bench_aws.calls import AwsSession
    from autocad_bench_aws.fleet import FleetPoller, fleet_dir
    from autocad_bench_aws.lifecycle import Clone, LifecycleLog, _launch, _ready, _terminate
    from autocad_bench_aws.reconcile import reap
    from autocad_bench_aws.settings import aws_settings

    settings = aws_settings(spec)
    session = session or AwsSession(settings.aws_region, settings.aws_profile)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    batch_id = f"gate-{settings.image_id}-{stamp}-{secrets.token_hex(3)}"
    output_dir.mkdir(parents=True, exist_ok=True)
    lifecycle_log = LifecycleLog(output_dir / "gate.log")
    say = log or lifecycle_log
    request = RolloutLaunchRequest(
        batch_id=batch_id, rollout_id="gate", attempt_id=f"{batch_id}.gate.1", task_id=GATE_TASK, spec=spec,
        child_command=("true",), output_dir=output_dir, log_path=output_dir / "gate.log",
        evaluation=EvaluationArguments(enabled=False, task_id=GATE_TASK))
    checks: list[GateCheck] = []
    started = datetime.now(UTC).isoformat(timespec="seconds")
    clone = Clone(1)

    async def step(name: str, action: Callable[[], Awaitable[str]]) -> bool:
        began = time.monotonic()
        try:
            detail = await action()
            checks.append(GateCheck(name=name, passed=True, detail=detail, seconds=round(time.monotonic() - began, 3)))
            return True
        except Exception as error:
            checks.append(GateCheck(name=name, passed=False, detail=f"{type(error).__name__}: {error}",
                                    seconds=round(time.monotonic() - began, 3)))
            say(f"gate step {name} failed: {error}")
            return False

    fleet = FleetPoller(fleet_dir(batch_id), session)
    try:
        async def launch() -> str:
            await _launch(session, clone, request, settings, lifecycle_log)
            return f"{clone.instance_id}"

        async def handoff() -> str:
            await _ready(session, fleet, clone, request, settings, lifecycle_log)
            assert clone.readiness is not None
            return f"broker pid {clone.readiness.pid}, boot {clone.readiness.boot_id}"

        if await step("launch", launch) and await step("handoff", handoff):
            assert clone.tunnel is not None
            await _smoke(BrokerClient(clone.tunnel.url, clone.token), request.attempt_id, step)
    finally:
        problem = await _terminate(session, clone, lifecycle_log)
        checks.append(GateCheck(name="terminate", passed=problem is None, detail=problem or "requested"))
        await asyncio.to_thread(reap, session, batch_id)
    return GateReport(image_id=settings.image_id, broker_version=spec.broker_version,
                      instance_type=settings.instance_type, region=settings.aws_region,
                      passed=bool(checks) and all(c.passed for c in checks) and len(checks) >= 9,
                      instance_id=clone.instance_id, started_at=started,
                      finished_at=datetime.now(UTC).isoformat(timespec="seconds"), checks=checks)


async def _smoke(client: Any, attempt_id: str, step: Callable[[str, Callable[[], Awaitable[str]]], Awaitable[bool]]
                 ) -> None:
    from autocad_bench.actions import action_request_id
    from autocad_bench.actions.models import MoveAction, WaitAction

    state: dict[str, Any] = {}

    async def lease() -> str:
        state["lease"] = await client.lease(GATE_TASK, attempt_id)
        return str(state["lease"].session_id)

    async def reset() -> str:
        done = await client.reset(state["lease"].session_id)
        await client.frame(done.frame.sequence, expected_sha256=done.frame.sha256)
        state["next"] = done.next_index
        return f"frame 0 {done.frame.width}x{done.frame.height} {done.frame.sha256[:12]}"

    async def actions() -> str:
        batch = (MoveAction(x=960, y=540), WaitAction(seconds=0.1))
        done = await client.actions(state["lease"].session_id, action_request_id(attempt_id, "gate-smoke", 0),
                                    state["next"], batch)
        if not all(r.ok for r in done.receipts):
            raise RuntimeError(f"input refused: {[r.error for r in done.receipts if not r.ok]}")
        return f"{len(done.receipts)} actions, next index {done.next_index}"

    async def checkpoint() -> str:
        saved = await client.checkpoint(state["lease"].session_id, f"checkpoint-{state['lease'].session_id}")
        data = await client.artifact(saved.artifact.name, expected_sha256=saved.artifact.sha256)
        return f"{saved.artifact.name} {len(data)} bytes"

    async def evidence() -> str:
        events = await client.events()
        frames = await client.frame_events()
        status = await client.status()
        return f"{len(events.events)} events, {len(frames.frame_events)} frame events, state {status.state}"

    async def release() -> str:
        done = await client.release(state["lease"].session_id)
        return f"released {done.session_id}"

    for name, action in (("lease", lease), ("reset", reset), ("action_batch", actions), ("checkpoint", checkpoint),
                         ("evidence", evidence), ("release", release)):
        if not await step(name, action):
            return


def main(argv: list[str] | None = None) -> int:
    """Console script ``autocad-bench-aws-gate``; exit 0 only when the gate passed."""
    from autocad_bench.infrastructure import InfrastructureSpec

    parser = argparse.ArgumentParser(prog="autocad-bench-aws-gate", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, type=Path,
                        help="a batch configuration (its infrastructure object) or a bare infrastructure object")
    parser.add_argument("--output", required=True, type=Path, help="where to write the gate report (JSON)")
    args = parser.parse_args(argv)
    data = json.loads(args.config.read_text())
    spec = InfrastructureSpec.model_validate(data.get("infrastructure", data))
    report = asyncio.run(run_gate(spec, output_dir=args.output.parent / (args.output.stem + "-gate")))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report.model_dump_json(indent=2))
    print(json.dumps({"passed": report.passed, "image_id": report.image_id, "report": str(args.output)}))
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
