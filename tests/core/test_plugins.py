"""The plugin host: discovery, lazy loading, registration checks, routing, tracing."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from typing import Any

import pytest

from autocad_bench import InfrastructurePlugin, ModelProvider, Observer, hookimpl
from autocad_bench.errors import PluginError, RecoveryNotSupportedError
from autocad_bench.events import RolloutStateEvent
from autocad_bench.infrastructure import (
    CheckResult,
    InfrastructureRecoveryPlugin,
    InfrastructureSpec,
    PreflightReport,
    PreflightRequest,
    ReapReport,
    ReapRequest,
    RolloutCommand,
    RolloutLaunchRequest,
    SharedChild,
)
from autocad_bench.plugins import PluginHost, PluginRegistry


class Minimal(InfrastructurePlugin):
    name = "minimal"

    def preflight(self, request: PreflightRequest) -> PreflightReport:
        return PreflightReport(checks=(CheckResult(name="ok", passed=True, reason="fine"),),
                               admitted_wave=request.max_concurrency)

    def build_rollout_command(self, request: RolloutLaunchRequest) -> RolloutCommand:
        return RolloutCommand(argv=request.child_command)

    def run_shared(self, request: RolloutLaunchRequest, child: SharedChild) -> int:
        return 0

    def reap_batch(self, request: ReapRequest) -> ReapReport:
        return ReapReport()


def host_with(*plugins: tuple[str, object], environ: dict[str, str] | None = None,
              entry_points: list[EntryPoint] | None = None, **kwargs: Any) -> PluginHost:
    registry = PluginRegistry()
    for kind, plugin in plugins:
        registry.register(kind, plugin)  # type: ignore[arg-type]
    eps = entry_points or []
    return PluginHost(registry=registry, environ=environ or {},
                      entry_point_source=lambda group: [e for e in eps if e.group == group], **kwargs)


def spec(**kw: Any) -> InfrastructureSpec:
    return InfrastructureSpec.model_validate({"backend": "minimal", "broker_version": "x", **kw})


def test_registered_backend_is_routed_alone() -> None:
    class Other(Minimal):
        name = "other"

        def preflight(self, request: PreflightRequest) -> PreflightReport:
            raise AssertionError("must not be called")

    host = host_with(("infrastructure", Minimal()), ("infrastructure", Other()))
    host.infrastructure("other")
    handle = host.infrastructure("minimal")
    report = handle.call("preflight", request=PreflightRequest(
        batch_id="b", spec=spec(), assignments=(), max_concurrency=3))
    assert report.admitted_wave == 3


def test_unknown_backend_lists_installed_and_extra() -> None:
    host = host_with(("infrastructure", Minimal()))
    with pytest.raises(PluginError) as info:
        host.infrastructure("aws")
    assert str(info.value) == "backend 'aws' is not installed: pip install \"autocad-bench[aws]\" (installed: minimal)"


def test_unknown_provider_without_extra() -> None:
    with pytest.raises(PluginError) as info:
        host_with().provider("acme")
    assert str(info.value) == "provider 'acme' is not installed (installed: none)"


def test_duplicate_registration_fails() -> None:
    registry = PluginRegistry()
    registry.register("infrastructure", Minimal())
    with pytest.raises(PluginError, match="backend 'minimal' is already registered in this process"):
        registry.register("infrastructure", Minimal())


def test_name_both_registered_and_installed_fails() -> None:
    ep = EntryPoint("minimal", "tests_nowhere:Plugin", "autocad_bench.infrastructure")
    host = host_with(("infrastructure", Minimal()), entry_points=[ep])
    with pytest.raises(PluginError, match="both registered in-process and installed"):
        host.infrastructure("minimal")


def test_two_entry_points_with_one_name_fail() -> None:
    eps = [EntryPoint("dup", "pkg_a:Plugin", "autocad_bench.infrastructure"),
           EntryPoint("dup", "pkg_b:Plugin", "autocad_bench.infrastructure")]
    with pytest.raises(PluginError, match="installed more than once"):
        host_with(entry_points=eps).infrastructure("dup")


def test_broken_entry_point_loads_only_when_selected() -> None:
    eps = [EntryPoint("broken", "module_that_does_not_exist_x:Plugin", "autocad_bench.infrastructure"),
           EntryPoint("scripted", "autocad_bench.providers.scripted:ScriptedProvider", "autocad_bench.providers")]
    host = host_with(("infrastructure", Minimal()), entry_points=eps)
    assert host.infrastructure("minimal").name == "minimal"
    assert host.provider("scripted").name == "scripted"
    assert host.installed_names("infrastructure") == ["broken", "minimal"]
    with pytest.raises(PluginError, match=r"backend 'broken' .* failed to load: ModuleNotFoundError"):
        host.infrastructure("broken")


def test_allow_list_blocks_other_entry_points() -> None:
    eps = [EntryPoint("scripted", "autocad_bench.providers.scripted:ScriptedProvider", "autocad_bench.providers")]
    host = host_with(entry_points=eps, environ={"AUTOCAD_BENCH_LOAD_PLUGINS": "openai"})
    assert host.installed_names("providers") == []
    with pytest.raises(PluginError, match="installed but not allowed by AUTOCAD_BENCH_LOAD_PLUGINS=openai"):
        host.provider("scripted")
    allowed = host_with(entry_points=eps, environ={"AUTOCAD_BENCH_LOAD_PLUGINS": "openai, scripted"})
    assert allowed.provider("scripted").name == "scripted"


def test_entry_point_name_must_match_plugin_name() -> None:
    eps = [EntryPoint("renamed", "autocad_bench.providers.scripted:ScriptedProvider", "autocad_bench.providers")]
    with pytest.raises(PluginError, match="loads a plugin whose name is 'scripted'"):
        host_with(entry_points=eps).provider("renamed")


def test_misspelled_hook_with_marker_is_rejected_at_registration() -> None:
    class Typo:  # a plain object, so only pluggy's own check stands between it and a batch
        name = "typo"

        @hookimpl
        def reap_batches(self, request: ReapRequest) -> ReapReport:
            return ReapReport()

    with pytest.raises(PluginError, match="unknown hook 'reap_batches'"):
        host_with(("infrastructure", Typo())).infrastructure("typo")


def test_misspelled_method_in_subclass_fails_at_class_definition() -> None:
    with pytest.raises(PluginError, match="did you mean 'validate_spec'"):
        class Typo(Minimal):
            name = "typo"

            def validate_specs(self, spec: InfrastructureSpec, location: str) -> list[Any]:
                return []


def test_misspelled_argument_is_rejected_at_registration() -> None:
    class BadArg(Minimal):
        name = "badarg"

        def reap_batch(self, reqest: ReapRequest) -> ReapReport:  # type: ignore[override]
            return ReapReport()

    with pytest.raises(PluginError, match="reqest"):
        host_with(("infrastructure", BadArg())).infrastructure("badarg")


def test_plain_object_with_markers_is_a_backend_when_complete() -> None:
    class Plain:
        name = "plain"

        @hookimpl
        def validate_spec(self, spec: InfrastructureSpec, location: str) -> list[Any]:
            return []

    with pytest.raises(PluginError, match="backend 'plain' does not implement preflight"):
        host_with(("infrastructure", Plain())).infrastructure("plain")


def test_backend_without_recovery_fails_resume_explicitly() -> None:
    handle = host_with(("infrastructure", Minimal())).infrastructure("minimal")
    assert not handle.supports_recovery
    with pytest.raises(RecoveryNotSupportedError, match="backend 'minimal' does not implement the recovery protocol"):
        handle.require_recovery()


def test_recovery_backend_supports_resume() -> None:
    class Recoverable(InfrastructureRecoveryPlugin, Minimal):
        name = "recoverable"

        def create_recovery_session(self, spec: InfrastructureSpec) -> Any:
            return object()

        def list_active_workers(self, session: Any, request: Any) -> dict[str, str]:
            return {}

        def worker_status(self, session: Any, worker_id: str) -> Any:
            return None

        def build_recovery_command(self, request: Any) -> RolloutCommand:
            return RolloutCommand(argv=("x",))

        def terminate_worker(self, session: Any, worker_id: str) -> bool:
            return True

    handle = host_with(("infrastructure", Recoverable())).infrastructure("recoverable")
    assert handle.supports_recovery
    handle.require_recovery()


def test_default_validate_spec_locates_unknown_fields_and_settings() -> None:
    handle = host_with(("infrastructure", Minimal())).infrastructure("minimal")
    problems = handle.call("validate_spec", spec=spec(image_id="ami-1", settings={"a": 1}),
                          location="cfg.json: $.infrastructure")
    assert [str(p) for p in problems] == [
        "cfg.json: $.infrastructure.image_id: unknown field for backend 'minimal'",
        "cfg.json: $.infrastructure.settings: backend 'minimal' takes no settings",
    ]


def test_observers_all_receive_events_and_a_failing_one_is_isolated() -> None:
    seen: list[str] = []

    class Good(Observer):
        name = "good"

        def rollout_state_changed(self, event: RolloutStateEvent) -> None:
            seen.append(event.state)

    class Bad(Observer):
        name = "bad"

        def rollout_state_changed(self, event: RolloutStateEvent) -> None:
            raise RuntimeError("boom")

    class AlsoGood(Observer):
        name = "also-good"

        def rollout_state_changed(self, event: RolloutStateEvent) -> None:
            seen.append("again:" + event.state)

    host = host_with(("observers", Good()), ("observers", Bad()), ("observers", AlsoGood()))
    import datetime as dt

    host.notify("rollout_state_changed", event=RolloutStateEvent(
        batch_id="b", rollout_id="r", previous=None, state="queued", at=dt.datetime.now(dt.UTC)))
    assert sorted(seen) == ["again:queued", "queued"]


def test_tracing_writes_hook_calls_without_secret_values() -> None:
    from autocad_bench.providers.models import Credentials

    lines: list[str] = []
    eps = [EntryPoint("scripted", "autocad_bench.providers.scripted:ScriptedProvider", "autocad_bench.providers")]
    host = host_with(entry_points=eps, environ={"AUTOCAD_BENCH_TRACE_PLUGINS": "1"},
                     trace_writer=lines.append)
    handle = host.provider("scripted")
    handle.call("check_model_catalog", models=[],
                credentials=Credentials({"OPENAI_API_KEY": "sk-very-secret-value"}))
    text = "".join(lines)
    assert "check_model_catalog" in text
    assert "OPENAI_API_KEY" in text
    assert "sk-very-secret-value" not in text


def test_provider_base_requires_open_session() -> None:
    class NoSession(ModelProvider):
        name = "nosession"

    with pytest.raises(PluginError, match="cannot be instantiated"):
        host_with(("providers", NoSession)).provider("nosession")


def _state_event(state: str) -> RolloutStateEvent:
    import datetime as dt

    return RolloutStateEvent(batch_id="b", rollout_id="r", previous=None, state=state, at=dt.datetime.now(dt.UTC))


def test_an_observer_can_join_a_running_host_for_a_while() -> None:
    seen: list[str] = []

    class Display(Observer):
        name = "display"

        def rollout_state_changed(self, event: RolloutStateEvent) -> None:
            seen.append(event.state)

    host = host_with()
    display = Display()
    host.notify("rollout_state_changed", event=_state_event("queued"))
    with host.observing(display, "display"):
        host.notify("rollout_state_changed", event=_state_event("running"))
    host.notify("rollout_state_changed", event=_state_event("done"))
    assert seen == ["running"]
    with pytest.raises(RuntimeError), host.observing(display, "display"):
        raise RuntimeError("the batch failed")
    host.notify("rollout_state_changed", event=_state_event("failed"))
    assert seen == ["running"], "removed however the block exits"


def test_a_temporary_observer_is_validated_like_any_plugin() -> None:
    class Misspelled:
        name = "typo"

        @hookimpl
        def rollout_state_chnged(self, event: RolloutStateEvent) -> None: ...

    class NotAnObserver:
        name = "sneaky"

        @hookimpl
        def validate_spec(self, spec: Any, location: str) -> list[str]:
            return []

    host = host_with()
    for plugin, message in ((Misspelled(), "invalid"), (NotAnObserver(), "non-observer hooks: validate_spec")):
        with pytest.raises(PluginError, match=message), host.observing(plugin, plugin.name):
            pass
    seen: list[str] = []

    class Fine(Observer):
        name = "typo"

        def rollout_state_changed(self, event: RolloutStateEvent) -> None:
            seen.append(event.state)

    # Nothing of the refused ones stayed registered: their names are free again.
    with host.observing(Fine(), "typo"), host.observing(Observer(), "sneaky"):
        host.notify("rollout_state_changed", event=_state_event("running"))
    assert seen == ["running"]


def test_the_capabilities_listing_says_which_backends_recover_and_which_modes_providers_speak() -> None:
    from importlib.metadata import EntryPoint as Ep

    from autocad_bench.cli.main import _capabilities
    from autocad_bench.providers.scripted import ScriptedProvider

    class Native(ScriptedProvider):
        name = "native-speaker"
        tool_modes = frozenset({"function", "native"})

    broken = Ep(name="broken", value="no_such_module_xyz:Plugin", group="autocad_bench.infrastructure")
    host = host_with(("infrastructure", Minimal()), ("providers", Native()), entry_points=[broken])
    assert _capabilities(host, "infrastructure", "minimal") == {"name": "minimal", "recovery": False}
    assert _capabilities(host, "providers", "native-speaker") == {"name": "native-speaker",
                                                                  "tool_modes": ["function", "native"]}
    failed = _capabilities(host, "infrastructure", "broken")
    assert failed["name"] == "broken" and "no_such_module_xyz" in failed["error"]


def test_the_plugins_command_lists_capabilities_only_when_asked() -> None:
    import json
    import subprocess

    plain = json.loads(subprocess.run(["autocad-bench", "plugins"], capture_output=True, text=True,
                                      check=True, timeout=60).stdout)
    assert "local-xvfb" in plain["infrastructure"] and "scripted" in plain["providers"]
    assert plain["task_packs"] == ["standard"]
    rich = json.loads(subprocess.run(["autocad-bench", "plugins", "--capabilities"], capture_output=True, text=True,
                                     check=True, timeout=120).stdout)
    assert {"name": "local-xvfb", "recovery": True} in rich["infrastructure"]
    assert {"name": "scripted", "tool_modes": ["function"]} in rich["providers"]
    assert {"name": "anthropic", "tool_modes": ["function", "native"]} in rich["providers"]
