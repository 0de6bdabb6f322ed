"""The backend conformance suite: the plugin contract as tests an author inherits.

Subclass :class:`BackendConformance` in a class named ``Test...`` and override the
fixtures below; pytest then runs every ``test_*`` method against your backend::

    class TestMyBackend(BackendConformance):
        @pytest.fixture
        def backend(self):
            return MyBackend()

        @pytest.fixture
        def valid_spec(self):
            return InfrastructureSpec(backend="my-backend", broker_version=..., settings={...})

What it proves, without running anything: the plugin registers with no stray or misspelled
hooks; ``validate_spec`` accepts the valid spec, reports located problems for bad ones and
never raises; ``preflight`` is read-only (``external_state`` is unchanged by it) and admits
at most what was asked; ``build_rollout_command`` keeps the child command and puts no
secret in argv or its environment; ``reap_batch`` is idempotent for a batch that never
launched.

What it proves by running rollouts through the backend (on by default; see
:mod:`autocad_bench.testing.lifecycle_checks` for every rule and its id): the lifecycle
command runs the kit's own child exactly once with the exact argv, an allowed environment
and a broker that answers ``/health``, and exits with the child's code; ``run_shared``
returns the child's code as an ``int``; a cancelled rollout (SIGTERM to its process
group, SIGKILL after the grace) stops in time and still cleans up; after a simulated
controller crash the recovery hooks find the worker and ``reap_batch`` removes exactly
this batch's leftovers, idempotently, and a second crashed rollout whose worker
``worker_status`` calls reconnectable is resumed through ``build_recovery_command`` on that
same worker (the resume child runs once, exactly, and its exit code is the command's).
After each of them no process of the rollout may be left and ``external_state`` and the
preflight capacity must be back where they were.

Every executed check is bounded (``conformance_options().check_timeout_s``) and needs only
``backend``, ``valid_spec`` (with live brokers, e.g. :mod:`autocad_bench.testing.fake_broker`)
and ``external_state``; the tests are plain synchronous functions, so they run under any
pytest configuration.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import pytest

from autocad_bench.errors import Problem
from autocad_bench.infrastructure.models import (
    AssignmentView,
    EvaluationArguments,
    InfrastructureSpec,
    PreflightReport,
    PreflightRequest,
    ReapReport,
    ReapRequest,
    RolloutCommand,
    RolloutLaunchRequest,
)
from autocad_bench.plugins import PluginHandle, PluginHost, PluginRegistry
from autocad_bench.testing.lifecycle_checks import (
    CONFORMANCE_SECRET,
    EXECUTED_CHECKS,
    SECRETS,
    ConformanceOptions,
    LifecycleProbe,
)
from autocad_bench.testing.process_watch import proc_available

__all__ = ["CONFORMANCE_SECRET", "EXECUTED_CHECKS", "BackendConformance", "ConformanceOptions"]


class BackendConformance:
    """Inherit this in a ``Test*`` class; override :meth:`backend`, :meth:`valid_spec` and
    (for any state outside ``tmp_path``) :meth:`external_state`.

    The executed checks run rollouts for real and fail with
    :class:`~autocad_bench.testing.lifecycle_checks.ContractViolation`, whose message names
    each broken rule; a backend that cannot run one of them here declares it, with a
    reason, in :meth:`conformance_options`.
    """

    # --- fixtures an author overrides ----------------------------------------------------

    @pytest.fixture
    def backend(self) -> object:
        """The plugin instance (or class) under test."""
        raise NotImplementedError("override the 'backend' fixture")

    @pytest.fixture
    def valid_spec(self) -> InfrastructureSpec:
        """A spec ``validate_spec`` must accept and ``preflight`` can run against."""
        raise NotImplementedError("override the 'valid_spec' fixture")

    @pytest.fixture
    def invalid_specs(self, valid_spec: InfrastructureSpec) -> list[InfrastructureSpec]:
        """Specs ``validate_spec`` must reject (default: an unknown flat field, junk settings)."""
        data = valid_spec.model_dump()
        return [
            InfrastructureSpec.model_validate({**data, "no_such_field_xyz": 1}),
            InfrastructureSpec.model_validate({**data, "settings": {"no_such_setting_xyz": [1, 2]}}),
        ]

    @pytest.fixture
    def external_state(self, tmp_path: Path) -> Callable[[], Hashable]:
        """A snapshot of everything outside the test process the backend may change.

        ``preflight`` must leave it unchanged, and it must be back to its value once a rollout
        ended (also after a cancel) and once a crashed batch was reaped: override it to cover
        your leases, worker records, VMs or instances. Default: the files under ``tmp_path``.
        """

        def snapshot() -> Hashable:
            return tuple(
                (str(p.relative_to(tmp_path)), hashlib.sha256(p.read_bytes()).hexdigest())
                for p in sorted(tmp_path.rglob("*")) if p.is_file()
            )

        return snapshot

    @pytest.fixture
    def secret_env(self, monkeypatch: pytest.MonkeyPatch) -> str:
        """Canary secrets in the environment: a child credential (which must never reach argv),
        an evaluation-only one and an unlisted one (which must never reach the child)."""
        for name, value in SECRETS.items():
            monkeypatch.setenv(name, value)
        return CONFORMANCE_SECRET

    @pytest.fixture
    def conformance_options(self) -> ConformanceOptions:
        """Bounds and declared exceptions of the executed checks (override to change them).

        The defaults run every executed check with the controller's cancel grace. A backend
        that cannot run one of them here returns ``ConformanceOptions(skip={"crash": "why"})``:
        that check is then reported as skipped with the reason, never as passed.
        """
        return ConformanceOptions()

    # --- helpers ---------------------------------------------------------------------------

    @pytest.fixture
    def handle(self, backend: object) -> PluginHandle:
        registry = PluginRegistry()
        registry.register("infrastructure", backend)
        name = str(getattr(backend, "name", ""))
        # Only the plugin under test: an installed copy of it must not count as a duplicate.
        host = PluginHost(registry=registry, environ={}, entry_point_source=lambda group: ())
        return host.infrastructure(name)

    @staticmethod
    def _launch_request(spec: InfrastructureSpec, tmp_path: Path) -> RolloutLaunchRequest:
        return RolloutLaunchRequest(
            batch_id="conformance-batch",
            rollout_id="conformance-rollout",
            attempt_id="conformance-attempt",
            task_id="conformance-task",
            spec=spec,
            child_command=("autocad-bench-pilot", "--rollout-dir", str(tmp_path / "r"), "--x", "a b"),
            output_dir=tmp_path / "r",
            log_path=tmp_path / "r.log",
            evaluation=EvaluationArguments(enabled=False, task_id="conformance-task"),
            child_environment_names=("AUTOCAD_BENCH_CONFORMANCE_SECRET",),
        )

    # --- the contract --------------------------------------------------------------------

    def test_registers_with_only_known_hooks(self, handle: PluginHandle) -> None:
        for hook in ("validate_spec", "preflight", "build_rollout_command", "run_shared", "reap_batch"):
            assert handle.implements(hook), f"backend does not implement {hook}"

    def test_valid_spec_has_no_problems(self, handle: PluginHandle, valid_spec: InfrastructureSpec) -> None:
        problems = handle.call("validate_spec", spec=valid_spec, location="cfg.json: $.infrastructure")
        assert problems == []

    def test_invalid_specs_are_reported_with_locations(
        self, handle: PluginHandle, invalid_specs: list[InfrastructureSpec]
    ) -> None:
        for spec in invalid_specs:
            problems = handle.call("validate_spec", spec=spec, location="cfg.json: $.infrastructure")
            assert problems, f"validate_spec accepted an invalid spec: {spec!r}"
            for problem in problems:
                assert isinstance(problem, Problem)
                assert problem.location.startswith("cfg.json: $.infrastructure"), problem

    @pytest.mark.parametrize("junk", [None, 0, "x", [], [{}], {"a": {"b": None}}, 1e308])
    def test_validate_spec_never_raises_on_junk_settings(
        self, handle: PluginHandle, valid_spec: InfrastructureSpec, junk: Any
    ) -> None:
        data = valid_spec.model_dump()
        spec = InfrastructureSpec.model_validate({**data, "settings": {"k": junk}})
        result = handle.call("validate_spec", spec=spec, location="$")
        assert isinstance(result, list)

    def test_preflight_is_read_only_and_bounded(
        self,
        handle: PluginHandle,
        valid_spec: InfrastructureSpec,
        external_state: Callable[[], Hashable],
    ) -> None:
        request = PreflightRequest(
            batch_id="conformance-batch",
            spec=valid_spec,
            assignments=tuple(
                AssignmentView(rollout_id=f"r{i}", task_id="t", provider="scripted", model=f"m{i}")
                for i in range(3)
            ),
            max_concurrency=2,
        )
        before = external_state()
        first = handle.call("preflight", request=request)
        second = handle.call("preflight", request=request)
        assert external_state() == before, "preflight changed external state"
        for report in (first, second):
            assert isinstance(report, PreflightReport)
            assert 0 <= report.admitted_wave <= 2
            assert report.checks, "preflight must report at least one check"

    @pytest.fixture
    def lifecycle_probe(self, handle: PluginHandle, valid_spec: InfrastructureSpec,
                        external_state: Callable[[], Hashable], conformance_options: ConformanceOptions,
                        secret_env: str, tmp_path_factory: pytest.TempPathFactory) -> LifecycleProbe:
        """The runner of the executed checks; its files live outside ``tmp_path``."""
        return LifecycleProbe(handle, valid_spec, external_state, tmp_path_factory.mktemp("conformance-kit"),
                              conformance_options)

    @staticmethod
    def _execute(probe: LifecycleProbe, check: str) -> None:
        reason = probe.options.skip.get(check)
        if reason is not None:
            pytest.skip(f"executed check '{check}' declared not runnable here: {reason}")
        if not proc_available():
            pytest.skip(f"executed check '{check}' follows the rollout's processes through /proc (Linux only)")
        probe.run(check)
        for part, why in probe.not_exercised.items():
            warnings.warn(f"executed check '{check}' passed without exercising its {part} path: {why}",
                          UserWarning, stacklevel=2)

    def test_rollout_command_keeps_the_child_and_hides_secrets(
        self, handle: PluginHandle, valid_spec: InfrastructureSpec, tmp_path: Path, secret_env: str
    ) -> None:
        request = self._launch_request(valid_spec, tmp_path)
        command = handle.call("build_rollout_command", request=request)
        assert isinstance(command, RolloutCommand)
        argv, child = list(command.argv), list(request.child_command)
        assert any(argv[i:i + len(child)] == child for i in range(len(argv))) or any(
            all(part in arg for part in child) for arg in argv
        ), "the child command must appear unchanged in the lifecycle command"
        for value in SECRETS.values():
            assert all(value not in arg for arg in argv), "a secret value reached argv"
            assert all(value not in v for v in command.environment.values()), "a secret value reached environment"

    def test_lifecycle_runs_the_exact_child_once_and_releases(self, lifecycle_probe: LifecycleProbe) -> None:
        """Executed: provision, child (argv, environment, /health, exit code 7), release."""
        self._execute(lifecycle_probe, "lifecycle")

    def test_run_shared_returns_the_child_exit_code(self, lifecycle_probe: LifecycleProbe) -> None:
        """Executed: shared mode runs the child once and returns its code (5) as an int."""
        self._execute(lifecycle_probe, "shared")

    def test_cancel_stops_within_grace_and_still_cleans_up(self, lifecycle_probe: LifecycleProbe) -> None:
        """Executed: SIGTERM to the command's group mid-rollout, SIGKILL after the grace."""
        self._execute(lifecycle_probe, "cancel")

    def test_reap_after_a_crash_removes_exactly_its_leftovers(self, lifecycle_probe: LifecycleProbe) -> None:
        """Executed: SIGKILL the whole rollout, then recovery hooks, scoped and idempotent reap."""
        self._execute(lifecycle_probe, "crash")

    def test_lifecycle_evaluates_when_the_batch_enables_evaluation(self, lifecycle_probe: LifecycleProbe) -> None:
        """Executed: evaluation enabled (and bound to fail): it runs after the child and fails the rollout."""
        self._execute(lifecycle_probe, "evaluation")

    def test_reap_is_idempotent(self, handle: PluginHandle, valid_spec: InfrastructureSpec, tmp_path: Path) -> None:
        request = ReapRequest(batch_id="conformance-never-launched", spec=valid_spec, output_dir=tmp_path)
        first = handle.call("reap_batch", request=request)
        second = handle.call("reap_batch", request=request)
        assert isinstance(first, ReapReport) and isinstance(second, ReapReport)
        assert second.cleaned == () and second.errors == ()
