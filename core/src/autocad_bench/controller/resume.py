"""Planning and running the continuation of an interrupted batch (``autocad-bench-resume``).

The plan is read-only: for every assignment it decides from the rollout directory whether
it is complete, failed (recorded once, never silently rerun), finished but never scored
(``evaluate``: the controller died while it ran the evaluation; execute runs it again),
resumable from its checkpoint (the backend must find a reconnectable worker), or never
started. Executing the
plan reconnects resumable rollouts through the backend's recovery protocol and starts the
ones that never started, in the same output directory; the pilot continues each rollout
from ``resume-checkpoint.json`` without repeating a desktop action, and usage and cost
accumulate across attempts.

Every trial of a repeated assignment is an ordinary rollout in the batch state, planned and
continued on its own. The configuration is reloaded and restricted to exactly the rollouts
the state holds (a rerun batch holds only the trials it reran), and every one of them must
still be planned by it: same ids, same trial numbers.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from autocad_bench.admission import AdmissionOptions, admit
from autocad_bench.config import LoadedConfig, effective_budgets, load_config
from autocad_bench.controller.batch import BatchRunner, resume_hint, run_interruptibly
from autocad_bench.controller.closing import close_from_checkpoint, crash_seconds
from autocad_bench.controller.ownership import hold_batch
from autocad_bench.controller.state import BatchState, BatchStateStore, EarlierAttempt
from autocad_bench.controller.summary import build_summary, print_summary, read_scores, write_summary
from autocad_bench.costs import hourly_rate, infrastructure_cost
from autocad_bench.costs.pricing import PricingContract
from autocad_bench.errors import ConfigError, Problem, UserError
from autocad_bench.evaluation import evaluate_rollout
from autocad_bench.harness.layout import BatchPaths, RolloutPaths
from autocad_bench.harness.records import FailureClass, RolloutResult
from autocad_bench.harness.trace import utcnow
from autocad_bench.infrastructure.models import ActiveWorkersRequest, InfrastructureSpec
from autocad_bench.interrupt import say
from autocad_bench.models import JsonObject, StrictModel
from autocad_bench.plugins import PluginHandle, PluginHost

ResumeAction = Literal["complete", "evaluate", "failed", "resume", "start", "restart", "lost"]
CLOSED_TO_RESTART = "closed to restart: "
"""How the ``failure_detail`` of an attempt that resume closed on its way to a restart begins."""
LOST_NOTE = ("; execute closes it as failed (infrastructure_lost) with the spend its checkpoint recorded, "
             "and --rerun-failed-from RUN --failure-class infrastructure_lost runs it again")
TERMINAL_STATES = ("done", "failed")
RESTART_NOTE = ("; execute keeps its spend, moves its files to interrupted/ and runs it again from the start "
                "on a fresh desktop as the rollout's next attempt")


class ResumePlanEntry(StrictModel):
    """What resume will do with one rollout (``action``) and why (``reason``), with the worker
    the backend found for it (``None`` when there is none to reconnect).
    """

    rollout_id: str
    assignment_id: str | None = None
    trial: int
    action: ResumeAction
    reason: str
    infrastructure_backend: str
    infrastructure: JsonObject
    worker_id: str | None = None
    worker_state: str | None = None
    reconnectable: bool | None = None
    # Compatibility aliases kept for AWS controller tooling (set only for the aws backend).
    instance_id: str | None = None
    instance_state: str | None = None
    instance_termination_requested: bool | None = None


class ResumePlan(StrictModel):
    """The read-only plan for one interrupted batch: one entry per rollout in its state,
    printed as JSON by ``autocad-bench-resume`` and run by :func:`execute_resume`.
    """

    batch_dir: str
    batch_id: str
    infrastructure_backend: str
    entries: list[ResumePlanEntry]

    @property
    def runnable(self) -> dict[str, str | None]:
        """Rollout id to worker id (``None`` = fresh sandbox) for everything execute will run."""
        return {e.rollout_id: e.worker_id for e in self.entries if e.action in ("resume", "start", "restart")}


def load_batch_state(batch_dir: Path) -> BatchState:
    """Read ``batch-state.json`` of ``batch_dir``; a :class:`UserError` when it is missing or
    does not validate.
    """
    path = BatchPaths(batch_dir).state
    try:
        return BatchState.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise UserError([Problem(str(path), "not found: is this a batch output directory?")]) from None
    except ValueError as error:
        raise UserError([Problem(str(path), f"unreadable batch state: {error}")]) from None


def plan_resume(batch_dir: Path, host: PluginHost) -> ResumePlan:
    """Decide what to continue; read-only (backend queries included)."""
    state = load_batch_state(batch_dir)
    spec = InfrastructureSpec.model_validate(state.infrastructure)
    backend = host.infrastructure(state.infrastructure_backend)
    entries: list[ResumePlanEntry] = []
    evaluation_enabled = bool(state.evaluation.get("enabled", False))
    workers: dict[str, str] | None = None
    session = None
    for rollout in state.rollouts:
        paths = BatchPaths(batch_dir).rollout(rollout.rollout_id)
        base = {"rollout_id": rollout.rollout_id, "assignment_id": rollout.assignment_id or rollout.rollout_id,
                "trial": rollout.trial, "infrastructure_backend": rollout.infrastructure_backend,
                "infrastructure": state.infrastructure}
        result = _result(paths)
        archived = next((a for a in rollout.earlier_attempts if result is not None
                         and a.attempt_id == result.attempt_id), None)
        if archived is not None:
            # A resume recorded this attempt as an earlier one and died before it moved its files:
            # its spend is on record already, so only the move is left, then the next attempt.
            # Read as this rollout's own outcome it would be counted twice.
            entries.append(ResumePlanEntry(**base, action="restart", reason=(
                f"attempt {archived.attempt_id} is already recorded as an earlier attempt, but its files were "
                f"never moved to {archived.archived_to}" + RESTART_NOTE)))
            continue
        if result is not None and result.status == "completed" and evaluation_enabled \
                and read_scores(paths.root)[0] is None:
            entries.append(ResumePlanEntry(**base, action="evaluate", reason=(
                f"finished ({result.stop_reason or 'completed'}) but never scored: the controller stopped "
                "during its evaluation; execute evaluates it again")))
            continue
        if result is not None and result.failure_class == FailureClass.INTERRUPTED:
            entries.append(ResumePlanEntry(**base, action="restart", reason=(
                f"stopped by the operator before it finished ({result.failure_detail})" + RESTART_NOTE)))
            continue
        if result is not None and result.failure_class == FailureClass.INFRASTRUCTURE_LOST \
                and result.failure_detail.startswith(CLOSED_TO_RESTART):
            # An earlier resume closed this attempt on its way to restarting it and died before
            # it recorded the restart: the restart is still owed, the closed attempt's spend
            # goes on record once (as an earlier attempt) when it runs.
            entries.append(ResumePlanEntry(**base, action="restart", reason=(
                "closed by an earlier resume that died before it could restart it" + RESTART_NOTE)))
            continue
        if result is not None:
            action: ResumeAction = "complete" if result.status == "completed" else "failed"
            reason = (f"finished: {result.stop_reason or 'completed'}" if action == "complete"
                      else f"failed once ({result.failure_class}); failures are never rerun in place")
            entries.append(ResumePlanEntry(**base, action=action, reason=reason))
            continue
        if not paths.checkpoint.exists() and paths.root.exists():
            # Launched: its handoff may already have bound this attempt id to a session on a
            # desktop (a broker names one session per attempt for good), so it runs as a new attempt.
            entries.append(ResumePlanEntry(**base, action="restart", reason=(
                "launched but never reached the model" + RESTART_NOTE)))
            continue
        if not paths.checkpoint.exists():
            entries.append(ResumePlanEntry(**base, action="start", reason="never launched; starts fresh"))
            continue
        if workers is None:
            backend.require_recovery()
            problems = backend.call("validate_recovery_spec", spec=spec, location="batch-state.json: $.infrastructure")
            if problems:
                raise ConfigError(problems)
            session = backend.call("create_recovery_session", spec=spec)
            workers = backend.call("list_active_workers", session=session, request=ActiveWorkersRequest(
                batch_id=state.batch_id, spec=spec, output_dir=batch_dir)) or {}
            for rid, text in _legacy_logs(batch_dir, workers, backend):
                workers[rid] = text
        worker_id = workers.get(rollout.rollout_id)
        if worker_id is None and state.interruption is not None:
            entries.append(ResumePlanEntry(**base, action="restart", reason=(
                f"caught in flight by the {state.interruption.signal} that stopped the batch (its desktop was "
                "torn down)" + RESTART_NOTE)))
            continue
        if worker_id is None:
            entries.append(ResumePlanEntry(**base, action="lost",
                                           reason="interrupted, but the backend has no worker for it" + LOST_NOTE))
            continue
        status = backend.call("worker_status", session=session, worker_id=worker_id)
        if not status.reconnectable and state.interruption is not None:
            entries.append(ResumePlanEntry(**base, action="restart", reason=(
                f"caught in flight by the {state.interruption.signal} that stopped the batch; worker {worker_id} "
                f"cannot be reconnected ({status.detail or status.state})" + RESTART_NOTE),
                worker_state=status.state, reconnectable=False))
            continue
        entries.append(ResumePlanEntry(
            **base, action="resume" if status.reconnectable else "lost",
            reason="continue from resume-checkpoint.json" if status.reconnectable
            else f"worker {worker_id} cannot be reconnected: {status.detail or status.state}" + LOST_NOTE,
            worker_id=worker_id, worker_state=status.state, reconnectable=status.reconnectable,
            **_aws_aliases(rollout.infrastructure_backend, worker_id, status.state)))
    return ResumePlan(batch_dir=str(batch_dir), batch_id=state.batch_id,
                      infrastructure_backend=state.infrastructure_backend, entries=entries)


def execute_resume(plan: ResumePlan, host: PluginHost, environ: Mapping[str, str]) -> int:
    """Run the plan in the same output directory; 0 when every rollout ends completed.

    Raises :class:`UserError` before anything changes when another controller still runs
    the batch (see :mod:`.ownership`) or resume admission refuses it.
    """
    batch_dir = Path(plan.batch_dir)
    with hold_batch(batch_dir):
        return _execute_held(plan, host, environ, batch_dir)


def _execute_held(plan: ResumePlan, host: PluginHost, environ: Mapping[str, str], batch_dir: Path) -> int:
    state = load_batch_state(batch_dir)
    loaded = _planned_as_recorded(load_config(state.config_path), state)
    budgets = state.budgets
    budgets = effective_budgets(budgets, environ={})
    admission = admit(loaded, host, environ, budgets,
                      AdmissionOptions(allow_partial=True, mode="execute", batch_id=state.batch_id))
    if not admission.report.passed:
        failed = [f"{c.name}: {c.reason}" for c in admission.report.checks if not c.passed]
        raise UserError([Problem("resume admission", line) for line in failed])
    runner = BatchRunner(loaded, admission, budgets, batch_dir, host=host, environ=environ, batch_id=state.batch_id)
    # The interruption stays on record until every entry has been closed, restarted or
    # queued: a resume that dies before then is planned again from the same facts (a rollout
    # the signal caught in flight restarts; with the interruption gone it would read as lost).
    runner.store = BatchStateStore(BatchPaths(batch_dir).state, state.model_copy(
        update={"status": "running", "finished_at": None}))

    def continue_plan() -> int:
        # Under the stop signals from here on: a Ctrl-C while entries are being closed or
        # restarted stops cleanly too (each step below is safe to repeat).
        for entry in plan.entries:
            if entry.action in ("resume", "start"):
                runner.store.update_rollout(entry.rollout_id, state="queued", worker_id=entry.worker_id)
            elif entry.action == "lost":
                _close_lost(runner, batch_dir, entry, state)
            elif entry.action == "restart":
                _restart(runner, batch_dir, entry, state)
            elif entry.action == "evaluate":
                _evaluate_finished(runner, batch_dir, entry.rollout_id, environ)
            elif entry.action == "complete" and runner.store.entry(entry.rollout_id).state != "done":
                # It completed, whatever the state says: a pilot that outlived the stop or
                # crash that closed it finished and wrote its own result afterwards.
                _record_finished(runner, batch_dir, entry.rollout_id)
            elif runner.store.entry(entry.rollout_id).state not in TERMINAL_STATES:
                # The rollout finished after its controller died (a subprocess child outlives
                # it): record what it wrote, score and spend included, exactly as _record_end would.
                _record_finished(runner, batch_dir, entry.rollout_id)
        _terminate_finished_workers(runner.backend, plan, state, batch_dir)
        runner.store.update(interruption=None)
        return runner.execute(plan.runnable)

    code = run_interruptibly(runner, continue_plan)
    summary = build_summary(batch_dir, runner.store.state)
    write_summary(batch_dir, summary)
    print_summary(summary)
    if runner.stop.is_set():
        say(resume_hint(batch_dir))
        return code
    return 0 if all(r.state == "done" for r in runner.store.state.rollouts) else 1


def _terminate_finished_workers(backend: PluginHandle, plan: ResumePlan, state: BatchState, batch_dir: Path) -> None:
    """Release every worker still held for a rollout that will not run on it again.

    A controller that died took with it the release of desktops whose rollouts had ended
    (completed, failed, lost) or that will restart on a fresh desktop; the backend still
    lists them as active. They are released through ``terminate_worker`` before anything
    starts, so they cost nothing more and their capacity is free for the rollouts that do
    run. Backends without the recovery protocol have nothing to list. Safe to repeat.
    """
    if not backend.supports_recovery:
        return
    spec = InfrastructureSpec.model_validate(state.infrastructure)
    session = backend.call("create_recovery_session", spec=spec)
    workers: dict[str, str] = backend.call("list_active_workers", session=session, request=ActiveWorkersRequest(
        batch_id=state.batch_id, spec=spec, output_dir=batch_dir)) or {}
    for entry in plan.entries:
        worker_id = workers.get(entry.rollout_id)
        if worker_id is None or (entry.action == "resume" and entry.worker_id == worker_id):
            continue
        gone = backend.call("terminate_worker", session=session, worker_id=worker_id)
        with open(BatchPaths(batch_dir).log(entry.rollout_id), "a", encoding="utf-8") as log:
            log.write(f"{utcnow().isoformat()} resume: released worker {worker_id} of this {entry.action} rollout"
                      f"{'' if gone else ' (the backend could not confirm it is gone)'}\n")


def _planned_as_recorded(loaded: LoadedConfig, state: BatchState) -> LoadedConfig:
    """The configuration restricted to the rollouts ``state`` holds, checked to agree with it.

    A configuration whose ``trials`` changed since the batch started plans other rollout
    ids or trial numbers; continuing under it would mix two experiments, so it is refused.
    The price table the batch recorded is pinned, so the resume prices as the batch did.
    """
    if state.conditions is not None and state.conditions.trials != loaded.config.trials:
        raise ConfigError([Problem(loaded.at("$.trials"), f"is {loaded.config.trials} but batch "
                                   f"{state.batch_id} started with trials = {state.conditions.trials}")])
    # Trial ids encode (assignment, trial) uniquely, so the same trials and the same ids
    # mean the same trials.
    selected = loaded.select((r.rollout_id for r in state.rollouts), source=f"batch {state.batch_id}")
    if state.pricing is None:
        return selected
    # The rest of the batch is priced with the table it started with, not with whatever
    # AUTOCAD_BENCH_PRICING_JSON says in the resuming shell: one batch, one price list.
    pinned = PricingContract.model_validate(state.pricing)
    return dataclasses.replace(selected, config=selected.config.model_copy(update={"pricing": pinned}))


def _aws_aliases(backend: str, worker_id: str, state: str) -> dict[str, object]:
    if backend != "aws":
        return {}
    return {"instance_id": worker_id, "instance_state": state, "instance_termination_requested": state == "terminated"}


def _result(paths: RolloutPaths) -> RolloutResult | None:
    try:
        return RolloutResult.model_validate_json(paths.result.read_bytes())
    except (FileNotFoundError, ValueError):
        return None


def _legacy_logs(batch_dir: Path, known: dict[str, str], backend: PluginHandle) -> list[tuple[str, str]]:
    """Worker ids from rollout logs of runs that predate durable worker indexing."""
    found = []
    for log in sorted(BatchPaths(batch_dir).logs.glob("*.log")):
        rollout_id = log.stem
        if rollout_id in known:
            continue
        worker = backend.call("worker_id_from_log", log_text=log.read_text(errors="replace"))
        if worker:
            found.append((rollout_id, worker))
    return found


def _close_lost(runner: BatchRunner, batch_dir: Path, entry: ResumePlanEntry, state: BatchState) -> None:
    """Give a rollout whose desktop died with the controller its end (see :mod:`.closing`).

    An operator's stop that caught the rollout in flight is named as such; otherwise the
    controller died under it.
    """
    if state.interruption is not None:
        close_from_checkpoint(runner, entry.rollout_id, FailureClass.INTERRUPTED,
                              f"caught in flight by the {state.interruption.signal} that stopped the batch; "
                              "closed with the spend its checkpoint recorded")
    else:
        close_from_checkpoint(runner, entry.rollout_id, FailureClass.INFRASTRUCTURE_LOST, entry.reason)


def _restart(runner: BatchRunner, batch_dir: Path, entry: ResumePlanEntry, state: BatchState) -> None:
    """Archive an interrupted attempt (its spend stays on record) and queue the next one.

    Safe to repeat after a crash at any point: the attempt is recorded once (by its attempt
    id) before its files move, and a move already made is not made again.
    """
    paths = BatchPaths(batch_dir).rollout(entry.rollout_id)
    if _result(paths) is None and paths.root.exists():
        # Caught in flight: give the attempt its end first. Without a stop on record the end
        # says it was closed to restart, so that a resume dying before the restart is
        # recorded still plans the restart (a plain infrastructure_lost is never rerun).
        if state.interruption is not None:
            _close_lost(runner, batch_dir, entry, state)
        else:
            close_from_checkpoint(runner, entry.rollout_id, FailureClass.INFRASTRUCTURE_LOST,
                                  CLOSED_TO_RESTART + entry.reason)
    result = _result(paths)
    rollout = runner.store.entry(entry.rollout_id)
    if result is not None and not any(a.attempt_id == result.attempt_id for a in rollout.earlier_attempts):
        number = len(rollout.earlier_attempts) + 1
        archive = Path("interrupted") / entry.rollout_id / f"attempt-{number}"
        seconds = rollout.infrastructure_seconds if rollout.infrastructure_seconds is not None \
            else result.infrastructure_seconds
        # What the batch recorded wins over the result (the controller adds the sandbox's time
        # and price after the pilot wrote it); time nobody priced is priced here, never dropped.
        cost = rollout.infrastructure_cost_usd if rollout.infrastructure_cost_usd is not None \
            else result.infrastructure_cost_usd
        if cost is None:
            rate = hourly_rate(runner.hourly_key(), runner.prices)
            cost = float(infrastructure_cost(seconds or 0.0, rate.hourly_usd))
        earlier = EarlierAttempt(
            attempt_id=result.attempt_id, failure_class=result.failure_class.value if result.failure_class else None,
            turns=result.turns, actions=result.actions,
            token_cost_usd=rollout.token_cost_usd if rollout.token_cost_usd is not None else result.token_cost_usd,
            infrastructure_seconds=seconds, infrastructure_cost_usd=cost,
            finished_at=result.finished_at, archived_to=str(archive))
        runner.store.update_rollout(
            entry.rollout_id, state="queued", attempt_id=f"{state.batch_id}.{entry.rollout_id}.{number + 1}",
            earlier_attempts=[*rollout.earlier_attempts, earlier], worker_id=None, started_at=None,
            finished_at=None, exit_code=None, failure_class=None, stop_reason=None, turns=None, actions=None,
            token_cost_usd=None, infrastructure_seconds=None, infrastructure_cost_usd=None, score=None,
            passed=None)
    recorded = runner.store.entry(entry.rollout_id).earlier_attempts
    if recorded and paths.root.exists():
        target = batch_dir / recorded[-1].archived_to
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            os.replace(paths.root, target)


def _evaluate_finished(runner: BatchRunner, batch_dir: Path, rollout_id: str, environ: Mapping[str, str]) -> None:
    """Score a rollout that finished but whose evaluation never completed, then record it."""
    paths = BatchPaths(batch_dir).rollout(rollout_id)
    log_path = BatchPaths(batch_dir).log(rollout_id)
    planned = next((p for p in runner.enabled if p.rollout_id == rollout_id), None)
    if planned is not None:
        runner.store.update_rollout(rollout_id, state="evaluating")
        request = runner._prepare(planned, paths, log_path)
        code = evaluate_rollout(request, environ)
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"{utcnow().isoformat()} resume: evaluation of the finished rollout exited with code {code}\n")
    _record_finished(runner, batch_dir, rollout_id)


def _record_finished(runner: BatchRunner, batch_dir: Path, rollout_id: str) -> None:
    paths = BatchPaths(batch_dir).rollout(rollout_id)
    result = _result(paths)
    if result is None:
        return
    rollout = runner.store.entry(rollout_id)
    seconds = result.infrastructure_seconds
    if seconds is None:
        seconds = crash_seconds(paths, rollout.started_at) or result.wall_seconds
    rate = hourly_rate(runner.hourly_key(), runner.prices)
    infra_cost = result.infrastructure_cost_usd
    if infra_cost is None:
        infra_cost = float(infrastructure_cost(seconds, rate.hourly_usd))
    score, passed, _ = read_scores(paths.root)
    done = result.status == "completed" and (score is not None or not runner.config.evaluation.enabled)
    runner.store.update_rollout(
        rollout_id, state="done" if done else "failed", finished_at=result.finished_at, exit_code=result.exit_code,
        failure_class=result.failure_class.value if result.failure_class else (None if done else "cleanup_error"),
        stop_reason=result.stop_reason, turns=result.turns, actions=result.actions,
        token_cost_usd=result.token_cost_usd, infrastructure_seconds=round(seconds, 3),
        infrastructure_cost_usd=infra_cost, score=score, passed=passed)
