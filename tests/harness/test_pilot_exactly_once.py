"""The pilot injects every action exactly once, in order, whatever is lost and whoever crashes.

Hypothesis generates a script of action batches, a schedule of transport faults on every
broker endpoint (lost requests, lost or truncated responses) and a set of moments at which
the controller dies (the pilot task is cancelled mid-flight and a fresh pilot is started on
the same rollout directory). Invariant: the broker's input log is exactly the script, once,
in order, and the trace's receipts say the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autocad_bench.broker.client import BrokerClient
from autocad_bench.broker.protocol import Route
from autocad_bench.config.models import BudgetConfig
from autocad_bench.harness.assignment import PilotAssignment
from autocad_bench.harness.pilot import Pilot
from autocad_bench.plugins import PluginHost, PluginRegistry
from autocad_bench.providers.models import DisplaySize, ModelSpec
from autocad_bench.storage import atomic_write_json
from autocad_bench.testing.fake_broker import FakeBroker, Fault, FaultKind

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "examples" / "tasks" / "line-and-circle" / "reference.png"
DISPLAY = DisplaySize(width=32, height=24)
ROUTES = [Route.LEASE, Route.RESET, Route.ACTIONS, Route.FRAME, Route.CHECKPOINT, Route.ARTIFACT,
          Route.EVENTS, Route.FRAME_EVENTS, Route.RELEASE]
LOSSES = [FaultKind.DROP_REQUEST, FaultKind.DROP_RESPONSE, FaultKind.TRUNCATE_RESPONSE, FaultKind.CORRUPT_RESPONSE]

points = st.tuples(st.integers(0, DISPLAY.width - 1), st.integers(0, DISPLAY.height - 1))
actions = st.one_of(
    points.map(lambda p: {"type": "move", "x": p[0], "y": p[1]}),
    points.map(lambda p: {"type": "click", "x": p[0], "y": p[1], "button": "left", "count": 1}),
    st.text(alphabet="abcxyz019,.", min_size=1, max_size=6).map(lambda t: {"type": "type", "text": t}),
    st.sampled_from([["enter"], ["escape"], ["ctrl", "z"]]).map(lambda k: {"type": "key", "keys": k}),
)
scripts = st.lists(st.lists(actions, min_size=1, max_size=4), min_size=1, max_size=4)
faults = st.lists(st.tuples(st.sampled_from(ROUTES), st.sampled_from(LOSSES)), max_size=6)
crashes = st.lists(st.integers(1, 30), max_size=3, unique=True).map(sorted)


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    """A fresh directory per schedule, in memory where the machine has one: the pilot's fsyncs
    are what they are in production, they just cost nothing on tmpfs (2,000 schedules)."""
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else None) as name:
        yield Path(name)


def _setup(tmp: Path, script: list[list[dict[str, Any]]], broker: FakeBroker) -> Path:
    rollout = tmp / "rollout"
    rollout.mkdir()
    script_path = tmp / "script.jsonl"
    script_path.write_text("".join(json.dumps({"actions": batch}) + "\n" for batch in script))
    assignment = PilotAssignment(
        batch_id="b", rollout_id="r", attempt_id="b.r.1", task_id="t", task_prompt="draw",
        reference_png=str(REFERENCE), model=ModelSpec(provider="scripted", model="replay",
                                                      options={"script": str(script_path)}),
        budgets=BudgetConfig(), display=DISPLAY, infrastructure_backend="test")
    atomic_write_json(rollout / "assignment.json", assignment.model_dump(mode="json"))
    return rollout


async def _scenario(tmp: Path, script: list[list[dict[str, Any]]], schedule: list[tuple[Route, FaultKind]],
                    crash_at: list[int]) -> None:
    async with FakeBroker(display=DISPLAY) as broker:
        rollout = _setup(tmp, script, broker)
        broker.add_faults(*[Fault(kind, route) for route, kind in schedule])
        host = PluginHost(registry=PluginRegistry(), environ={})
        environ = {"AUTOCAD_BENCH_BROKER_URL": broker.url, "AUTOCAD_BENCH_BROKER_TOKEN": broker.token}
        restarts = 0
        for crash in [*crash_at, None]:
            client = BrokerClient(broker.url, broker.token, wait_initial_s=0.0005, wait_max_s=0.002,
                                  wait_jitter_s=0.0, operation_deadline_s=20)
            pilot = Pilot(rollout, environ, host=host, broker=client)
            task = asyncio.create_task(pilot.run())
            if crash is not None:
                # The controller dies after the broker has seen `crash` more requests.
                target = len(broker.requests) + crash
                while not task.done() and len(broker.requests) < target:
                    await asyncio.sleep(0)
                if not task.done():
                    task.cancel()
                    restarts += 1
            try:
                code = await task
            except asyncio.CancelledError:
                continue
            assert code == 0, (rollout / "result.json").read_text()
            break
        expected = [a for batch in script for a in batch] + [{"type": "done"}]
        assert [i.index for i in broker.injected] == list(range(len(expected)))
        assert [i.action.model_dump(mode="json", exclude_none=True) for i in broker.injected] == [
            {k: v for k, v in a.items()} for a in expected]
        receipts = [json.loads(line) for line in (rollout / "input_receipts.jsonl").read_text().splitlines()]
        assert [r["index"] for r in receipts] == list(range(len(expected)))
        result = json.loads((rollout / "result.json").read_text())
        assert result["status"] == "completed" and result["actions"] == len(expected)
        assert result["attempts"] >= 1


@pytest.mark.timeout(1200)  # 1,000 real-HTTP schedules; slow only on a loaded machine
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                    HealthCheck.too_slow])
@given(script=scripts, schedule=faults, crash_at=crashes)
def test_exactly_once_under_loss_and_restarts(script: list[list[dict[str, Any]]],
                                              schedule: list[tuple[Route, FaultKind]], crash_at: list[int]) -> None:
    with scratch() as tmp:
        asyncio.run(_scenario(tmp, script, schedule, crash_at))


@pytest.mark.timeout(1200)  # 1,000 real-HTTP schedules; slow only on a loaded machine
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                    HealthCheck.too_slow])
@given(script=scripts, schedule=st.lists(st.tuples(st.just(Route.ACTIONS), st.sampled_from(LOSSES)), max_size=5),
       crash_at=st.lists(st.integers(1, 8), min_size=1, max_size=4, unique=True).map(sorted))
def test_exactly_once_with_crashes_around_actions(script: list[list[dict[str, Any]]],
                                                  schedule: list[tuple[Route, FaultKind]],
                                                  crash_at: list[int]) -> None:
    with scratch() as tmp:
        asyncio.run(_scenario(tmp, script, schedule, crash_at))
