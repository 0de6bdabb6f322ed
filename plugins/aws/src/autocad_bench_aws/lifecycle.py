"""The rollout lifecycle on EC2, one implementation for both execution modes.

``run_shared`` awaits :func:`run_lifecycle` with the in-process pilot as the child; the
subprocess wrapper awaits it with a runner that executes the exact child command. In order,
for at most ``clone_attempts`` fresh clones (a failed clone is terminated before the next):

1. RunInstances (tags ``BatchId``/``RolloutId``, TTL timer and per-clone broker token in
   user data, shutdown behaviour terminate), bounded retries;
2. running with both status checks ok, then the SSM agent online (the batch's shared poller);
3. current-boot readiness through SSM (first check plus one diagnostic re-check);
4. the authenticated exact-process tunnel (up to three fresh processes), then its watchdog;
5. the child (the pilot leases and resets the exact task through the tunnel); a handoff that
   failed before any model request is replayed once on the same clone (same lease identity,
   same reset key); if it fails again, the clone is replaced (never after a model request);
6. evidence retrieval and release for whatever the pilot left open (300 s / 60 s);
7. the evaluation export from the worker through presigned S3 URLs;
8. in ``finally``: tunnel closed, TerminateInstances requested;
9. local scoring against the gold cache (after the worker is gone).

Exit codes: the child's; :data:`EXIT_LAUNCH_FAILED` when no clone reached the handoff;
:data:`EXIT_EVALUATION_UNAVAILABLE`; :data:`EXIT_CLEANUP_FAILED` when the rollout succeeded
but termination could not be requested (the reconciler and the TTL remain);
:data:`EXIT_NOT_RECONNECTABLE` when recovery finds no usable worker; the evaluator's exit
code when evaluation failed after a successful rollout.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from autocad_bench.evaluation import was_interrupted
from autocad_bench.harness.layout import RolloutPaths
from autocad_bench.harness.records import FailureClass
from autocad_bench.infrastructure import BROKER_TOKEN_ENV, BROKER_URL_ENV, RolloutLaunchRequest
from autocad_bench.infrastructure.evidence import archive_attempt, finish_session, handoff_failed, mark_failure
from autocad_bench.infrastructure.readiness import health_identity
from autocad_bench.infrastructure.rollout_log import LifecycleLog as RolloutLifecycleLog
from autocad_bench_aws.bounds import (
    EVIDENCE,
    INSTANCE_RUNNING_S,
    READINESS_CHECKS,
    READINESS_COMMAND_S,
    RESET_WRAPPER_ATTEMPTS,
    SSM_ONLINE_S,
    scaled,
)
from autocad_bench_aws.calls import AwsCallError, AwsSession, call
from autocad_bench_aws.evaluation import (
    EvaluationPlan,
    EvaluationUnavailable,
    Transfer,
    plan_evaluation,
    score,
    transfer,
)
from autocad_bench_aws.fleet import FleetPoller, WaitFailed
from autocad_bench_aws.launch import LaunchError, run_instance, terminate
from autocad_bench_aws.readiness import (
    READINESS_SCRIPT,
    BrokerReadiness,
    CommandFailed,
    parse_readiness,
    readiness_problems,
    run_command,
)
from autocad_bench_aws.settings import AwsSettings
from autocad_bench_aws.tunnel import Tunnel, TunnelError
from autocad_bench_aws.worker import (
    BATCH_TAG,
    ROLLOUT_TAG,
    WorkerConfig,
    config_from_user_data,
    expires_at,
    new_token,
    tags,
)

EXIT_LAUNCH_FAILED = 70
EXIT_EVALUATION_UNAVAILABLE = 71
EXIT_CLEANUP_FAILED = 72
EXIT_NOT_RECONNECTABLE = 73

ChildRunner = Callable[[Mapping[str, str]], Awaitable[int]]
"""Runs the child with these variables added to its environment; returns its exit code."""


class AdmissionFailed(Exception):
    """The clone failed a handoff check before any model request."""


class LifecycleLog(RolloutLifecycleLog):
    """Appends timestamped ``aws:`` lines to the rollout log (both modes)."""

    prefix = "aws"


@dataclass
class Clone:
    """One fresh clone of the image for a rollout: its number, its own broker token, and the
    instance, readiness and tunnel once each is reached (``None`` before).
    """

    number: int
    token: str = field(default_factory=new_token, repr=False)
    instance_id: str | None = None
    readiness: BrokerReadiness | None = None
    tunnel: Tunnel | None = None
    launched_at: float = 0.0


async def _ready(session: AwsSession, fleet: FleetPoller, clone: Clone, request: RolloutLaunchRequest,
                 settings: AwsSettings, log: LifecycleLog) -> None:
    """Steps 2 to 4 for a launched (or reconnected) instance; raises on any failed check."""
    assert clone.instance_id is not None
    instance_id = clone.instance_id
    view = await fleet.wait_for(instance_id, lambda v: v.checks_ok, scaled(INSTANCE_RUNNING_S),
                                "running with both status checks ok")
    log(f"{instance_id} running, instance and system checks ok")
    await fleet.wait_for(instance_id, lambda v: v.state == "running" and v.ssm == "Online", scaled(SSM_ONLINE_S),
                         "SSM agent online")
    del view
    log(f"{instance_id} online in SSM")
    problems: list[str] = []
    for check in range(1, READINESS_CHECKS + 1):
        try:
            output = await run_command(session, instance_id, [f"& '{READINESS_SCRIPT}'"], scaled(READINESS_COMMAND_S),
                                       "autocad-bench readiness")
            report = parse_readiness(output)
        except CommandFailed as error:
            problems = [str(error)]
        else:
            problems = readiness_problems(report, rollout_id=request.rollout_id,
                                          broker_version=request.spec.broker_version, broker_port=settings.broker_port)
            if not problems:
                clone.readiness = report.readiness
                break
        log(f"{instance_id} readiness check {check} of {READINESS_CHECKS} failed: {'; '.join(problems)}")
    if clone.readiness is None:
        raise AdmissionFailed(f"{instance_id} is not ready in its current boot: {'; '.join(problems)}")
    ready = clone.readiness
    log(f"{instance_id} ready in boot {ready.boot_id}: broker pid {ready.pid} in session "
        f"{ready.interactive_session_id}, startup {ready.startup_id}")
    tunnel = Tunnel(session, instance_id, settings.broker_port, clone.token, health_identity(ready), log=log,
                    profile=settings.aws_profile)
    clone.tunnel = tunnel
    await tunnel.open()
    tunnel.start_watchdog()


async def _launch(session: AwsSession, clone: Clone, request: RolloutLaunchRequest, settings: AwsSettings,
                  log: LifecycleLog) -> None:
    config = WorkerConfig(batch_id=request.batch_id, rollout_id=request.rollout_id, attempt_id=request.attempt_id,
                          clone=clone.number, broker_version=request.spec.broker_version,
                          broker_port=settings.broker_port, broker_token=clone.token,
                          expires_at=expires_at(settings.instance_ttl_minutes))
    launched = await asyncio.to_thread(
        run_instance, session.ec2, settings, config,
        tags(request.batch_id, request.rollout_id, request.attempt_id, clone.number), log=log)
    clone.instance_id = launched.instance_id
    clone.launched_at = time.monotonic()
    log(f"launched instance {launched.instance_id} for rollout {request.rollout_id} (clone {clone.number}, "
        f"{launched.subnet_id} {launched.zone}, RunInstances requests {launched.requests})")


async def _terminate(session: AwsSession, clone: Clone, log: LifecycleLog) -> str | None:
    """Close the tunnel and request termination; returns a problem or None."""
    if clone.tunnel is not None:
        await clone.tunnel.close()
    if clone.instance_id is None:
        return None
    try:
        await asyncio.to_thread(terminate, session.ec2, [clone.instance_id])
    except AwsCallError as error:
        log(f"termination of {clone.instance_id} FAILED ({error}); the batch reconciler and the instance TTL remain")
        return f"terminate {clone.instance_id}: {error}"
    log(f"termination of {clone.instance_id} requested")
    return None


async def run_lifecycle(
    request: RolloutLaunchRequest,
    settings: AwsSettings,
    run_child: ChildRunner,
    *,
    session: AwsSession,
    fleet: FleetPoller,
    environ: Mapping[str, str],
    mode: Literal["shared", "subprocess"],
    worker_id: str | None = None,
) -> int:
    """Run (or, with ``worker_id``, reconnect and resume) one rollout; see the module docstring."""
    log = LifecycleLog(request.log_path)
    paths = RolloutPaths(request.output_dir)
    try:
        plan = plan_evaluation(request.evaluation, settings.evaluation_prefix)
    except EvaluationUnavailable as error:
        log(f"rollout {request.rollout_id} not started: {error}")
        return EXIT_EVALUATION_UNAVAILABLE
    log(f"rollout {request.rollout_id} on {settings.instance_type} in {settings.aws_region} ({mode} mode)")
    if worker_id is not None:
        return await _recover(request, settings, run_child, session=session, fleet=fleet, environ=environ,
                              worker_id=worker_id, plan=plan, log=log, paths=paths)
    code: int | None = None
    moved: Transfer | None = None
    cleanup: list[str] = []
    failures: list[str] = []
    for number in range(1, settings.clone_attempts + 1):
        clone = Clone(number)
        try:
            try:
                await _launch(session, clone, request, settings, log)
                await _ready(session, fleet, clone, request, settings, log)
            except (LaunchError, WaitFailed, AdmissionFailed, TunnelError, CommandFailed, AwsCallError) as error:
                failures.append(f"clone {number}: {error}")
                log(f"clone {number} of {settings.clone_attempts} failed admission: {error}")
                continue
            assert clone.tunnel is not None
            code = await _run_child(run_child, clone, paths, log)
            if handoff_failed(paths):
                failures.append(f"clone {number}: the exact lease/reset failed twice")
                if number < settings.clone_attempts:
                    archive_attempt(paths, f"clone{number}-attempt{RESET_WRAPPER_ATTEMPTS}")
                    log(f"clone {number} failed the exact lease/reset before any model request; "
                        "terminating it and replacing it")
                    code = None
                    continue
                break
            for line in await finish_session(clone.tunnel.url, clone.token, paths, log, EVIDENCE):
                log(f"evidence/release: {line}")
            if plan is not None and was_interrupted(paths):
                # Stopped by the operator: a cut-short drawing is never scored, and the
                # transfer would only delay the stop the operator is waiting for.
                log("the rollout was interrupted; its drawing is not exported for scoring")
            elif plan is not None:
                moved = await transfer(plan, session, clone.instance_id or "", request.batch_id, request.rollout_id,
                                       paths, log)
            break
        finally:
            problem = await _terminate(session, clone, log)
            if problem:
                cleanup.append(problem)
    if code is None:
        log(f"rollout {request.rollout_id} failed before handoff: {' | '.join(failures)}")
        return EXIT_LAUNCH_FAILED
    return await _conclude(code, plan, moved, cleanup, paths, environ, log)


async def _run_child(run_child: ChildRunner, clone: Clone, paths: RolloutPaths, log: LifecycleLog) -> int:
    """The child, replayed once on the same clone if its handoff failed before any model request."""
    assert clone.tunnel is not None
    environ = {BROKER_URL_ENV: clone.tunnel.url, BROKER_TOKEN_ENV: clone.token}
    code = 1
    for attempt in range(1, RESET_WRAPPER_ATTEMPTS + 1):
        code = await run_child(environ)
        log(f"child exited with code {code} (attempt {attempt} of {RESET_WRAPPER_ATTEMPTS} on clone {clone.number}, "
            f"tunnel restarts {clone.tunnel.restarts})")
        if not handoff_failed(paths) or attempt == RESET_WRAPPER_ATTEMPTS:
            break
        archive_attempt(paths, f"clone{clone.number}-attempt{attempt}")
        log("the handoff failed before any model request; replaying the same lease and reset")
    return code


async def _conclude(code: int, plan: EvaluationPlan | None, moved: Transfer | None, cleanup: list[str],
                    paths: RolloutPaths, environ: Mapping[str, str], log: LifecycleLog) -> int:
    if cleanup:
        mark_failure(paths, FailureClass.CLEANUP_ERROR, "; ".join(cleanup))
        if code == 0:
            code = EXIT_CLEANUP_FAILED
    if plan is not None and moved is not None:
        prompt = _task_prompt(paths)
        evaluation_code = await asyncio.to_thread(_score_safely, plan, moved, paths, prompt, environ, log)
        if code == 0 and evaluation_code != 0:
            code = evaluation_code
    return code


def _score_safely(plan: EvaluationPlan, moved: Transfer, paths: RolloutPaths, prompt: str | None,
                  environ: Mapping[str, str], log: LifecycleLog) -> int:
    try:
        return score(plan, moved, paths, prompt, environ, log)
    except Exception as error:  # the evaluator must never take the cleanup bookkeeping down
        log(f"evaluation failed: {type(error).__name__}: {error}")
        return 1


def _task_prompt(paths: RolloutPaths) -> str | None:
    try:
        import json

        value = json.loads(paths.assignment.read_bytes()).get("task_prompt")
        return str(value) if value else None
    except (OSError, ValueError, AttributeError):
        return None


async def _recover(request: RolloutLaunchRequest, settings: AwsSettings, run_child: ChildRunner, *,
                   session: AwsSession, fleet: FleetPoller, environ: Mapping[str, str], worker_id: str,
                   plan: EvaluationPlan | None, log: LifecycleLog, paths: RolloutPaths) -> int:
    """Reconnect to ``worker_id`` and resume the child there (never a replacement)."""
    clone = Clone(0)
    clone.instance_id = worker_id
    cleanup: list[str] = []
    moved: Transfer | None = None
    try:
        problem = await asyncio.to_thread(_claim, session, worker_id, request, clone)
        if problem is not None:
            log(f"cannot reconnect to {worker_id}: {problem}")
            return EXIT_NOT_RECONNECTABLE
        try:
            await _ready(session, fleet, clone, request, settings, log)
        except (WaitFailed, AdmissionFailed, TunnelError, CommandFailed, AwsCallError) as error:
            log(f"cannot reconnect to {worker_id}: {error}")
            return EXIT_NOT_RECONNECTABLE
        assert clone.tunnel is not None
        log(f"reconnected to {worker_id}; resuming rollout {request.rollout_id}")
        code = await run_child({BROKER_URL_ENV: clone.tunnel.url, BROKER_TOKEN_ENV: clone.token})
        log(f"child exited with code {code} (resumed on {worker_id})")
        for line in await finish_session(clone.tunnel.url, clone.token, paths, log, EVIDENCE):
            log(f"evidence/release: {line}")
        if plan is not None:
            moved = await transfer(plan, session, worker_id, request.batch_id, request.rollout_id, paths, log)
    finally:
        failed = await _terminate(session, clone, log)
        if failed:
            cleanup.append(failed)
    return await _conclude(code, plan, moved, cleanup, paths, environ, log)


def _claim(session: AwsSession, worker_id: str, request: RolloutLaunchRequest, clone: Clone) -> str | None:
    """Check the instance belongs to this rollout and read its broker token from user data."""
    try:
        found = call("DescribeInstances", lambda: session.ec2.describe_instances(InstanceIds=[worker_id]))
    except AwsCallError as error:
        return str(error)
    instances: list[dict[str, Any]] = [i for r in found.get("Reservations", []) for i in r.get("Instances", [])]
    if not instances:
        return "no such instance"
    instance = instances[0]
    labels = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
    if labels.get(BATCH_TAG) != request.batch_id or labels.get(ROLLOUT_TAG) != request.rollout_id:
        return f"{worker_id} is tagged {labels.get(BATCH_TAG)}/{labels.get(ROLLOUT_TAG)}, not this rollout"
    state = instance["State"]["Name"]
    if state != "running":
        return f"{worker_id} is {state}"
    try:
        attribute = call("DescribeInstanceAttribute", lambda: session.ec2.describe_instance_attribute(
            InstanceId=worker_id, Attribute="userData"))
    except AwsCallError as error:
        return str(error)
    config = config_from_user_data(str(attribute.get("UserData", {}).get("Value", "")))
    if config is None:
        return "its user data carries no autocad-bench configuration"
    clone.token = config.broker_token
    clone.number = config.clone
    return None
