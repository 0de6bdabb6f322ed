"""Settings validation (located problems) and the read-only preflight of the pool."""

from __future__ import annotations

import json
from typing import Any

import pytest

from autocad_bench.infrastructure import AssignmentView, InfrastructureSpec, PreflightReport, PreflightRequest
from autocad_bench_hyperv.marks import lease_mark
from autocad_bench_hyperv.settings import HyperVSettings
from tests.hyperv.conftest import VERSION, Lab


def _problems(lab: Lab, settings: dict[str, Any]) -> list[str]:
    spec = InfrastructureSpec(backend="local-hyperv", broker_version=VERSION, settings=settings)
    return [f"{p.location}: {p.message}" for p in lab.plugin().validate_spec(spec, "cfg: $.infrastructure")]


def test_settings_problems_are_located(lab: Lab) -> None:
    lab.add_host("hv1", ["acad-01", "acad-02"])
    good = lab.settings()
    assert _problems(lab, good) == []
    ports = json.loads(json.dumps(good))
    ports["hosts"][0]["broker"]["ports"].pop("acad-02")
    [problem] = _problems(lab, ports)
    assert problem.startswith("cfg: $.infrastructure.settings.hosts[0]") and "missing ['acad-02']" in problem
    unknown = {**good, "password": "x"}
    assert _problems(lab, unknown) == ["cfg: $.infrastructure.settings.password: unknown field"]
    psrp = json.loads(json.dumps(good))
    psrp["hosts"][0]["connection"] = {"kind": "psrp", "server": "hv01.lab", "username_env": "HV USER",
                                      "password_env": "HV_PASS"}
    [problem] = _problems(lab, psrp)
    assert "hosts[0].connection.psrp.username_env" in problem
    routed = json.loads(json.dumps(good))
    routed["hosts"][0]["broker"] = {"kind": "routed", "address_template": "{vm}.{domain}"}
    [problem] = _problems(lab, routed)
    assert "unknown placeholders ['domain']" in problem
    too_long = {**good, "vm_attempts": 4, "boot_timeout_s": 99999}
    assert len(_problems(lab, too_long)) == 2


def test_environment_names_cover_every_credential(lab: Lab) -> None:
    lab.add_host("hv1", ["acad-01"])
    settings = lab.settings()
    settings["hosts"].append({"name": "hv2", "vms": ["x"], "broker": {"kind": "routed"},
                              "connection": {"kind": "psrp", "server": "hv2.lab", "username_env": "HV2_USER",
                                             "password_env": "HV2_PASS"}})
    parsed = HyperVSettings.model_validate(settings)
    assert parsed.environment_names() == ("HYPERV_GUEST_USER", "HYPERV_GUEST_PASSWORD", "HV2_USER", "HV2_PASS")


def _preflight(lab: Lab, assignments: int = 3, concurrency: int = 3, spec: InfrastructureSpec | None = None,
               **overrides: Any) -> PreflightReport:
    return lab.plugin().preflight(PreflightRequest(
        batch_id="b", spec=spec or lab.spec(**overrides), max_concurrency=concurrency,
        assignments=tuple(AssignmentView(rollout_id=f"r{i}", task_id="t", provider="p", model="m")
                          for i in range(assignments))))


def _check(report: PreflightReport, name: str) -> tuple[bool, str]:
    [check] = [c for c in report.checks if c.name == name]
    return check.passed, check.reason


def test_preflight_admits_free_vms_and_seats(lab: Lab) -> None:
    lab.add_host("hv1", ["acad-01", "acad-02"])
    lab.add_host("hv2", ["acad-03"])
    report = _preflight(lab, licence_seats=2)
    assert report.passed and report.admitted_wave == 2
    assert _check(report, "licence seats") == (True, "2 of 2 seats free (0 leased VMs)")
    assert _check(report, "host hv1")[0] and _check(report, "clean checkpoints")[0]
    [pricing] = [c for c in report.checks if c.name == "infrastructure rate"]
    assert pricing.details["host_hourly_usd"] == {"hv1": 0.5, "hv2": 0.75}
    assert pricing.details["pricing_key"] == "local-hyperv"


def test_preflight_reports_every_pool_problem_without_changing_anything(lab: Lab) -> None:
    host = lab.add_host("hv1", ["acad-01", "acad-02", "acad-03", "acad-04"])
    spec = lab.spec()
    del host.vms["acad-04"]
    host.vms["acad-02"].checkpoints.clear()
    host.vms["acad-03"].notes = json.dumps({"autocad_bench": 1, "state": "free",
                                            "broker_version": "windows-autocad-2019-v10"})
    host.vms["acad-01"].notes = lease_mark(VERSION, batch_id="other", rollout_id="r9", attempt_id="a",
                                           ttl_minutes=60).render()
    before = host.snapshot()
    report = _preflight(lab, spec=spec)
    assert host.snapshot() == before
    assert not report.passed and report.admitted_wave == 0
    assert _check(report, "VMs exist") == (False, "missing: hv1/acad-04")
    passed, reason = _check(report, "clean checkpoints")
    assert not passed and "hv1/acad-02 has 0 checkpoints named 'autocad-bench-clean'" in reason
    passed, reason = _check(report, "broker version label")
    assert not passed and "hv1/acad-03 (windows-autocad-2019-v10)" in reason
    [live] = [c for c in report.checks if c.name == "VMs not leased by a live batch"]
    assert live.details["leased"] == ["hv1/acad-01 (other/r9)"]
    assert set(host.cmdlets) <= {"Get-VM", "Select-Object", "ConvertTo-Json", "Get-VMCheckpoint"}


def test_preflight_names_missing_credentials_and_unreachable_hosts(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    lab.add_host("hv1", ["acad-01"])
    plugin = lab.plugin()
    plugin._environ = {}
    report = plugin.preflight(PreflightRequest(
        batch_id="b", spec=lab.spec(), max_concurrency=1,
        assignments=(AssignmentView(rollout_id="r", task_id="t", provider="p", model="m"),)))
    assert _check(report, "credentials") == (False, "not set: HYPERV_GUEST_USER, HYPERV_GUEST_PASSWORD")
    monkeypatch.setattr(lab.hosts["hv1"], "execute", lambda argv, env, timeout=0: (1, "", "WinRM cannot connect"))
    report = lab.plugin().preflight(PreflightRequest(
        batch_id="b", spec=lab.spec(), max_concurrency=1,
        assignments=(AssignmentView(rollout_id="r", task_id="t", provider="p", model="m"),)))
    passed, reason = _check(report, "host hv1")
    assert not passed and "WinRM cannot connect" in reason and report.admitted_wave == 0
