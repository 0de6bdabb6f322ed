"""batch-state.json under load: coalesced writes, and never older than a change that returned.

The store rewrites the whole batch, so it must not do that once per rollout change (the
controller's work per change would grow with the batch); and a change resume depends on
(a terminal state, a start, spend) must be on disk before ``update_rollout`` returns, so an
abrupt stop (``kill -9``) never leaves a file older than the last such change.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autocad_bench.config.models import BudgetConfig
from autocad_bench.controller.state import BatchState, BatchStateStore, RolloutEntryState

RANK = {"queued": 0, "starting": 1, "running": 2, "evaluating": 3, "done": 4, "failed": 4}


def make_state(rollouts: int) -> BatchState:
    now = datetime.now(UTC)
    return BatchState(
        batch_id="b", name="scale", config_path="/nonexistent.json", created_at=now, updated_at=now,
        execution_mode="shared", max_concurrency=rollouts, admitted_wave=rollouts,
        infrastructure_backend="example-pool", infrastructure={"backend": "example-pool"},
        evaluation={"enabled": False}, budgets=BudgetConfig(),
        rollouts=[RolloutEntryState(rollout_id=f"r{i:05d}", task_id="t", provider="scripted", model="m",
                                    attempt_id=f"b.r{i:05d}.1", infrastructure_backend="example-pool")
                  for i in range(rollouts)])


def on_disk(path: Path) -> dict[str, dict[str, object]]:
    doc = json.loads(path.read_text())
    return {r["rollout_id"]: r for r in doc["rollouts"]}


def test_a_burst_of_changes_shares_a_few_writes_and_each_returns_durable(tmp_path: Path) -> None:
    path = tmp_path / "batch-state.json"
    store = BatchStateStore(path, make_state(1000))
    writes_before = store.writes
    seen_on_return: list[str] = []

    def finish(ids: list[str]) -> None:
        for rollout_id in ids:
            store.update_rollout(rollout_id, state="starting")
            store.update_rollout(rollout_id, state="running")  # deferred: no wait, no write of its own
            store.update_rollout(rollout_id, state="done", turns=5)
            seen_on_return.append(on_disk(path)[rollout_id]["state"])  # type: ignore[arg-type]

    ids = [f"r{i:05d}" for i in range(1000)]
    threads = [threading.Thread(target=finish, args=(ids[i::50],)) for i in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.close()
    assert seen_on_return == ["done"] * 1000
    # 2,000 durable changes from 50 threads: group commit, far fewer whole-file rewrites.
    assert store.writes - writes_before < 600, store.writes
    assert json.loads(path.read_text())["counts"]["done"] == 1000


def test_deferred_promotions_are_written_within_the_interval_not_per_change(tmp_path: Path) -> None:
    path = tmp_path / "batch-state.json"
    store = BatchStateStore(path, make_state(2000), deferred_s=0.3)
    writes_before = store.writes
    for i in range(2000):
        store.update_rollout(f"r{i:05d}", state="running")
    assert store.writes - writes_before <= 1
    time.sleep(0.8)
    assert store.writes - writes_before >= 1
    assert json.loads(path.read_text())["counts"]["running"] == 2000
    store.close()


WRITER = r"""
import sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
from tests.core.test_batch_state_store import make_state
from autocad_bench.controller.state import BatchStateStore

store = BatchStateStore(Path({path!r}), make_state({rollouts}))
print("ready", flush=True)
for step, (index, state) in enumerate({plan!r}):
    before, after = store.update_rollout(f"r{{index:05d}}", state=state)
    print(f"returned {{index}} {{state}} {{step}}", flush=True)
    time.sleep({pause})
time.sleep(60)
"""


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=st.lists(st.tuples(st.integers(0, 49), st.sampled_from(["starting", "running", "done", "failed"])),
                     min_size=1, max_size=60),
       kill_after=st.floats(0.05, 0.6), pause=st.sampled_from([0.0, 0.002]))
def test_after_kill_9_the_file_is_never_older_than_a_returned_durable_change(
        tmp_path_factory, plan: list[tuple[int, str]], kill_after: float, pause: float) -> None:  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("kill9")
    path = tmp / "batch-state.json"
    script = WRITER.format(tests=str(Path(__file__).resolve().parents[2]), path=str(path), rollouts=50,
                           plan=plan, pause=pause)
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    time.sleep(kill_after)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    returned = [line.split() for line in process.stdout.read().splitlines() if line.startswith("returned")]
    disk = on_disk(path)  # valid JSON at every instant: this parses whatever the kill left
    # Each rollout's newest returned durable change (any state but running) is on disk, or a later one.
    for position, (_, index, state, step) in enumerate(returned):
        if state == "running":
            continue
        rollout_id = f"r{int(index):05d}"
        if any(later[1] == index and later[2] != "running" for later in returned[position + 1:]):
            continue  # not this rollout's newest durable change
        allowed = {s for i, s in plan[int(step):] if i == int(index)}
        assert disk[rollout_id]["state"] in allowed, (rollout_id, state, step, disk[rollout_id]["state"])
    # And every rollout is in a known state.
    assert all(entry["state"] in RANK for entry in disk.values())
