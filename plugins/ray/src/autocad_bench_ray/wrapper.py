"""Subprocess mode and recovery: ``python -m autocad_bench_ray.wrapper launch SPEC -- CHILD...`` and
``... recover SPEC``.

``launch`` runs :func:`autocad_bench_ray.lifecycle.run_rollout` with ``CHILD...`` (exactly the
request's child command) as a subprocess. ``recover`` re-attaches to the desktop actor a
dead controller left (see :mod:`autocad_bench_ray.recovery`): it waits until the previous
driver's heartbeats stopped, takes the URL and token from the actor and runs the exact child
command against it; when the actor is gone it reports what the rollout wrote (exit 73 when
it wrote no ``result.json``). SIGTERM and SIGINT stop the child within a bound and still tear
the desktop down. SPEC is JSON without secrets (the request, the settings, the cluster address).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from autocad_bench.controller.summary import read_scores
from autocad_bench.harness.layout import RolloutPaths
from autocad_bench.harness.records import RolloutResult
from autocad_bench.infrastructure import RolloutLaunchRequest
from autocad_bench.infrastructure.wrapper import child_environment, run_child_process, run_terminable
from autocad_bench_ray.bounds import STATUS_CALL_S
from autocad_bench_ray.connection import connect, prepare_environment
from autocad_bench_ray.lifecycle import RayLog, find_actor, parse_worker_id, run_on, run_rollout, teardown_actor
from autocad_bench_ray.settings import RaySettings
from autocad_bench_xvfb.bounds import CHILD_STOP_TIMEOUT_S
from autocad_bench_xvfb.evaluation import EvaluationUnavailable, resolve_evaluator
from autocad_bench_xvfb.lifecycle import EXIT_EVALUATION_UNAVAILABLE, EXIT_NOT_RECONNECTABLE, with_evaluation


class WrapperSpec(BaseModel):
    """The wrapper's single argument (JSON)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request: RolloutLaunchRequest
    settings: RaySettings
    address: str
    worker_id: str | None = None


def launch(spec: WrapperSpec, child: Sequence[str], environ: Mapping[str, str]) -> int:
    """``launch SPEC -- CHILD...``; exits with an error when ``child`` is not the request's child command.

    ``environ`` is this process's environment as the controller passed it (before Ray added its own).
    """
    request = spec.request
    if tuple(child) != request.child_command:
        raise SystemExit("autocad_bench_ray.wrapper: the command after -- differs from the request's child_command")
    connect(spec.address)
    return run_rollout(
        request, spec.settings,
        lambda broker: run_child_process(child, child_environment(environ, request, broker), CHILD_STOP_TIMEOUT_S),
        environ)


def recover(spec: WrapperSpec, environ: Mapping[str, str]) -> int:
    """``recover SPEC``: re-attach to the rollout's desktop actor, or report what the rollout wrote."""
    import ray

    request = spec.request
    log = RayLog(request.log_path)
    try:
        evaluator = resolve_evaluator(request, environ)
    except EvaluationUnavailable as error:
        log.line(f"rollout {request.rollout_id} not recovered: {error}")
        return EXIT_EVALUATION_UNAVAILABLE
    connect(spec.address)
    namespace, name = parse_worker_id(spec.worker_id or "")
    settings = spec.settings
    actor = find_actor(namespace, name)
    if actor is not None:
        # Another driver (a wrapper that survived its controller) still heartbeats: let it finish.
        while True:
            status = ray.get(actor.status.remote(), timeout=STATUS_CALL_S)
            since = status.seconds_since_heartbeat
            if since is None or since > 2 * settings.heartbeat_s or status.state != "ready":
                break
            time.sleep(settings.heartbeat_s)
            if find_actor(namespace, name) is None:
                actor = None
                break
    if actor is not None:
        handoff = ray.get(actor.handoff.remote(), timeout=STATUS_CALL_S)
        if handoff is not None and _result(request) is None:
            log.line(f"worker {spec.worker_id}: re-attached to desktop {handoff.worker_id} on node "
                     f"{handoff.node.node_id[:12]} at {handoff.url}; continuing the rollout")
            return run_on(actor, handoff, namespace, name,
                          lambda broker: run_child_process(request.child_command,
                                                           child_environment(environ, request, broker),
                                                           CHILD_STOP_TIMEOUT_S),
                          evaluator, log, settings, request.output_dir)
        teardown_actor(actor, namespace, name, log)
    result = _result(request)
    if result is None:
        log.line(f"rollout {request.rollout_id} cannot continue on worker {spec.worker_id}: its desktop is gone and "
                 "it wrote no result.json")
        return EXIT_NOT_RECONNECTABLE
    code = 0 if result.status == "completed" else (result.exit_code or 1)
    log.line(f"rollout {request.rollout_id} finished without its controller ({result.status}); exit code {code}")
    if evaluator is not None and read_scores(request.output_dir)[0] is not None:
        evaluator = None
    return with_evaluation(code, evaluator, log)


def _result(request: RolloutLaunchRequest) -> RolloutResult | None:
    try:
        return RolloutResult.model_validate_json(RolloutPaths(request.output_dir).result.read_bytes())
    except (OSError, ValueError):
        return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m autocad_bench_ray.wrapper``; returns the exit code (2: usage error)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[0] not in ("launch", "recover"):
        print("usage: python -m autocad_bench_ray.wrapper launch SPEC -- CHILD... | recover SPEC", file=sys.stderr)
        return 2
    spec = WrapperSpec.model_validate_json(args[1])
    environ = dict(os.environ)  # what the controller passed; Ray adds variables of its own to os.environ
    # Before Ray's first import: its switches are read when it is imported.
    prepare_environment(local=spec.settings.local_cluster is not None or spec.address.startswith("127."))
    if args[0] == "recover":
        return run_terminable(lambda: recover(spec, environ))
    if len(args) < 4 or args[2] != "--":
        print("usage: python -m autocad_bench_ray.wrapper launch SPEC -- CHILD...", file=sys.stderr)
        return 2
    return run_terminable(lambda: launch(spec, args[3:], environ))


if __name__ == "__main__":
    sys.exit(main())
