"""Every outcome of the resume plan (issue 23): ``plan_resume`` on hand-written batch
directories with a recording fake backend (no controller, desktop or subprocess)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from autocad_bench.config.models import BudgetConfig
from autocad_bench.controller.resume import LOST_NOTE, RESTART_NOTE, ResumePlan, load_batch_state, plan_resume
from autocad_bench.controller.state import BatchState, RolloutEntryState
from autocad_bench.errors import ConfigError, UserError
from autocad_bench.harness.layout import BatchPaths
from autocad_bench.harness.records import RolloutResult
from autocad_bench.infrastructure.models import WorkerStatus
from autocad_bench.interrupt import Interruption

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class FakeBackend:
    """The recovery calls ``plan_resume`` makes, recorded."""

    def __init__(self, workers: dict[str, str] | None = None, statuses: dict[str, WorkerStatus] | None = None,
                 problems: list[Any] | None = None, from_logs: dict[str, str] | None = None) -> None:
        self.workers = workers or {}
        self.statuses = statuses or {}
        self.problems = problems or []
        self.from_logs = from_logs or {}
        self.calls: list[str] = []

    def require_recovery(self) -> None:
        self.calls.append("require_recovery")

    def call(self, name: str, **kwargs: Any) -> Any:
        self.calls.append(name)
        if name == "validate_recovery_spec":
            return self.problems
        if name == "create_recovery_session":
            return "session-1"
        if name == "list_active_workers":
            assert kwargs["session"] == "session-1" and kwargs["request"].batch_id == "b1"
            return dict(self.workers)
        if name == "worker_id_from_log":
            return self.from_logs.get(kwargs["log_text"])
        if name == "worker_status":
            assert kwargs["session"] == "session-1"
            return self.statuses[kwargs["worker_id"]]
        raise AssertionError(name)


class FakeHost:
    def __init__(self, backend: FakeBackend) -> None:
        self.backend = backend
        self.asked: list[str] = []

    def infrastructure(self, name: str) -> FakeBackend:
        self.asked.append(name)
        return self.backend


def write_state(batch: Path, ids: list[str], *, backend: str = "example-pool", evaluation: bool = False,
                interruption: Interruption | None = None) -> None:
    state = BatchState(
        batch_id="b1", name="n", config_path="/nonexistent.json", created_at=NOW, updated_at=NOW,
        execution_mode="shared", max_concurrency=1, admitted_wave=1, infrastructure_backend=backend,
        infrastructure={"backend": backend, "broker_version": "windows-autocad-2019-v11"},
        evaluation={"enabled": evaluation}, budgets=BudgetConfig(),
        interruption=interruption,
        rollouts=[RolloutEntryState(rollout_id=r, task_id="t", provider="scripted", model="m", attempt_id=f"b1.{r}.1",
                                    infrastructure_backend=backend, assignment_id=f"a-{r}", trial=2)
                  for r in ids])
    batch.mkdir(parents=True, exist_ok=True)
    BatchPaths(batch).state.write_text(state.model_dump_json())


def write_result(batch: Path, rollout_id: str, *, status: str = "completed", failure_class: str | None = None,
                 stop_reason: str | None = "done", detail: str = "") -> None:
    root = BatchPaths(batch).rollout(rollout_id).root
    root.mkdir(parents=True, exist_ok=True)
    result = RolloutResult.model_validate({
        "rollout_id": rollout_id, "attempt_id": f"b1.{rollout_id}.1", "task_id": "t", "provider": "scripted",
        "model": "m", "infrastructure_backend": "example-pool", "status": status, "failure_class": failure_class,
        "failure_detail": detail, "stop_reason": stop_reason, "turns": 1, "actions": 1, "invalid_turns": 0,
        "model_responses": 1, "usage": {}, "token_cost_usd": 0.0, "wall_seconds": 1.0, "drawing": None,
        "attempts": 1, "started_at": NOW.isoformat(), "finished_at": NOW.isoformat(), "exit_code": 0})
    BatchPaths(batch).rollout(rollout_id).result.write_text(result.model_dump_json())


def write_checkpoint(batch: Path, rollout_id: str) -> None:
    paths = BatchPaths(batch).rollout(rollout_id)
    paths.root.mkdir(parents=True, exist_ok=True)
    paths.checkpoint.write_text("{}")


def write_score(batch: Path, rollout_id: str) -> None:
    path = BatchPaths(batch).rollout(rollout_id).evaluation_score
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"score": 1.0, "passed": True}))


def plan(batch: Path, backend: FakeBackend | None = None) -> tuple[ResumePlan, FakeBackend]:
    backend = backend or FakeBackend()
    host = FakeHost(backend)
    result = plan_resume(batch, host)  # type: ignore[arg-type]
    assert host.asked == [load_batch_state(batch).infrastructure_backend]
    return result, backend


def only(p: ResumePlan) -> Any:
    (entry,) = p.entries
    return entry


def test_a_completed_rollout_is_complete(tmp_path: Path) -> None:
    write_state(tmp_path, ["r1"])
    write_result(tmp_path, "r1", stop_reason="model_done")
    p, backend = plan(tmp_path)
    e = only(p)
    assert (e.action, e.reason) == ("complete", "finished: model_done")
    assert (e.rollout_id, e.assignment_id, e.trial, e.infrastructure_backend) == ("r1", "a-r1", 2, "example-pool")
    assert e.infrastructure["backend"] == "example-pool" and e.worker_id is None
    assert p.runnable == {} and backend.calls == []
    assert (p.batch_id, p.batch_dir, p.infrastructure_backend) == ("b1", str(tmp_path), "example-pool")


def test_a_completed_rollout_without_stop_reason_reads_completed(tmp_path: Path) -> None:
    write_state(tmp_path, ["r1"])
    write_result(tmp_path, "r1", stop_reason=None)
    assert only(plan(tmp_path)[0]).reason == "finished: completed"


def test_a_failed_rollout_is_failed_never_complete_nor_rerun(tmp_path: Path) -> None:
    write_state(tmp_path, ["r1"])
    write_result(tmp_path, "r1", status="failed", failure_class="transport_exhausted")
    p, _ = plan(tmp_path)
    e = only(p)
    assert e.action == "failed"
    assert e.reason == "failed once (transport_exhausted); failures are never rerun in place"
    assert p.runnable == {}


def test_a_failed_rollout_is_failed_even_when_evaluation_is_enabled(tmp_path: Path) -> None:
    write_state(tmp_path, ["r1"], evaluation=True)
    write_result(tmp_path, "r1", status="failed", failure_class="model_contract_error")
    assert only(plan(tmp_path)[0]).action == "failed"


def test_a_finished_unscored_rollout_is_evaluated_again(tmp_path: Path) -> None:
    write_state(tmp_path, ["r1", "r2"], evaluation=True)
    write_result(tmp_path, "r1", stop_reason="model_done")
    write_result(tmp_path, "r2", stop_reason=None)
    write_score(tmp_path, "r2")
    p, _ = plan(tmp_path)
    first, second = p.entries
    assert first.action == "evaluate"
    assert first.reason == ("finished (model_done) but never scored: the controller stopped during its "
                            "evaluation; execute evaluates it again")
    assert (second.action, second.reason) == ("complete", "finished: completed")
    assert p.runnable == {}


def test_unscored_without_evaluation_is_complete(tmp_path: Path) -> None:
    write_state(tmp_path, ["r1"], evaluation=False)
    write_result(tmp_path, "r1")
    assert only(plan(tmp_path)[0]).action == "complete"


def test_an_unscored_run_without_stop_reason_names_completed(tmp_path: Path) -> None:
    write_state(tmp_path, ["r1"], evaluation=True)
    write_result(tmp_path, "r1", stop_reason=None)
    assert only(plan(tmp_path)[0]).reason.startswith("finished (completed) but never scored")


def test_an_operator_interrupted_rollout_restarts(tmp_path: Path) -> None:
    write_state(tmp_path, ["r1"], evaluation=True)
    write_result(tmp_path, "r1", status="failed", failure_class="interrupted", detail="SIGINT")
    p, _ = plan(tmp_path)
    e = only(p)
    assert (e.action, e.reason) == ("restart", "stopped by the operator before it finished (SIGINT)" + RESTART_NOTE)
    assert p.runnable == {"r1": None}


def test_a_never_launched_rollout_starts(tmp_path: Path) -> None:
    write_state(tmp_path, ["r1"])
    p, backend = plan(tmp_path)
    assert (only(p).action, only(p).reason) == ("start", "never launched; starts fresh")
    assert p.runnable == {"r1": None} and backend.calls == []


def test_a_launched_rollout_without_checkpoint_restarts(tmp_path: Path) -> None:
    write_state(tmp_path, ["r1"])
    BatchPaths(tmp_path).rollout("r1").root.mkdir(parents=True)
    p, backend = plan(tmp_path)
    assert (only(p).action, only(p).reason) == ("restart", "launched but never reached the model" + RESTART_NOTE)
    assert backend.calls == []


def test_an_unreadable_result_does_not_count_as_finished(tmp_path: Path) -> None:
    write_state(tmp_path, ["r1"])
    BatchPaths(tmp_path).rollout("r1").root.mkdir(parents=True)
    BatchPaths(tmp_path).rollout("r1").result.write_text("{not json")
    assert only(plan(tmp_path)[0]).action == "restart"


def _reconnectable(worker: str, ok: bool, state: str = "running", detail: str = "") -> WorkerStatus:
    return WorkerStatus(worker_id=worker, state=state, reconnectable=ok, detail=detail)  # type: ignore[arg-type]


def test_a_checkpointed_rollout_with_a_reconnectable_worker_resumes(tmp_path: Path) -> None:
    write_state(tmp_path, ["r1", "r2"])
    write_checkpoint(tmp_path, "r1")
    write_checkpoint(tmp_path, "r2")
    backend = FakeBackend(workers={"r1": "w1", "r2": "w2"},
                          statuses={"w1": _reconnectable("w1", True), "w2": _reconnectable("w2", True)})
    p, backend = plan(tmp_path, backend)
    assert [(e.action, e.worker_id, e.worker_state, e.reconnectable) for e in p.entries] == [
        ("resume", "w1", "running", True), ("resume", "w2", "running", True)]
    assert p.entries[0].reason == "continue from resume-checkpoint.json"
    assert p.runnable == {"r1": "w1", "r2": "w2"}
    # the recovery session is opened once for the whole batch
    assert backend.calls == ["require_recovery", "validate_recovery_spec", "create_recovery_session",
                             "list_active_workers", "worker_status", "worker_status"]
    assert p.entries[0].instance_id is None  # aliases only for the aws backend


def test_a_checkpointed_rollout_whose_worker_cannot_reconnect_is_lost(tmp_path: Path) -> None:
    write_state(tmp_path, ["r1", "r2"])
    write_checkpoint(tmp_path, "r1")
    write_checkpoint(tmp_path, "r2")
    backend = FakeBackend(workers={"r1": "w1", "r2": "w2"}, statuses={
        "w1": _reconnectable("w1", False, "stopped", "disk gone"), "w2": _reconnectable("w2", False, "terminated")})
    p, _ = plan(tmp_path, backend)
    first, second = p.entries
    assert (first.action, first.reason) == ("lost", "worker w1 cannot be reconnected: disk gone" + LOST_NOTE)
    assert (second.action, second.reason) == ("lost", "worker w2 cannot be reconnected: terminated" + LOST_NOTE)
    assert first.reconnectable is False and first.worker_id == "w1"
    assert p.runnable == {}


def test_a_checkpointed_rollout_without_worker_is_lost(tmp_path: Path) -> None:
    write_state(tmp_path, ["r1"])
    write_checkpoint(tmp_path, "r1")
    p, _ = plan(tmp_path, FakeBackend())
    assert (only(p).action, only(p).reason) == ("lost", "interrupted, but the backend has no worker for it" + LOST_NOTE)
    assert only(p).worker_id is None and p.runnable == {}


def test_a_worker_named_only_in_a_legacy_log_is_found(tmp_path: Path) -> None:
    write_state(tmp_path, ["r1", "r2"])
    write_checkpoint(tmp_path, "r1")
    write_checkpoint(tmp_path, "r2")
    logs = BatchPaths(tmp_path).logs
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "r1.log").write_text("worker is w9")
    (logs / "r2.log").write_text("ignored: the index knows r2")
    backend = FakeBackend(workers={"r2": "w2"}, from_logs={"worker is w9": "w9", "ignored: the index knows r2": "wX"},
                          statuses={"w9": _reconnectable("w9", True), "w2": _reconnectable("w2", True)})
    p, backend = plan(tmp_path, backend)
    assert p.runnable == {"r1": "w9", "r2": "w2"}
    assert backend.calls.count("worker_id_from_log") == 1


def test_caught_in_flight_by_a_stop_signal_restarts(tmp_path: Path) -> None:
    stop = Interruption(signal="SIGTERM", exit_code=143, at=NOW)
    write_state(tmp_path, ["r1", "r2", "r3"], interruption=stop)
    for r in ("r1", "r2", "r3"):
        write_checkpoint(tmp_path, r)
    backend = FakeBackend(workers={"r2": "w2", "r3": "w3"}, statuses={
        "w2": _reconnectable("w2", False, "stopped", "gone"), "w3": _reconnectable("w3", True)})
    p, _ = plan(tmp_path, backend)
    first, second, third = p.entries
    assert (first.action, first.reason) == ("restart", "caught in flight by the SIGTERM that stopped the batch "
                                            "(its desktop was torn down)" + RESTART_NOTE)
    assert (second.action, second.reason) == ("restart", "caught in flight by the SIGTERM that stopped the batch; "
                                              "worker w2 cannot be reconnected (gone)" + RESTART_NOTE)
    assert second.worker_state == "stopped" and second.reconnectable is False and second.worker_id is None
    assert third.action == "resume" and third.worker_id == "w3"
    assert p.runnable == {"r1": None, "r2": None, "r3": "w3"}


def test_restart_after_a_stop_names_the_state_when_no_detail(tmp_path: Path) -> None:
    stop = Interruption(signal="SIGINT", exit_code=130, at=NOW)
    write_state(tmp_path, ["r1"], interruption=stop)
    write_checkpoint(tmp_path, "r1")
    backend = FakeBackend(workers={"r1": "w1"}, statuses={"w1": _reconnectable("w1", False, "terminated")})
    assert only(plan(tmp_path, backend)[0]).reason.endswith("cannot be reconnected (terminated)" + RESTART_NOTE)


def test_aws_entries_carry_instance_aliases(tmp_path: Path) -> None:
    write_state(tmp_path, ["r1", "r2"], backend="aws")
    write_checkpoint(tmp_path, "r1")
    write_checkpoint(tmp_path, "r2")
    backend = FakeBackend(workers={"r1": "i-1", "r2": "i-2"}, statuses={
        "i-1": _reconnectable("i-1", True), "i-2": _reconnectable("i-2", False, "terminated")})
    p, _ = plan(tmp_path, backend)
    first, second = p.entries
    assert (first.instance_id, first.instance_state, first.instance_termination_requested) == ("i-1", "running", False)
    assert (second.instance_id, second.instance_state, second.instance_termination_requested) == (
        "i-2", "terminated", True)


def test_recovery_spec_problems_stop_the_plan(tmp_path: Path) -> None:
    from autocad_bench.errors import Problem

    write_state(tmp_path, ["r1"])
    write_checkpoint(tmp_path, "r1")
    with pytest.raises(ConfigError):
        plan(tmp_path, FakeBackend(problems=[Problem("batch-state.json: $.infrastructure", "bad")]))


def test_a_missing_or_broken_state_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not found: is this a batch output directory"):
        load_batch_state(tmp_path)
    BatchPaths(tmp_path).state.write_text("{}")
    with pytest.raises(UserError, match="unreadable batch state"):
        load_batch_state(tmp_path)


def test_every_outcome_in_one_batch_keeps_the_state_order(tmp_path: Path) -> None:
    write_state(tmp_path, ["done", "bad", "new", "cp"], evaluation=False)
    write_result(tmp_path, "done")
    write_result(tmp_path, "bad", status="failed", failure_class="action_rejected")
    write_checkpoint(tmp_path, "cp")
    backend = FakeBackend(workers={"cp": "w"}, statuses={"w": _reconnectable("w", True)})
    p, _ = plan(tmp_path, backend)
    assert [(e.rollout_id, e.action) for e in p.entries] == [
        ("done", "complete"), ("bad", "failed"), ("new", "start"), ("cp", "resume")]
    assert p.runnable == {"new": None, "cp": "w"}


def test_an_interrupted_rollout_does_not_end_the_plan(tmp_path: Path) -> None:
    write_state(tmp_path, ["r1", "r2"])
    write_result(tmp_path, "r1", status="failed", failure_class="interrupted", detail="SIGTERM")
    p, _ = plan(tmp_path)
    assert [(e.rollout_id, e.action) for e in p.entries] == [("r1", "restart"), ("r2", "start")]


def test_instance_aliases_are_for_aws_only(tmp_path: Path) -> None:
    write_state(tmp_path, ["r1"], backend="a-pool")  # sorts before "aws"
    write_checkpoint(tmp_path, "r1")
    p, _ = plan(tmp_path, FakeBackend(workers={"r1": "w1"}, statuses={"w1": _reconnectable("w1", True)}))
    assert only(p).instance_id is None and only(p).instance_state is None
    assert only(p).instance_termination_requested is None


def test_only_a_terminated_aws_instance_reads_as_termination_requested(tmp_path: Path) -> None:
    write_state(tmp_path, ["r1"], backend="aws")
    write_checkpoint(tmp_path, "r1")
    backend = FakeBackend(workers={"r1": "i-1"}, statuses={"i-1": _reconnectable("i-1", False, "unknown")})
    e = only(plan(tmp_path, backend)[0])
    assert (e.action, e.instance_state, e.instance_termination_requested) == ("lost", "unknown", False)


def test_legacy_logs_after_a_known_rollout_are_still_read(tmp_path: Path) -> None:
    write_state(tmp_path, ["a", "b"])
    write_checkpoint(tmp_path, "a")
    write_checkpoint(tmp_path, "b")
    logs = BatchPaths(tmp_path).logs
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "a.log").write_text("known")
    (logs / "b.log").write_text("worker wb")
    backend = FakeBackend(workers={"a": "wa"}, from_logs={"worker wb": "wb"},
                          statuses={"wa": _reconnectable("wa", True), "wb": _reconnectable("wb", True)})
    assert plan(tmp_path, backend)[0].runnable == {"a": "wa", "b": "wb"}


def test_evaluation_counts_as_disabled_unless_the_state_enables_it(tmp_path: Path) -> None:
    write_state(tmp_path, ["r1"])
    state = json.loads(BatchPaths(tmp_path).state.read_text())
    state["evaluation"] = {}
    BatchPaths(tmp_path).state.write_text(json.dumps(state))
    write_result(tmp_path, "r1")
    assert only(plan(tmp_path)[0]).action == "complete"


def test_a_launched_rollout_does_not_end_the_plan(tmp_path: Path) -> None:
    write_state(tmp_path, ["r1", "r2"])
    BatchPaths(tmp_path).rollout("r1").root.mkdir(parents=True)
    p, _ = plan(tmp_path)
    assert [(e.rollout_id, e.action) for e in p.entries] == [("r1", "restart"), ("r2", "start")]


def test_a_lost_rollout_does_not_end_the_plan(tmp_path: Path) -> None:
    write_state(tmp_path, ["r1", "r2"])
    write_checkpoint(tmp_path, "r1")
    p, _ = plan(tmp_path, FakeBackend())
    assert [(e.rollout_id, e.action) for e in p.entries] == [("r1", "lost"), ("r2", "start")]


def _record_earlier(batch: Path, rollout_id: str, attempt: int, *, current: int) -> None:
    """Record attempt ``attempt`` of ``rollout_id`` as an earlier attempt, as a restart does
    before it moves the attempt's files; the rollout's current attempt becomes ``current``."""
    path = BatchPaths(batch).state
    data = json.loads(path.read_text())
    for entry in data["rollouts"]:
        if entry["rollout_id"] == rollout_id:
            entry["attempt_id"] = f"b1.{rollout_id}.{current}"
            entry["state"] = "queued"
            entry["earlier_attempts"] = [{
                "attempt_id": f"b1.{rollout_id}.{attempt}", "failure_class": "infrastructure_lost", "turns": 0,
                "actions": 0, "token_cost_usd": 0.5, "infrastructure_seconds": 3.0, "infrastructure_cost_usd": 0.25,
                "finished_at": NOW.isoformat(), "archived_to": f"interrupted/{rollout_id}/attempt-{attempt}"}]
    path.write_text(json.dumps(data))


# A rollout id long enough that its attempt ids pass 64 characters: such strings are not shared
# objects of pydantic's string cache, so an identity test in place of equality shows there.
LONG = "r1-whose-rollout-id-is-long-enough-to-make-each-of-its-attempt-ids-unique"


@pytest.mark.parametrize(("status", "failure_class", "evaluation"), [
    ("failed", "infrastructure_lost", False),  # closed by a resume that died before the move
    ("failed", "interrupted", True),
    ("completed", None, True),  # unscored: not evaluated again, it is on record already
    ("completed", None, False),
])
@pytest.mark.parametrize("rollout_id", ["r1", LONG])
def test_a_result_already_recorded_as_an_earlier_attempt_only_finishes_its_restart(
        tmp_path: Path, status: str, failure_class: str | None, evaluation: bool, rollout_id: str) -> None:
    # A second rollout after it, never launched: the plan goes on past the first.
    write_state(tmp_path, [rollout_id, "r2"], evaluation=evaluation)
    write_result(tmp_path, rollout_id, status=status, failure_class=failure_class)
    _record_earlier(tmp_path, rollout_id, 1, current=2)
    p, backend = plan(tmp_path)
    assert [(e.rollout_id, e.action, e.reason) for e in p.entries] == [
        (rollout_id, "restart", f"attempt b1.{rollout_id}.1 is already recorded as an earlier attempt, but its files "
                                f"were never moved to interrupted/{rollout_id}/attempt-1" + RESTART_NOTE),
        ("r2", "start", "never launched; starts fresh")]
    assert p.runnable == {rollout_id: None, "r2": None} and backend.calls == []


@pytest.mark.parametrize("earlier", [1, 7])
def test_an_earlier_attempt_of_another_id_leaves_the_current_result_its_own(tmp_path: Path, earlier: int) -> None:
    write_state(tmp_path, ["r1"])
    write_result(tmp_path, "r1", status="failed", failure_class="infrastructure_lost")
    # The result is attempt 2's; attempt 1 (whose id sorts before it) or 7 (after it) is on record
    # as an earlier one: the result is the rollout's own, failed, and failures are never rerun in place.
    result = BatchPaths(tmp_path).rollout("r1").result
    result.write_text(json.dumps({**json.loads(result.read_text()), "attempt_id": "b1.r1.2"}))
    _record_earlier(tmp_path, "r1", earlier, current=2)
    assert only(plan(tmp_path)[0]).action == "failed"
