"""Settings validation and the read-only preflight of local-xvfb (no display needed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autocad_bench.infrastructure import AssignmentView, InfrastructureSpec, PreflightRequest
from autocad_bench_xvfb.plugin import LocalXvfbPlugin
from autocad_bench_xvfb.preflight import INSTALL_HINT
from autocad_bench_xvfb.settings import LocalXvfbSettings

from .conftest import VERSION, fake_broker, spec


def _request(infrastructure: InfrastructureSpec, assignments: int = 3, max_concurrency: int = 2) -> PreflightRequest:
    return PreflightRequest(
        batch_id="b", spec=infrastructure, max_concurrency=max_concurrency,
        assignments=tuple(AssignmentView(rollout_id=f"r{i}", task_id="t", provider="scripted", model=f"m{i}")
                          for i in range(assignments)),
    )


def _checks(report: object) -> dict[str, object]:
    return {check.name: check for check in report.checks}  # type: ignore[attr-defined]


def test_empty_settings_are_a_complete_configuration() -> None:
    settings = LocalXvfbSettings()
    assert settings.app == "librecad"
    assert settings.executable("xvfb") == "Xvfb"
    assert settings.launch_attempts == 2


@pytest.mark.parametrize("bad", [
    {"no_such_setting": 1},
    {"app": "autocad"},
    {"state_dir": "relative/state"},
    {"runtime_dir": "relative"},
    {"xvfb_path": "bin/Xvfb"},
    {"launch_timeout_s": 0},
    {"launch_timeout_s": 10_000},
    {"launch_attempts": 4},
    {"settle_s": -1},
])
def test_bad_settings_are_located_problems(bad: dict[str, object]) -> None:
    plugin = LocalXvfbPlugin()
    problems = plugin.validate_spec(
        InfrastructureSpec(backend="local-xvfb", broker_version=VERSION, settings=bad), "cfg.json: $.infrastructure")
    assert problems and all(p.location.startswith("cfg.json: $.infrastructure.settings") for p in problems)


def test_state_dir_defaults_follow_the_core_state_variable(tmp_path: Path) -> None:
    settings = LocalXvfbSettings()
    assert settings.resolved_state_dir({"AUTOCAD_BENCH_STATE_DIR": str(tmp_path)}) == tmp_path / "local-xvfb"
    home_default = settings.resolved_state_dir({})
    assert home_default == Path("~/.local/state/autocad-bench/local-xvfb").expanduser()
    assert LocalXvfbSettings(state_dir="~/x").resolved_state_dir({}) == Path.home() / "x"


def test_runtime_area_sits_beside_the_rollout_directories(tmp_path: Path) -> None:
    settings = LocalXvfbSettings()
    assert settings.runtime_root(tmp_path / "out" / "rollouts" / "r1") == tmp_path / "out" / "runtime"
    assert LocalXvfbSettings(runtime_dir=str(tmp_path / "rt")).runtime_root(tmp_path / "x") == tmp_path / "rt"


def test_missing_executables_fail_with_the_install_hint(tmp_path: Path) -> None:
    plugin = LocalXvfbPlugin()
    infrastructure = spec(tmp_path / "state", xvfb_path="no-such-xvfb-4711", librecad_path=str(tmp_path / "nope"),
                          xdotool_path="no-such-xdotool-4711")
    report = plugin.preflight(_request(infrastructure))
    checks = _checks(report)
    for tool in ("xvfb", "librecad", "xdotool"):
        check = checks[tool]
        assert not check.passed  # type: ignore[attr-defined]
        assert INSTALL_HINT in check.reason  # type: ignore[attr-defined]
    assert INSTALL_HINT == "apt-get install -y xvfb librecad xdotool"
    assert not report.passed


def test_present_tools_pass_and_the_wave_is_bounded_by_everything(tmp_path: Path) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("Xvfb", "librecad", "xdotool"):
        (tools / name).write_text("#!/bin/sh\nexit 0\n")
        (tools / name).chmod(0o755)
    infrastructure = spec(tmp_path / "state", xvfb_path=str(tools / "Xvfb"), librecad_path=str(tools / "librecad"),
                          xdotool_path=str(tools / "xdotool"), cpus_per_rollout=0.01, memory_per_rollout_mb=64)
    plugin = LocalXvfbPlugin()
    report = plugin.preflight(_request(infrastructure, assignments=3, max_concurrency=2))
    checks = _checks(report)
    assert all(checks[t].passed for t in ("xvfb", "librecad", "xdotool", "broker", "state_dir", "capacity"))  # type: ignore[attr-defined]
    assert report.admitted_wave == 2
    assert plugin.preflight(_request(infrastructure, assignments=1, max_concurrency=8)).admitted_wave == 1
    # Capacity: more CPU per rollout than the machine has admits nothing and fails the check.
    hungry = spec(tmp_path / "state", cpus_per_rollout=64)
    starved = plugin.preflight(_request(hungry, assignments=3, max_concurrency=2))
    if len(os.sched_getaffinity(0)) < 64:
        assert starved.admitted_wave == 0 and not _checks(starved)["capacity"].passed  # type: ignore[attr-defined]


def test_preflight_creates_nothing(tmp_path: Path) -> None:
    state = tmp_path / "deep" / "state"
    LocalXvfbPlugin().preflight(_request(spec(state)))
    assert not (tmp_path / "deep").exists()


def test_an_unwritable_state_dir_fails_preflight(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        report = LocalXvfbPlugin().preflight(_request(spec(locked / "state")))
        assert not _checks(report)["state_dir"].passed  # type: ignore[attr-defined]
    finally:
        locked.chmod(0o700)


def test_the_broker_check_follows_the_broker_command(tmp_path: Path) -> None:
    report = LocalXvfbPlugin(broker_command=("no-such-broker-4711",)).preflight(_request(spec(tmp_path / "s")))
    assert not _checks(report)["broker"].passed  # type: ignore[attr-defined]
    report = LocalXvfbPlugin(broker_command=fake_broker("ok")).preflight(_request(spec(tmp_path / "s")))
    assert _checks(report)["broker"].passed  # type: ignore[attr-defined]
    report = LocalXvfbPlugin().preflight(_request(spec(tmp_path / "s")))
    assert _checks(report)["broker"].passed, _checks(report)["broker"]  # type: ignore[attr-defined]
