"""Hook specifications of autocad-bench (pluggy project name ``autocad_bench``).

Four kinds of plugins implement these hooks:

* **infrastructure backends** (entry-point group ``autocad_bench.infrastructure``) implement
  the lifecycle hooks and, optionally, the recovery hooks;
* **model providers** (group ``autocad_bench.providers``) implement the provider hooks;
* **evaluators** (group ``autocad_bench.evaluators``) score drawings and check the gold
  cache; core calls them by name and never imports one;
* **observers** (group ``autocad_bench.observers``) implement any of the observer hooks.

The hook names of each group (``INFRASTRUCTURE_HOOKS`` and so on, at the end of the module)
are collected from the specifications as they are defined.

Lifecycle, recovery, provider and evaluator hooks are *routed*: the controller calls them on the one
plugin a configuration selects, and each returns a single value (``firstresult``). Observer
hooks are *broadcast* to every registered implementation and return nothing.

pluggy validates implementations against these signatures at registration: an
implementation may accept a subset of the arguments, but an argument name that is not in
the specification, or a hook name that matches no specification, is an error before any
batch starts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import pluggy

if TYPE_CHECKING:
    import click

    from autocad_bench.errors import Problem
    from autocad_bench.evaluators import DrawingEvaluationRequest, GoldCacheCheckRequest
    from autocad_bench.events import (
        BatchEvent,
        ModelTurnEvent,
        RolloutStateEvent,
    )
    from autocad_bench.infrastructure.models import (
        ActiveWorkersRequest,
        InfrastructureSpec,
        PreflightReport,
        PreflightRequest,
        ReapReport,
        ReapRequest,
        RecoveryLaunchRequest,
        RolloutCommand,
        RolloutLaunchRequest,
        SharedChild,
        TracePublisherRequest,
        WorkerStatus,
    )
    from autocad_bench.infrastructure.publisher import TracePublisher
    from autocad_bench.providers.models import (
        CatalogEntry,
        Credentials,
        ModelSpec,
        SessionRequest,
    )
    from autocad_bench.providers.session import ProviderSession

PROJECT_NAME = "autocad_bench"

hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
_marker = pluggy.HookspecMarker(PROJECT_NAME)

# Hook names by group, filled by the decorators below in definition order: the lists are
# derived from the specifications themselves, so a new hook cannot be forgotten in them.
_GROUPS: dict[str, list[str]] = {
    "infrastructure": [], "recovery": [], "providers": [], "evaluators": [], "observers": []}

_F = TypeVar("_F", bound=Callable[..., Any])


def _spec(group: str, *, broadcast: bool = False) -> Callable[[_F], _F]:
    """Mark a hook specification and file it under ``group`` (routed unless ``broadcast``)."""

    def mark(function: _F) -> _F:
        _GROUPS[group].append(function.__name__)
        return _marker(firstresult=not broadcast)(function)

    return mark


# --- infrastructure lifecycle (called in this order) -------------------------------------


@_spec("infrastructure")
def validate_spec(spec: InfrastructureSpec, location: str) -> list[Problem]:  # type: ignore[empty-body]
    """Check the ``infrastructure`` configuration without touching any external system.

    Called first, once per batch. Validate ``spec.settings`` and any flat backend fields
    (``spec.backend_fields()``) and return every problem found (an empty list when valid).
    ``location`` is the file and JSON path of the ``infrastructure`` object; prefix each
    :class:`~autocad_bench.errors.Problem` location with it. Must not raise for bad input.
    """


@_spec("infrastructure")
def preflight(request: PreflightRequest) -> PreflightReport:  # type: ignore[empty-body]
    """Run read-only capacity and worker-image checks; never create or change anything.

    Called after configuration, credential and broker-version checks pass. Return one
    :class:`~autocad_bench.infrastructure.models.CheckResult` per check and the number of
    sandboxes the batch may run at once (``admitted_wave``, at most
    ``request.max_concurrency``). A failed check blocks execute mode.
    """


@_spec("infrastructure")
def build_rollout_command(request: RolloutLaunchRequest) -> RolloutCommand:  # type: ignore[empty-body]
    """Wrap ``request.child_command`` in one command that owns the worker lifecycle.

    Called once per rollout in subprocess mode. The returned command must launch an
    isolated desktop, make its broker reachable, run the exact child command with the
    broker URL and token in the child's environment, evaluate, release, clean up in a
    ``finally``, and exit with the child's exit code (nonzero when evaluation failed).
    """


@_spec("infrastructure")
def run_shared(request: RolloutLaunchRequest, child: SharedChild) -> int:  # type: ignore[empty-body]
    """Run the same lifecycle in-process and return the exit code subprocess mode would give.

    Called once per rollout in shared mode, on a worker thread of its own; create your own
    event loop (``asyncio.run``) if you need one and call ``await child.run(environ)`` where
    subprocess mode would exec the child command.
    """


@_spec("infrastructure")
def create_trace_publisher(request: TracePublisherRequest) -> TracePublisher | None:
    """Return a publisher that mirrors live artifacts, or ``None`` if this backend has none.

    Called once per batch when ``AUTOCAD_BENCH_TRACE_DESTINATION`` is set.
    """


@_spec("infrastructure")
def reap_batch(request: ReapRequest) -> ReapReport:  # type: ignore[empty-body]
    """Best-effort, idempotent cleanup of everything the batch may have left behind.

    Called once at batch exit (also after failures and interrupts) and by the operator
    after a crashed controller. Calling it twice must be harmless.
    """


# --- interrupted-run recovery (optional second protocol) ---------------------------------


@_spec("recovery")
def validate_recovery_spec(spec: InfrastructureSpec, location: str) -> list[Problem]:  # type: ignore[empty-body]
    """Validate reconnect-only settings; return every problem (empty list when valid)."""


@_spec("recovery")
def create_recovery_session(spec: InfrastructureSpec) -> Any:
    """Create the recovery control-plane client passed as ``session`` to the hooks below."""


@_spec("recovery")
def list_active_workers(session: Any, request: ActiveWorkersRequest) -> dict[str, str]:  # type: ignore[empty-body]
    """Map rollout ids of the batch to backend worker ids (read-only)."""


@_spec("recovery")
def worker_id_from_log(log_text: str) -> str | None:
    """Find a worker id in a rollout log of a run that predates durable worker indexing."""


@_spec("recovery")
def worker_status(session: Any, worker_id: str) -> WorkerStatus:  # type: ignore[empty-body]
    """Tell whether a discovered worker exists and can be reconnected (read-only)."""


@_spec("recovery")
def build_recovery_command(request: RecoveryLaunchRequest) -> RolloutCommand:  # type: ignore[empty-body]
    """Wrap the neutral resume command so it reconnects to ``request.worker_id``."""


@_spec("recovery")
def terminate_worker(session: Any, worker_id: str) -> bool:  # type: ignore[empty-body]
    """Idempotently release a completed or exhausted worker; return ``True`` once it is gone."""


# --- model providers ---------------------------------------------------------------------


@_spec("providers")
def validate_model_spec(model: ModelSpec, location: str) -> list[Problem]:  # type: ignore[empty-body]
    """Check a rollout's model id and provider options offline; return every problem."""


@_spec("providers")
def credential_names(model: ModelSpec) -> list[str]:  # type: ignore[empty-body]
    """Names of the environment variables this model needs (names only, never values)."""


@_spec("providers")
def check_model_catalog(models: list[ModelSpec], credentials: Credentials) -> list[CatalogEntry]:  # type: ignore[empty-body]
    """Look the models up in the provider's live catalog (read-only, may use the network)."""


@_spec("providers")
def open_session(request: SessionRequest, credentials: Credentials) -> ProviderSession:  # type: ignore[empty-body]
    """Create the per-rollout session that turns observations into action turns.

    When ``request.resume_state`` is set, restore the model-visible state it describes.
    """


# --- evaluators ------------------------------------------------------------------------


@_spec("evaluators")
def evaluate_drawing(request: DrawingEvaluationRequest) -> int:  # type: ignore[empty-body]
    """Score one rollout's checkpointed drawing against the gold cache; return an exit code.

    Called by the trusted evaluation stage (:func:`autocad_bench.evaluation.evaluate_rollout`)
    on the machine that holds the drawing, after the child exited and before cleanup. Write
    the verdict and ``status.json`` into ``request.output_dir``. Return 0 when the evaluation
    itself worked (a missing or unreadable drawing is a valid verdict: score 0), nonzero when
    it could not be made (broken gold cache, failing judge). Must not raise for those.
    """


@_spec("evaluators")
def check_gold_cache(request: GoldCacheCheckRequest) -> list[str]:  # type: ignore[empty-body]
    """Verify the gold-cache entries a batch needs (admission step 5); one message per problem.

    Read-only. An empty list means every entry of ``request.task_ids`` is present, intact and
    built by ``request.evaluator_version``.
    """


@_spec("evaluators")
def evaluator_commands() -> list[click.Command]:  # type: ignore[empty-body]
    """Extra ``autocad-bench`` subcommands this evaluator offers (for example ``tasks``)."""


# --- observers (broadcast to every implementation) ---------------------------------------


@_spec("observers", broadcast=True)
def batch_started(event: BatchEvent) -> None:
    """A batch passed admission and is about to start its first sandbox."""


@_spec("observers", broadcast=True)
def batch_finished(event: BatchEvent) -> None:
    """Every rollout of the batch ended and cleanup ran."""


@_spec("observers", broadcast=True)
def rollout_state_changed(event: RolloutStateEvent) -> None:
    """A rollout moved between queued, starting, running, evaluating, done and failed."""


@_spec("observers", broadcast=True)
def model_turn_recorded(event: ModelTurnEvent) -> None:
    """A model turn (request, response, usage, validation outcome) was written to the trace."""


INFRASTRUCTURE_HOOKS: tuple[str, ...] = tuple(_GROUPS["infrastructure"])
RECOVERY_HOOKS: tuple[str, ...] = tuple(_GROUPS["recovery"])
PROVIDER_HOOKS: tuple[str, ...] = tuple(_GROUPS["providers"])
EVALUATOR_HOOKS: tuple[str, ...] = tuple(_GROUPS["evaluators"])
OBSERVER_HOOKS: tuple[str, ...] = tuple(_GROUPS["observers"])
