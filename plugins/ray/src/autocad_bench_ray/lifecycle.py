"""The controller's side of one Ray rollout, the same code in shared and subprocess mode.

1. resolve the evaluator (fails before any desktop exists when it cannot run);
2. remove a desktop actor an earlier attempt of the same rollout left (same name);
3. create the detached, named desktop actor (one unit of the ``desktop`` resource; Ray
   picks the node), wait for its placement, have it launch and verify the desktop; a
   launch that fails (the node died, the handoff failed, the placement timed out) is torn
   down and replaced by a fresh actor, ``launch_attempts`` in all: no model call happened;
4. run the child with the broker URL and token of the actor's handoff, while a thread
   sends heartbeats (a desktop without them reaps itself after ``desktop_ttl_s``);
5. in ``finally``: ask the actor to tear the desktop down, then ``ray.kill`` it;
6. if the actor died during the rollout (its node was lost), a failed ``result.json`` is
   re-classified ``infrastructure_lost`` with the node named: after the model handoff a
   rollout is never silently replaced, ``--rerun-failed-from RUN --failure-class
   infrastructure_lost`` runs it again;
7. evaluate on the controller (the pilot fetched ``attempt.dxf`` into the rollout directory).

Blocking Ray calls (``ray.get``) run on the rollout's own thread or the heartbeat thread,
never inside an event loop.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from autocad_bench.harness.layout import RolloutPaths
from autocad_bench.harness.records import FailureClass, RolloutResult
from autocad_bench.infrastructure import BROKER_TOKEN_ENV, BROKER_URL_ENV, RolloutLaunchRequest
from autocad_bench.storage import atomic_write_json
from autocad_bench_ray.bounds import ACTOR_CALL_MARGIN_S, KILL_SETTLE_S, TEARDOWN_CALL_S
from autocad_bench_ray.desktop import DesktopActor, DesktopOrder, Handoff, TeardownOutcome
from autocad_bench_ray.settings import RaySettings
from autocad_bench_xvfb.evaluation import EvaluationUnavailable, Evaluator, resolve_evaluator
from autocad_bench_xvfb.health import LaunchError
from autocad_bench_xvfb.lifecycle import (
    EXIT_CLEANUP_FAILED,
    EXIT_EVALUATION_UNAVAILABLE,
    EXIT_LAUNCH_FAILED,
    with_evaluation,
)
from autocad_bench_xvfb.logs import LifecycleLog

ChildRunner = Callable[[Mapping[str, str]], int]
WORKER_PREFIX = "ray:"


class RayLog(LifecycleLog):
    """The rollout log with ``ray:`` lines (the node's own lines are copied in as they are)."""

    def line(self, message: str) -> None:
        stamp = datetime.now(UTC).isoformat()
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(f"{stamp} ray: {message}\n")

    def node_lines(self, text: str) -> None:
        if text:
            with contextlib.suppress(OSError), open(self.path, "a", encoding="utf-8") as handle:
                handle.write(text if text.endswith("\n") else text + "\n")


def worker_id(namespace: str, rollout_id: str) -> str:
    """The backend-neutral worker id of a desktop actor: ``ray:<namespace>/<rollout id>``."""
    return f"{WORKER_PREFIX}{namespace}/{rollout_id}"


def parse_worker_id(worker: str) -> tuple[str, str]:
    """(namespace, actor name) of a worker id; raises ValueError for another backend's id."""
    if not worker.startswith(WORKER_PREFIX) or "/" not in worker:
        raise ValueError(f"not a ray worker id: {worker!r}")
    namespace, name = worker[len(WORKER_PREFIX):].split("/", 1)
    return namespace, name


def actor_class() -> Any:
    """``DesktopActor`` as a Ray actor class (threaded: heartbeats answer during a launch)."""
    import ray

    return ray.remote(DesktopActor)


def find_actor(namespace: str, name: str) -> Any | None:
    """The live named actor, or None."""
    import ray

    try:
        return ray.get_actor(name, namespace=namespace)
    except ValueError:
        return None


def kill_actor(actor: Any, namespace: str, name: str) -> None:
    """``ray.kill`` the actor and wait (bounded) until its name is free again."""
    import ray

    with contextlib.suppress(Exception):
        ray.kill(actor, no_restart=True)
    deadline = time.monotonic() + KILL_SETTLE_S
    while time.monotonic() < deadline and find_actor(namespace, name) is not None:
        time.sleep(0.1)


def teardown_actor(actor: Any, namespace: str, name: str, log: RayLog) -> tuple[TeardownOutcome | None, str | None]:
    """Ask the actor to tear its desktop down, then kill it. Returns (outcome, why the actor was lost)."""
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError

    outcome: TeardownOutcome | None = None
    lost: str | None = None
    try:
        outcome = ray.get(actor.teardown.remote(), timeout=TEARDOWN_CALL_S)
    except RayActorError as error:
        lost = _actor_error(error)
    except GetTimeoutError:
        lost = f"the desktop actor did not finish its teardown within {TEARDOWN_CALL_S:g} s"
    finally:
        kill_actor(actor, namespace, name)
    if outcome is not None:
        log.node_lines(outcome.log)
        if outcome.errors:
            log.line(f"desktop {name}: teardown FAILED (the node's sentinel retries): " + "; ".join(outcome.errors))
        else:
            log.line(f"desktop {name}: torn down, nothing of it remains on its node")
    else:
        log.line(f"desktop {name}: {lost}; its node's sentinel reaps what is left")
    return outcome, lost


def _actor_error(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"the desktop actor died ({type(error).__name__}: {' '.join(text[:3])[:400]})"


class Heartbeat:
    """Sends ``heartbeat`` to the actor every ``period_s`` on a thread; notes when the actor died."""

    def __init__(self, actor: Any, period_s: float) -> None:
        self.actor = actor
        self.period_s = period_s
        self.lost: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ray-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop sending heartbeats (idempotent); waits for the thread (bounded)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.period_s + 5)

    def _run(self) -> None:
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError

        while not self._stop.wait(self.period_s):
            try:
                ray.get(self.actor.heartbeat.remote(), timeout=self.period_s)
            except RayActorError as error:
                self.lost = _actor_error(error)
                return
            except GetTimeoutError:
                continue


def order_for(request: RolloutLaunchRequest, settings: RaySettings) -> DesktopOrder:
    """The actor's order for ``request``; raises :class:`LaunchError` without a template drawing."""
    template = request.task_template
    if template is None or not Path(template).is_file():
        raise LaunchError(f"the task template drawing {template} does not exist; the ray backend starts "
                          "LibreCAD on a copy of it")
    return DesktopOrder(
        batch_id=request.batch_id, rollout_id=request.rollout_id, attempt_id=request.attempt_id,
        task_id=request.task_id, broker_version=request.spec.broker_version,
        settings=settings.node_desktop_settings(request.batch_id), node_work_dir=settings.node_work_dir,
        template_name=Path(template).name, template=Path(template).read_bytes(),
        desktop_ttl_s=settings.desktop_ttl_s, expose_broker=settings.expose_broker)


def launch_bound_s(settings: RaySettings) -> float:
    """How long the controller waits for one actor's ``launch`` (local-xvfb's launches plus a margin)."""
    desktop = settings.desktop
    one = desktop.xvfb_timeout_s + desktop.launch_timeout_s + desktop.handoff_timeout_s + 30.0
    return desktop.launch_attempts * one + ACTOR_CALL_MARGIN_S


def launch_desktop(request: RolloutLaunchRequest, settings: RaySettings, log: RayLog) -> tuple[Any, Handoff]:
    """Steps 2 and 3 of the module docstring; returns (actor, handoff) or raises :class:`LaunchError`."""
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

    namespace = settings.namespace(request.batch_id)
    name = request.rollout_id
    stale = find_actor(namespace, name)
    if stale is not None:
        log.line(f"desktop actor {name} of an earlier attempt of this rollout still exists; removing it")
        teardown_actor(stale, namespace, name, log)
    order = order_for(request, settings)
    failures: list[str] = []
    remote = actor_class()
    for attempt in range(1, settings.launch_attempts + 1):
        actor = remote.options(
            name=name, namespace=namespace, lifetime="detached", max_restarts=0, max_concurrency=4,
            num_cpus=0, resources={settings.desktop_resource: 1},
        ).remote()
        handoff: Handoff | None = None
        try:
            try:
                node = ray.get(actor.ping.remote(), timeout=settings.placement_timeout_s)
            except GetTimeoutError:
                raise LaunchError(f"no node offered a free '{settings.desktop_resource}' slot within "
                                  f"{settings.placement_timeout_s:g} s") from None
            log.line(f"worker {worker_id(namespace, name)}: desktop actor placed on node {node.node_id[:12]} "
                     f"({node.node_ip}, {node.hostname}), attempt {attempt} of {settings.launch_attempts}")
            try:
                handoff = ray.get(actor.launch.remote(order), timeout=launch_bound_s(settings))
            except GetTimeoutError:
                raise LaunchError(f"the desktop did not reach its handoff within {launch_bound_s(settings):g} s"
                                  ) from None
            except RayTaskError as error:
                cause = error.cause if isinstance(error.cause, Exception) else error
                raise LaunchError(str(cause).strip().splitlines()[-1][:400] if str(cause).strip() else
                                  type(cause).__name__) from None
            log.line(f"desktop {handoff.worker_id} ready on node {handoff.node.node_id[:12]} at {handoff.url}, "
                     f"display {handoff.display}, launch {handoff.timings.get('launch_s', 0.0):.2f} s")
            return actor, handoff
        except (LaunchError, RayActorError) as error:
            reason = _actor_error(error) if isinstance(error, RayActorError) else str(error)
            failures.append(reason)
            log.line(f"desktop actor {name} launch attempt {attempt} of {settings.launch_attempts} failed: {reason}")
        finally:
            if handoff is None:
                teardown_actor(actor, namespace, name, log)
    raise LaunchError(f"no desktop reached the verified handoff in {settings.launch_attempts} actor(s): "
                      + " | ".join(failures))


def mark_lost(output_dir: Path, detail: str) -> bool:
    """Re-classify a failed ``result.json`` as ``infrastructure_lost`` with ``detail``; True when changed."""
    path = RolloutPaths(output_dir).result
    try:
        result = RolloutResult.model_validate_json(path.read_bytes())
    except (OSError, ValueError):
        return False
    if result.status == "completed" or result.failure_class == FailureClass.INFRASTRUCTURE_LOST:
        return False
    before = f"{result.failure_class.value if result.failure_class else 'failed'}: {result.failure_detail}"
    updated = result.model_copy(update={"failure_class": FailureClass.INFRASTRUCTURE_LOST,
                                        "failure_detail": f"{detail} (the pilot reported {before})"})
    atomic_write_json(path, updated.model_dump(mode="json"))
    return True


def run_on(actor: Any, handoff: Handoff, namespace: str, name: str, run_child: ChildRunner,
           evaluator: Evaluator | None, log: RayLog, settings: RaySettings, output_dir: Path) -> int:
    """Steps 4 to 7: run the child on a verified desktop, tear it down (always), classify, evaluate."""
    code: int | None = None
    outcome: TeardownOutcome | None = None
    lost: str | None = None
    with Heartbeat(actor, settings.heartbeat_s) as heartbeat:
        try:
            code = run_child({BROKER_URL_ENV: handoff.url, BROKER_TOKEN_ENV: handoff.token})
            log.line(f"desktop {handoff.worker_id}: child exited with code {code}")
        finally:
            heartbeat.stop()
            outcome, lost = teardown_actor(actor, namespace, name, log)
            lost = heartbeat.lost or lost
    assert code is not None
    if lost is not None:
        detail = (f"node {handoff.node.node_id[:12]} ({handoff.node.node_ip}) lost desktop {handoff.worker_id} "
                  f"mid-rollout: {lost}")
        log.line(detail)
        if mark_lost(output_dir, detail):
            log.line("result.json re-classified infrastructure_lost; rerun it with --rerun-failed-from RUN "
                     "--failure-class infrastructure_lost")
    elif outcome is not None and outcome.errors and code == 0:
        code = EXIT_CLEANUP_FAILED
    return with_evaluation(code, evaluator, log)


def run_rollout(request: RolloutLaunchRequest, settings: RaySettings, run_child: ChildRunner,
                environ: Mapping[str, str]) -> int:
    """The whole rollout (module docstring); returns its exit code (local-xvfb's codes: 70, 71, 72)."""
    log = RayLog(request.log_path)
    try:
        evaluator = resolve_evaluator(request, environ)
    except EvaluationUnavailable as error:
        log.line(f"rollout {request.rollout_id} not started: {error}")
        return EXIT_EVALUATION_UNAVAILABLE
    try:
        actor, handoff = launch_desktop(request, settings, log)
    except LaunchError as error:
        log.line(f"rollout {request.rollout_id} failed before handoff: {error}")
        return EXIT_LAUNCH_FAILED
    return run_on(actor, handoff, settings.namespace(request.batch_id), request.rollout_id, run_child, evaluator,
                  log, settings, request.output_dir)
