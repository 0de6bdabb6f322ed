"""Execute mode: create the output tree, schedule sandboxes, keep batch state, reconcile.

At most ``admitted_wave`` sandboxes run at once (worker threads); the rest wait in a
visible queue (``queued`` in batch-state.json). Each sandbox is the backend's lifecycle
around the neutral child command: ``run_shared`` on the worker thread in shared mode, the
command from ``build_rollout_command`` as a subprocess in subprocess mode. Both produce
the same rollout directories. Independent rollouts never wait for one another; one
``reap_batch`` pass runs at batch exit, whatever happened.

The controller runs planned rollouts (:func:`autocad_bench.config.trials.expand_trials`):
every enabled assignment ``trials`` times, each trial an ordinary rollout with its own
directory, attempt id, desktop, trace and score.

Stopping (:mod:`autocad_bench.interrupt`): after the first SIGINT/SIGTERM no queued rollout
starts (it stays ``queued``, so resume starts it), running pilots stop at their next turn
boundary as ``interrupted``, and every sandbox ends through its own lifecycle; the batch
state records the interruption. The second signal kills every child and reaps the batch at
once (:meth:`BatchRunner.abort`).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from autocad_bench.admission import Admission
from autocad_bench.config.loading import LoadedConfig
from autocad_bench.config.models import BudgetConfig
from autocad_bench.config.trials import PlannedRollout
from autocad_bench.controller.children import InProcessChild, child_command, run_subprocess
from autocad_bench.controller.loops import SharedLoops, pilot_loop_count
from autocad_bench.controller.ownership import hold_batch
from autocad_bench.controller.resources import (
    FILES_FOR_THE_CONTROLLER,
    FILES_PER_SHARED_ROLLOUT,
    raise_open_file_limit,
)
from autocad_bench.controller.state import BatchState, BatchStateStore, RolloutEntryState
from autocad_bench.controller.summary import (
    build_summary,
    compact_models,
    print_summary,
    read_scores,
    write_summary,
)
from autocad_bench.controller.turns import TurnFeed
from autocad_bench.costs import PricingContract, hourly_rate, infrastructure_cost, load_pricing
from autocad_bench.costs.concurrency import ActiveRolloutRegistry
from autocad_bench.costs.pricing import with_declared_prices
from autocad_bench.events import BatchEvent, RolloutState, RolloutStateEvent
from autocad_bench.harness.assignment import PilotAssignment
from autocad_bench.harness.layout import BatchPaths, RolloutPaths
from autocad_bench.harness.records import FailureClass, RolloutResult, RunState
from autocad_bench.harness.trace import utcnow
from autocad_bench.infrastructure.models import (
    EvaluationArguments,
    ReapRequest,
    RecoveryLaunchRequest,
    RolloutLaunchRequest,
    TracePublisherRequest,
)
from autocad_bench.infrastructure.publisher import TracePublisher
from autocad_bench.interrupt import Interruption, StopRequest, handle_stop_signals, say
from autocad_bench.metrics.conditions import RunConditions, suite_identity
from autocad_bench.plugins import PluginHandle, PluginHost
from autocad_bench.progress import BatchProgress
from autocad_bench.storage import atomic_write_json, atomic_write_model
from autocad_bench.tasks import load_task

log = logging.getLogger(__name__)

GLOBAL_STATE_DIR_ENV = "AUTOCAD_BENCH_STATE_DIR"
GLOBAL_MAX_ENV = "AUTOCAD_BENCH_MAX_ACTIVE_ROLLOUTS"
TRACE_DESTINATION_ENV = "AUTOCAD_BENCH_TRACE_DESTINATION"
TRACE_PREFIX_ENV = "AUTOCAD_BENCH_TRACE_PREFIX"
POLL_S = 0.25
STOP_EXIT_CODES = frozenset({128 + signal.SIGINT, 128 + signal.SIGTERM, -signal.SIGINT, -signal.SIGTERM})
"""How a sandbox that the controller's forwarded stop ended exits (by handler or by the signal)."""


def new_batch_id(output_dir: Path) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{output_dir.name[:40]}-{stamp}-{secrets.token_hex(3)}"


class BatchRunner:
    """Runs one admitted batch to completion (see module docstring)."""

    def __init__(self, loaded: LoadedConfig, admission: Admission, budgets: BudgetConfig, output_dir: Path,
                 *, host: PluginHost, environ: Mapping[str, str], batch_id: str | None = None,
                 stop: StopRequest | None = None) -> None:
        self.loaded = loaded
        self.config = loaded.config
        self.admission = admission
        self.backend: PluginHandle = admission.backend
        self.budgets = budgets
        self.output_dir = output_dir
        self.host = host
        self.environ = environ
        self.batch_id = batch_id or new_batch_id(output_dir)
        self.prices: PricingContract = with_declared_prices(load_pricing(environ, pinned=self.config.pricing),
                                                            admission.declared_prices)
        self.planned = loaded.planned_rollouts()
        self.enabled = [r for r in self.planned if r.enabled]
        self._stop = threading.Event()
        self.stop = stop or StopRequest()
        """The operator's stop (signals); distinct from ``_stop``, which ends the monitor."""
        self._registry = self._global_registry()
        self.publisher: TracePublisher | None = None
        self.turns = TurnFeed(host, self.batch_id, output_dir)
        self._rollout_paths: dict[str, RolloutPaths] = {}
        self._loops: SharedLoops | None = None
        # Checked here, before anything is created: a bad value is the operator's to fix.
        self._loop_count = pilot_loop_count(environ) if self.config.execution_mode == "shared" else 0

    # --- entry --------------------------------------------------------------------------

    def run(self) -> int:
        """Create the output tree, run every rollout, reconcile; 0 when every rollout completed.

        The batch directory is held (:func:`.ownership.hold_batch`) while it runs, so that a
        resume or reap started beside this controller refuses it.
        """
        self.output_dir.mkdir(parents=True)
        with hold_batch(self.output_dir):
            BatchPaths(self.output_dir).logs.mkdir()
            BatchPaths(self.output_dir).rollouts.mkdir()
            atomic_write_json(BatchPaths(self.output_dir).admission, self.admission.report.model_dump(mode="json"))
            self.store = BatchStateStore(BatchPaths(self.output_dir).state, self._initial_state())
            self._write_trace_publisher()
            return self.execute({entry.rollout_id: None for entry in self.enabled})

    def execute(self, work: Mapping[str, str | None]) -> int:
        """Run the rollouts named in ``work`` (rollout id to a worker id to reconnect, or None
        for a fresh sandbox); the others keep their state. Reconciles at the end."""
        if self.config.execution_mode == "shared":
            # Every rollout lives in this process: make room for all of their descriptors.
            wave = max(1, self.admission.report.admitted_wave)
            raise_open_file_limit(wave * FILES_PER_SHARED_ROLLOUT + FILES_FOR_THE_CONTROLLER)
        self.host.notify("batch_started", event=self._batch_event())
        self.turns.skip_existing(work)
        monitor = threading.Thread(target=self._monitor, name="rollout-monitor", daemon=True)
        monitor.start()
        self._loops = SharedLoops(self._loop_count) if self._loop_count else None
        try:
            wave = max(1, self.admission.report.admitted_wave)
            with ThreadPoolExecutor(max_workers=wave, thread_name_prefix="sandbox") as pool:
                futures = [pool.submit(self._sandbox, entry, work[entry.rollout_id])
                           for entry in self.enabled if entry.rollout_id in work]
                for future in futures:
                    future.result()
        finally:
            if self._loops is not None:
                self._loops.close()
            self._stop.set()
            monitor.join(timeout=5)
            self.turns.poll(work)  # the last turns of rollouts that ended since the last poll
            self._reconcile()
            if self.stop.is_set():
                self.store.update(finished_at=utcnow(), status="interrupted", interruption=self._interruption())
            else:
                self.store.update(finished_at=utcnow(), status="finished", interruption=None)
            self.store.close()
            if self.publisher is not None:
                try:
                    self.publisher.close()
                except Exception:
                    log.exception("trace publisher failed to close")
            self.host.notify("batch_finished", event=self._batch_event())
        states = [r.state for r in self.store.state.rollouts]
        return 0 if all(s == "done" for s in states) else 1

    # --- one sandbox --------------------------------------------------------------------

    def _sandbox(self, entry: PlannedRollout, worker_id: str | None = None) -> None:
        rollout_id = entry.rollout_id
        if self.stop.is_set():
            return  # stopping: a queued rollout stays queued and resume starts it
        lease = self._acquire_global_slot(rollout_id)
        if self.stop.is_set():
            if lease is not None:
                self._registry.release(lease)  # type: ignore[union-attr]
            return
        paths = BatchPaths(self.output_dir).rollout(rollout_id)
        log_path = BatchPaths(self.output_dir).log(rollout_id)
        started = time.monotonic()
        # A re-attached desktop has been running (and billed) since its first start: its
        # time counts from then, through the controller's crash, not from the reconnection.
        first_start = self.store.entry(rollout_id).started_at if worker_id is not None else None
        code = 1
        try:
            request = self._prepare(entry, paths, log_path)
            self._set_state(rollout_id, "starting", started_at=first_start or utcnow())
            if worker_id is not None:
                self._log(log_path, f"reconnecting to worker {worker_id} on backend {self.backend.name}")
                command = self.backend.call("build_recovery_command", request=RecoveryLaunchRequest(
                    launch=request, worker_id=worker_id, resume_command=request.child_command))
                code = run_subprocess(command, self.environ, log_path, stop=self.stop)
                return
            self._log(log_path, f"sandbox starting on backend {self.backend.name} ({self.config.execution_mode} mode)")
            if self.config.execution_mode == "shared":
                child = InProcessChild(paths.root, request.child_environment_names, self.environ, self.host,
                                       stop=self.stop, loops=self._loops)
                code = int(self.backend.call("run_shared", request=request, child=child))
            else:
                command = self.backend.call("build_rollout_command", request=request)
                code = run_subprocess(command, self.environ, log_path, stop=self.stop)
        except Exception as error:  # a backend bug must not take the other rollouts down
            log.exception("sandbox %s failed", rollout_id)
            self._log(log_path, f"sandbox error: {type(error).__name__}: {error}")
            code = 1
        finally:
            seconds = time.monotonic() - started
            if first_start is not None:
                seconds = max(seconds, (utcnow() - first_start).total_seconds())
            if lease is not None:
                self._registry.release(lease)  # type: ignore[union-attr]
            self._log(log_path, f"sandbox finished with exit code {code} after {seconds:.1f}s")
            self._record_end(entry, paths, code, seconds)

    def _prepare(self, entry: PlannedRollout, paths: RolloutPaths, log_path: Path) -> RolloutLaunchRequest:
        paths.root.mkdir(parents=True, exist_ok=True)
        # ".1" for a first attempt; resume numbers the attempts after an interrupted one.
        attempt_id = self.store.entry(entry.rollout_id).attempt_id
        tasks_dir = self.loaded.tasks_dir
        assert tasks_dir is not None
        task = load_task(tasks_dir, entry.task_id)
        hourly = self.hourly_key()
        assignment = PilotAssignment(
            batch_id=self.batch_id, rollout_id=entry.rollout_id, attempt_id=attempt_id, task_id=entry.task_id,
            trial=entry.trial, task_prompt=task.spec.prompt, reference_png=str(task.reference_path),
            model=_spec(entry, self.loaded.path.parent, tasks_dir), budgets=self.budgets,
            pricing=self.prices,
            credential_names=tuple(self.admission.credential_names.get(entry.rollout_id, ())),
            infrastructure_backend=self.backend.name,
            infrastructure_hourly_usd=float(hourly_rate(hourly, self.prices).hourly_usd),
            task_provenance=task.spec.provenance(),
        )
        if paths.assignment.exists():
            # A resumed rollout keeps the assignment (attempt id, prices) it was started with.
            assignment = PilotAssignment.model_validate_json(paths.assignment.read_bytes())
        else:
            # pydantic's serializer: the pure-Python indenting encoder cost ~2 ms per rollout here.
            atomic_write_model(paths.assignment, assignment)
        evaluation = self.config.evaluation
        return RolloutLaunchRequest(
            batch_id=self.batch_id, rollout_id=entry.rollout_id, attempt_id=attempt_id, task_id=entry.task_id,
            spec=self.config.infrastructure, child_command=child_command(paths.root), output_dir=paths.root,
            log_path=log_path,
            evaluation=EvaluationArguments(
                enabled=evaluation.enabled, task_id=entry.task_id, evaluator=evaluation.evaluator,
                evaluator_version=evaluation.evaluator_version,
                gold_cache=str(self.loaded.gold_cache) if self.loaded.gold_cache else None,
                bucket=evaluation.bucket,
                judge_model=evaluation.judge.model if evaluation.judge and evaluation.judge.enabled else None,
                environment_names=(evaluation.judge.credential_env,)
                if evaluation.judge and evaluation.judge.enabled else (),
            ),
            child_environment_names=assignment.credential_names,
            task_template=task.template_path,
        )

    def _record_end(self, entry: PlannedRollout, paths: RolloutPaths, code: int, seconds: float) -> None:
        rate = hourly_rate(self.hourly_key(), self.prices)
        infra_cost = float(infrastructure_cost(seconds, rate.hourly_usd))
        result = _read_result(paths)
        if result is None and self.stop.is_set() and not paths.checkpoint.exists():
            # Stopped before the pilot reached the model: nothing to count, nothing lost;
            # the rollout goes back to the queue and resume starts it afresh.
            self._set_state(entry.rollout_id, "queued", started_at=None, worker_id=None)
            return
        if result is None and self.stop.is_set():
            # Stopped after its checkpoint but before its result (the child was killed past
            # its stop bound): closed now with the spend its checkpoint recorded.
            from autocad_bench.controller.closing import close_from_checkpoint

            close_from_checkpoint(self, entry.rollout_id, FailureClass.INTERRUPTED,
                                  f"stopped by {self.stop.signal_name}; the rollout's child ended (exit code "
                                  f"{code}) before it wrote its result, so it was closed with the spend its "
                                  "checkpoint recorded", seconds=seconds)
            return
        if result is None:
            # The pilot never ran to its end (launch or handoff failed): record that once.
            now = utcnow()
            result = RolloutResult(
                rollout_id=entry.rollout_id, attempt_id=self.store.entry(entry.rollout_id).attempt_id,
                task_id=entry.task_id, task_provenance=assigned_provenance(paths), provider=entry.provider,
                model=entry.model, tool_mode=entry.tool_mode, infrastructure_backend=self.backend.name,
                status="failed",
                failure_class=FailureClass.ADMISSION_FAILED,
                failure_detail=f"the sandbox exited with code {code} before the pilot finished",
                stop_reason=None, turns=0, actions=0, invalid_turns=0, model_responses=0, usage={},
                token_cost_usd=0.0, wall_seconds=0.0, infrastructure_seconds=round(seconds, 3),
                infrastructure_cost_usd=infra_cost,
                drawing=None, attempts=1, started_at=now, finished_at=now, exit_code=code)
        else:
            result = result.model_copy(update={"infrastructure_seconds": round(seconds, 3),
                                               "infrastructure_cost_usd": infra_cost})
        if paths.root.exists():
            atomic_write_model(paths.result, result)
        # A pilot that completed just as the operator's stop reached its sandbox: the sandbox
        # exits by the forwarded signal, not by a failure of the rollout (the batch's reap
        # still proves its desktop gone, and resume scores it if the stop skipped that).
        stopped_by_us = self.stop.is_set() and code in STOP_EXIT_CODES
        state: RolloutState = "done" if result.status == "completed" and (code == 0 or stopped_by_us) else "failed"
        score, passed, _ = read_scores(paths.root)
        if state == "done" and code == 0 and score is None and self.config.evaluation.enabled:
            # Evaluation is on and the sandbox exited 0 without a score: its backend skipped the
            # evaluation its lifecycle owes (a failed one exits nonzero). Counted as done it would
            # be a completed rollout that silently measures nothing; resume evaluates it.
            state = "failed"
            self._log(BatchPaths(self.output_dir).log(entry.rollout_id),
                      f"evaluation is enabled but backend {self.backend.name} left no score: its lifecycle did "
                      "not evaluate the rollout (autocad-bench-resume evaluates it)")
        self._set_state(
            entry.rollout_id, state, finished_at=utcnow(), exit_code=code,
            failure_class=result.failure_class.value if result.failure_class else (
                None if state == "done" else "cleanup_error"),
            stop_reason=result.stop_reason, turns=result.turns, actions=result.actions,
            token_cost_usd=result.token_cost_usd, infrastructure_seconds=round(seconds, 3),
            infrastructure_cost_usd=infra_cost, score=score, passed=passed,
        )

    # --- state --------------------------------------------------------------------------

    def _initial_state(self) -> BatchState:
        now = utcnow()
        return BatchState(
            batch_id=self.batch_id, name=self.config.name, config_path=str(self.loaded.path),
            created_at=now, updated_at=now, execution_mode=self.config.execution_mode,
            max_concurrency=self.config.max_concurrency, admitted_wave=self.admission.report.admitted_wave,
            infrastructure_backend=self.backend.name,
            infrastructure=BatchState.spec_json(self.config.infrastructure),
            evaluation=self.config.evaluation.model_dump(mode="json"), budgets=self.budgets,
            pricing=self.prices.model_dump(mode="json"), conditions=self._conditions(),
            rollouts=[RolloutEntryState(
                rollout_id=r.rollout_id, assignment_id=r.assignment_id, trial=r.trial, task_id=r.task_id,
                provider=r.provider, model=r.model, tool_mode=r.tool_mode,
                attempt_id=f"{self.batch_id}.{r.rollout_id}.1", infrastructure_backend=self.backend.name)
                for r in self.enabled],
            disabled_rollouts=[r.rollout_id for r in self.planned if not r.enabled],
            rerun_of=self.loaded.rerun_of,
        )

    def _conditions(self) -> RunConditions:
        """What this batch is measured under: suite identity, evaluator, budgets, trials."""
        suite, suite_sha256 = suite_identity(self.loaded.task_suite_path)
        evaluation = self.config.evaluation
        return RunConditions(
            suite=suite, suite_sha256=suite_sha256,
            evaluator_version=evaluation.evaluator_version if evaluation.enabled else None,
            step_budget=self.budgets.max_turns, max_actions=self.budgets.max_actions,
            trials=self.config.trials,
        )

    def _set_state(self, rollout_id: str, state: RolloutState, *, only_from: tuple[str, ...] | None = None,
                   **changes: object) -> None:
        before, after = self.store.update_rollout(rollout_id, only_from=only_from, state=state, **changes)
        if before.state != after.state:
            if after.state in ("done", "failed"):
                self.turns.poll([rollout_id])  # its last turns reach observers before its end
            self.host.notify("rollout_state_changed", event=RolloutStateEvent(
                batch_id=self.batch_id, rollout_id=rollout_id, previous=before.state, state=after.state,
                at=utcnow()))

    def _monitor(self) -> None:
        """Promote starting -> running -> evaluating from what each pilot writes."""
        while not self._stop.wait(POLL_S):
            self.turns.poll(r.rollout_id for r in self.store.state.rollouts
                            if r.state in ("starting", "running", "evaluating"))
            evaluation = self.config.evaluation.enabled
            for entry in self.store.state.rollouts:
                # Per pass: one stat per running rollout only when evaluation is on (its
                # result.json), one read per starting rollout; nothing for the others.
                if entry.state != "starting" and not (entry.state == "running" and evaluation):
                    continue
                paths = self._paths(entry.rollout_id)
                target: RolloutState | None = None
                if evaluation and paths.result.exists():
                    target = "evaluating"
                elif entry.state == "starting" and _pilot_running(paths):
                    target = "running"
                if target is not None and target != entry.state:
                    self._set_state(entry.rollout_id, target, only_from=("starting", "running"))

    def _paths(self, rollout_id: str) -> RolloutPaths:
        paths = self._rollout_paths.get(rollout_id)
        if paths is None:
            paths = self._rollout_paths[rollout_id] = BatchPaths(self.output_dir).rollout(rollout_id)
        return paths

    # --- stopping -----------------------------------------------------------------------

    def _interruption(self) -> Interruption:
        assert self.stop.signum is not None and self.stop.exit_code is not None
        return Interruption(signal=self.stop.signal_name, exit_code=self.stop.exit_code, at=utcnow(),
                            immediate=self.stop.immediate)

    def announce_stop(self) -> None:
        """First signal: tell the operator what happens now (runs in the signal handler)."""
        running = sum(1 for r in self.store.state.rollouts if r.state in ("starting", "running", "evaluating"))
        say(f"\n{self.stop.signal_name}: stopping. No new rollout or turn starts; {running} running rollout(s) "
            "finish their current action batch, save and release their desktops. Signal again to tear "
            "everything down now.")

    def abort(self) -> None:
        """Second signal: kill every child, reap every desktop, write the state, exit now.

        Runs in the signal handler on the main thread. Children's process groups were
        already sent SIGKILL by :meth:`StopRequest.request`; rollouts caught in flight stay
        non-terminal here and resume closes them as ``interrupted`` from their checkpoints.
        """
        say(f"{self.stop.signal_name} again: tearing down every desktop of batch {self.batch_id} now")
        self._reconcile()
        code = self.stop.exit_code or 1
        try:
            self.store.update(finished_at=utcnow(), status="interrupted", interruption=self._interruption())
        finally:
            say(resume_hint(self.output_dir))
            # Worker threads may sit in a model call: do not wait for them (a normal exit
            # would join them); everything they held is reaped and the state is on disk.
            os._exit(code)

    def _batch_event(self) -> BatchEvent:
        state = self.store.state
        return BatchEvent(batch_id=self.batch_id, output_dir=str(self.output_dir),
                          infrastructure_backend=self.backend.name, rollouts=len(state.rollouts), at=utcnow(),
                          summary={"counts": dict(state.counts)})

    # --- infrastructure -----------------------------------------------------------------

    def hourly_key(self) -> str:
        fields = self.config.infrastructure.backend_fields()
        instance_type = fields.get("instance_type")
        return str(instance_type) if isinstance(instance_type, str) else self.backend.name

    def _write_trace_publisher(self) -> None:
        destination = self.environ.get(TRACE_DESTINATION_ENV) or None
        self.publisher = self.backend.call("create_trace_publisher", request=TracePublisherRequest(
            batch_id=self.batch_id, output_dir=self.output_dir, destination=destination,
            prefix=self.environ.get(TRACE_PREFIX_ENV, "")))
        if self.publisher is not None:
            description = {"enabled": True, **self.publisher.describe()}
        elif destination:
            description = {"enabled": False, "reason": f"backend {self.backend.name!r} has no trace publisher"}
        else:
            description = {"enabled": False, "reason": f"{TRACE_DESTINATION_ENV} is not set"}
        atomic_write_json(self.output_dir / "trace-publisher.json", description)

    def _reconcile(self) -> None:
        try:
            report = self.backend.call("reap_batch", request=ReapRequest(
                batch_id=self.batch_id, spec=self.config.infrastructure, output_dir=self.output_dir))
            atomic_write_json(self.output_dir / "reconcile.json", report.model_dump(mode="json"))
        except Exception as error:
            log.exception("reap_batch failed")
            atomic_write_json(self.output_dir / "reconcile.json",
                              {"cleaned": [], "errors": [f"{type(error).__name__}: {error}"]})

    def _global_registry(self) -> ActiveRolloutRegistry | None:
        raw = self.environ.get(GLOBAL_MAX_ENV)
        if not raw:
            return None
        state_dir = Path(self.environ.get(GLOBAL_STATE_DIR_ENV) or Path.home() / ".local/state/autocad-bench")
        return ActiveRolloutRegistry(state_dir / "active-rollouts", int(raw))

    def _acquire_global_slot(self, rollout_id: str) -> str | None:
        """Wait (visibly queued) for a slot under the cross-controller cap, if one is configured."""
        if self._registry is None:
            return None
        key = f"{self.batch_id}.{rollout_id}"
        while not self._registry.try_acquire(key):
            if self.stop.wait(1.0):
                return None
        return key

    @staticmethod
    def _log(path: Path, message: str) -> None:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"{utcnow().isoformat()} controller: {message}\n")


def _spec(entry: PlannedRollout, base_dir: Path, tasks_dir: Path):  # type: ignore[no-untyped-def]
    from autocad_bench.admission import model_spec

    return model_spec(entry.entry, base_dir, tasks_dir)


def _read_result(paths: RolloutPaths) -> RolloutResult | None:
    try:
        return RolloutResult.model_validate_json(paths.result.read_bytes())
    except (FileNotFoundError, ValueError):
        return None


def assigned_provenance(paths: RolloutPaths) -> dict[str, str | int | None]:
    """The task provenance the rollout was assigned (empty when no assignment was written)."""
    try:
        return dict(PilotAssignment.model_validate_json(paths.assignment.read_bytes()).task_provenance)
    except (FileNotFoundError, ValueError):
        return {}


def _pilot_running(paths: RolloutPaths) -> bool:
    try:
        return RunState.model_validate_json(paths.run_state.read_bytes()).phase != "starting"
    except (FileNotFoundError, ValueError):
        return False


def resume_hint(output_dir: Path) -> str:
    """The line that tells an interrupted operator how to continue."""
    return (f"batch interrupted; see the plan with `autocad-bench-resume {output_dir}` and continue it with "
            f"`autocad-bench-resume {output_dir} --execute`")


def run_interruptibly(runner: BatchRunner, body: Callable[[], int]) -> int:
    """Run ``body`` (the runner's work) with SIGINT/SIGTERM wired to the runner's stop.

    Returns ``body``'s code, or ``128 + signal`` when a signal stopped the batch.
    """
    with handle_stop_signals(runner.stop, on_first=runner.announce_stop, on_second=runner.abort):
        code = body()
    return runner.stop.exit_code if runner.stop.exit_code is not None else code


def run_batch(loaded: LoadedConfig, admission: Admission, budgets: BudgetConfig, output_dir: Path,
              *, host: PluginHost, environ: Mapping[str, str]) -> int:
    """Execute an admitted batch into ``output_dir`` (which must not exist yet).

    Exit code: 0 when every rollout completed, 1 when one did not, 130/143 when SIGINT or
    SIGTERM stopped the batch (it is then resumable, see :mod:`autocad_bench.interrupt`).
    """
    runner = BatchRunner(loaded, admission, budgets, output_dir, host=host, environ=environ)

    def body() -> int:
        # Entries from the controller's memory: a state change never re-reads batch-state.json.
        with BatchProgress(output_dir, host=host, environ=environ,
                           entries=lambda rollout_id: runner.store.entry(rollout_id).model_dump(mode="json")):
            return runner.run()

    code = run_interruptibly(runner, body)
    summary = build_summary(output_dir, runner.store.state)
    write_summary(output_dir, summary)
    print_summary(summary)
    print(json.dumps({"batch_id": runner.batch_id, "output_dir": str(output_dir), "counts": summary["counts"],
                      "models": compact_models(summary)}))
    if runner.stop.is_set():
        say(resume_hint(output_dir))
    return code


__all__ = ["BatchRunner", "resume_hint", "run_batch", "run_interruptibly"]
