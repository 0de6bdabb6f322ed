"""Deployment manifest, pointer prewarm and current-boot readiness record (``autocad_bench_broker.readiness``).

Model validation, the current-boot check with injected boot data, the manifest's write /
verify cycle on a real (temporary) installation, ``/health`` with the readiness fields over
real HTTP with the recording driver, and the prewarm both against fakes and as the real CLI
subcommand on a private Xvfb display. The PowerShell side is checked as text in
``test_windows_scripts.py``; nothing here runs Windows.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from autocad_bench.broker import BrokerClient
from autocad_bench.broker.protocol import HealthResponse
from autocad_bench_broker.display import XvfbDisplay
from autocad_bench_broker.drivers.input import PyAutoGUIDriver, RecordingDriver
from autocad_bench_broker.readiness import (
    BootInfo,
    DeploymentManifest,
    DesktopInfo,
    PrewarmResult,
    ReadinessError,
    ReadinessRecord,
    build_manifest,
    desktop_info,
    distribution_sha256,
    health_fields,
    load_manifest,
    load_readiness,
    manifest_bytes,
    parse_readiness,
    pointer_reader,
    prewarm,
    prewarm_target,
    readiness_problems,
    readiness_report,
    verify_manifest,
    write_manifest,
)
from autocad_bench_broker.server import BrokerServer, BrokerSettings

from .conftest import needs_xvfb
from .server_fakes import FAST_STABILITY, SIZE, FakeAdapter, FakeCapture

BOOTED = datetime(2026, 3, 1, 8, 0, 0, tzinfo=UTC)
BOOT = BootInfo("boot-1772352000", BOOTED)
SHA = hashlib.sha256(b"x").hexdigest()


def record_json(**changes: Any) -> dict[str, Any]:
    """A readiness record as ``Start-AutocadBenchBroker.ps1`` writes it (PowerShell 'o' times)."""
    record: dict[str, Any] = {
        "format": "autocad-bench-readiness/1",
        "rollout_id": "r-0001",
        "batch_id": "b-1",
        "attempt_id": "a-1",
        "boot_id": BOOT.boot_id,
        "booted_at": "2026-03-01T08:00:00.0000000Z",
        "startup_id": "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
        "pid": 4242,
        "ready_at": "2026-03-01T08:01:30.1234567Z",
        "interactive_session_id": 1,
        "console_session_id": 1,
        "console_user": "Administrator",
        "desktop_width": 1920,
        "desktop_height": 1080,
        "window_station": "WinSta0",
        "desktop": "Default",
        "broker_version": "windows-autocad-2019-v11",
        "input_driver_version": "autocad-bench-input/1 pyautogui/0.9.54",
        "manifest_sha256": SHA,
        "deployment_id": "6f9619ff-8b86-d011-b42d-00c04fc964ff",
        "broker_sha256": SHA,
        "broker_port": 8765,
        "prewarm_ok": True,
        "prewarm": {
            "format": "autocad-bench-prewarm/1",
            "ok": True,
            "problems": [],
            "driver_version": "autocad-bench-input/1 pyautogui/0.9.54",
            "screen_width": 1920,
            "screen_height": 1080,
            "start": [5, 5],
            "target": [960, 540],
            "observed": [960, 540],
            "returned": [5, 5],
            "window_station": "WinSta0",
            "desktop": "Default",
            "input_desktop": "Default",
            "session_id": 1,
            "console_session_id": 1,
            "user": "Administrator",
            "at": "2026-03-01T08:01:20.5Z",
            "elapsed_ms": 41.5,
        },
        "manifest_verified": True,
        "problems": [],
    }
    record.update(changes)
    return record


def write_record(path: Path, bom: bool = False, **changes: Any) -> Path:
    data = json.dumps(record_json(**changes)).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + data)
    return path


# -- models -------------------------------------------------------------------------------------


def test_the_launcher_record_parses_with_powershell_times_and_a_bom() -> None:
    record = parse_readiness(b"\xef\xbb\xbf" + json.dumps(record_json(extra_field="ignored")).encode())
    assert record.booted_at == BOOTED
    assert record.ready_at == datetime(2026, 3, 1, 8, 1, 30, 123456, tzinfo=UTC)
    assert record.prewarm is not None and record.prewarm.returned == (5, 5)
    assert record.prewarm_ok and record.manifest_verified and record.problems == ()


@pytest.mark.parametrize(
    "changes",
    [
        {"format": "autocad-bench-readiness/2"},
        {"manifest_sha256": "ABC"},
        {"broker_sha256": SHA.upper()},
        {"pid": 0},
        {"broker_port": 70000},
        {"interactive_session_id": -1},
        {"desktop_width": 0},
        {"prewarm_ok": "maybe"},
        {"prewarm": {"ok": True}},
    ],
)
def test_malformed_records_are_refused(changes: dict[str, Any]) -> None:
    with pytest.raises(ReadinessError, match="invalid"):
        parse_readiness(json.dumps(record_json(**changes)))


@pytest.mark.parametrize("missing", ["rollout_id", "boot_id", "startup_id", "deployment_id", "prewarm_ok", "booted_at"])
def test_required_fields_must_be_present(missing: str) -> None:
    record = record_json()
    del record[missing]
    with pytest.raises(ReadinessError, match=missing):
        parse_readiness(json.dumps(record))


def test_the_record_satisfies_both_backends_readers() -> None:
    """What the launcher writes is what the aws and local-hyperv backends read (extra ignored)."""
    aws = pytest.importorskip("autocad_bench_aws.readiness")
    hyperv = pytest.importorskip("autocad_bench_hyperv.guest")
    raw = record_json()
    for model in (aws.BrokerReadiness, hyperv.BrokerReadiness):
        parsed = model.model_validate(raw)
        assert parsed.startup_id == raw["startup_id"] and parsed.boot_id == raw["boot_id"]
        missing = set(model.model_fields) - set(ReadinessRecord.model_fields)
        assert not missing, f"{model.__module__} reads fields the record does not define: {missing}"


def test_prewarm_result_round_trips() -> None:
    result = PrewarmResult.model_validate(record_json()["prewarm"])
    assert PrewarmResult.model_validate_json(result.model_dump_json()) == result
    with pytest.raises(ValidationError):
        PrewarmResult.model_validate({**record_json()["prewarm"], "unknown": 1})


# -- current boot --------------------------------------------------------------------------------


def test_a_record_of_the_current_boot_passes() -> None:
    record = parse_readiness(json.dumps(record_json()))
    assert readiness_problems(record, BOOT, now=BOOTED + timedelta(minutes=5)) == []
    # LastBootUpTime and the tick-derived boot time differ a little; that is the same boot.
    near = BootInfo(BOOT.boot_id, BOOTED + timedelta(seconds=20))
    assert readiness_problems(record, near, now=BOOTED + timedelta(minutes=5)) == []


@pytest.mark.parametrize(
    ("boot", "changes", "expected"),
    [
        (BootInfo("boot-1772355600", BOOTED + timedelta(hours=1)), {}, "belongs to boot boot-1772352000"),
        (BootInfo(None, BOOTED + timedelta(hours=1)), {}, "is not this boot's"),
        (BOOT, {"ready_at": "2026-03-01T07:59:00Z"}, "before the boot it names"),
        (BootInfo(None, BOOTED + timedelta(minutes=30)), {"booted_at": "2026-03-01T08:29:30Z"}, "before this boot"),
        (BOOT, {"ready_at": "2026-03-02T08:00:00Z"}, "in the future"),
    ],
)
def test_a_record_of_another_boot_is_refused(boot: BootInfo, changes: dict[str, Any], expected: str) -> None:
    record = parse_readiness(json.dumps(record_json(**changes)))
    problems = readiness_problems(record, boot, now=BOOTED + timedelta(minutes=5))
    assert any(expected in problem for problem in problems), problems


def test_unknown_boot_parts_are_not_checked() -> None:
    record = parse_readiness(json.dumps(record_json(boot_id="boot-other")))
    assert readiness_problems(record, BootInfo(None, None), now=BOOTED + timedelta(minutes=5)) == []
    assert readiness_problems(record, BootInfo("boot-other", None), now=BOOTED + timedelta(minutes=5)) == []


def test_load_readiness_checks_the_boot(tmp_path: Path) -> None:
    path = tmp_path / "state" / "ready.json"
    now = BOOTED + timedelta(minutes=5)
    with pytest.raises(ReadinessError, match="no readiness record yet"):
        load_readiness(path, boot=BOOT, now=now)
    write_record(path, bom=True)
    assert load_readiness(path, boot=BOOT, now=now).deployment_id == "6f9619ff-8b86-d011-b42d-00c04fc964ff"
    with pytest.raises(ReadinessError, match="belongs to boot"):
        load_readiness(path, boot=BootInfo("boot-9", None), now=now)
    path.write_text("{not json")
    with pytest.raises(ReadinessError, match="invalid"):
        load_readiness(path, boot=BOOT, now=now)


def test_load_readiness_defaults_to_this_machines_boot(tmp_path: Path) -> None:
    from autocad_bench_broker.readiness import current_boot

    boot = current_boot()
    assert boot.boot_id is not None and boot.booted_at is not None  # Linux: /proc
    fresh = write_record(
        tmp_path / "ready.json",
        boot_id=boot.boot_id,
        booted_at=boot.booted_at.isoformat(),
        ready_at=datetime.now(UTC).isoformat(),
    )
    assert load_readiness(fresh).boot_id == boot.boot_id
    write_record(fresh, boot_id="an-earlier-boot")
    with pytest.raises(ReadinessError):
        load_readiness(fresh)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.on_sleep: list[Any] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.001)
        while self.on_sleep and self.on_sleep[0][0] <= self.now:
            self.on_sleep.pop(0)[1]()


def test_readiness_report_waits_bounded_for_the_current_record(tmp_path: Path) -> None:
    path = tmp_path / "ready.json"
    clock = FakeClock()
    boot = BootInfo(BOOT.boot_id, None)
    clock.on_sleep.append((3.0, lambda: write_record(path)))
    report = readiness_report(path, wait_s=100, poll_s=1, boot=boot, clock=clock, sleep=clock.sleep)
    assert report["problems"] == [] and report["readiness"]["startup_id"] == record_json()["startup_id"]
    assert report["boot_id"] == BOOT.boot_id and 3.0 <= clock.now < 5.0


def test_readiness_report_of_a_stale_or_missing_record_says_why(tmp_path: Path) -> None:
    path, status = tmp_path / "ready.json", tmp_path / "start-status.json"
    clock = FakeClock()
    report = readiness_report(path, wait_s=5, boot=BOOT, clock=clock, sleep=clock.sleep)
    assert report["readiness"] is None and report["problems"] == ["no readiness record yet"]
    assert clock.now == pytest.approx(5.0)
    status.write_text(json.dumps({"phase": "manifest-failed", "error": "bin/x.ps1: content differs"}))
    write_record(path, boot_id="boot-old")
    report = readiness_report(path, status=status, boot=BOOT, clock=clock, sleep=clock.sleep)
    assert report["readiness"]["boot_id"] == "boot-old"  # the controller then names the stale boot
    assert report["problems"][0].startswith("the record belongs to boot boot-old")
    assert report["problems"][-1] == "launcher manifest-failed: bin/x.ps1: content differs"
    aws = pytest.importorskip("autocad_bench_aws.readiness")
    parsed = aws.ReadinessReport.model_validate({**report, "booted_at": BOOTED.isoformat()})
    assert parsed.readiness is not None and parsed.readiness.boot_id == "boot-old"


def test_readiness_report_cli_prints_one_json_line(tmp_path: Path) -> None:
    path = write_record(tmp_path / "ready.json", boot_id="boot-old")
    out = subprocess.run(
        [sys.executable, "-m", "autocad_bench_broker", "readiness-report", "--readiness", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert len(out.strip().splitlines()) == 1
    report = json.loads(out)
    assert report["readiness"]["boot_id"] == "boot-old" and report["problems"]
    assert report["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()


# -- manifest ------------------------------------------------------------------------------------


@pytest.fixture
def installation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An installation root: a broker wheel, scripts, and a fake distribution on sys.path."""
    root = tmp_path / "AutoCADBench"
    (root / "wheels").mkdir(parents=True)
    (root / "bin").mkdir()
    (root / "wheels" / "autocad_bench_broker-0.1.0-py3-none-any.whl").write_bytes(b"PK wheel bytes")
    (root / "bin" / "Start-AutocadBenchBroker.ps1").write_text("# start\n")
    (root / "template.dwg").write_bytes(b"AC1032 template")
    site = root / "venv" / "site-packages"
    (site / "fakedriver").mkdir(parents=True)
    (site / "fakedriver" / "__init__.py").write_text("VALUE = 1\n")
    (site / "fakedriver" / "__pycache__").mkdir()
    (site / "fakedriver" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"cache")
    info = site / "fakedriver-2.5.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakedriver\nVersion: 2.5\n")
    (info / "RECORD").write_text(
        "fakedriver/__init__.py,,\nfakedriver/__pycache__/__init__.cpython-311.pyc,,\n"
        "fakedriver-2.5.dist-info/METADATA,,\nfakedriver-2.5.dist-info/RECORD,,\n"
    )
    monkeypatch.syspath_prepend(str(site))
    yield root


def make_manifest(root: Path, **options: Any) -> DeploymentManifest:
    arguments: dict[str, Any] = {
        "root": root,
        "broker_version": "windows-autocad-2019-v11",
        "broker_wheel": Path("wheels/autocad_bench_broker-0.1.0-py3-none-any.whl"),
        "files": [Path("bin/Start-AutocadBenchBroker.ps1"), root / "template.dwg"],
        "distributions": ["fakedriver"],
        "input_driver": "fakedriver",
    }
    return build_manifest(**(arguments | options))


def test_build_manifest_lists_every_deployed_file(installation: Path) -> None:
    manifest = make_manifest(installation)
    paths = [entry.path for entry in manifest.files]
    assert paths == sorted(paths)
    assert set(paths) == {
        "bin/Start-AutocadBenchBroker.ps1",
        "template.dwg",
        "venv/site-packages/fakedriver-2.5.dist-info/METADATA",
        "venv/site-packages/fakedriver-2.5.dist-info/RECORD",
        "venv/site-packages/fakedriver/__init__.py",
        "wheels/autocad_bench_broker-0.1.0-py3-none-any.whl",
    }
    wheel = installation / "wheels" / "autocad_bench_broker-0.1.0-py3-none-any.whl"
    assert manifest.broker_wheel.sha256 == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert manifest.broker_wheel.version == "0.1.0"
    assert (manifest.input_driver.name, manifest.input_driver.version) == ("fakedriver", "2.5")
    assert manifest.input_driver.package_sha256 == distribution_sha256("fakedriver")[1]
    assert manifest.input_driver.archive_sha256 is None
    assert len(manifest.deployment_id) == 36 and manifest.broker_version == "windows-autocad-2019-v11"


def test_the_real_input_driver_digest_is_stable_and_ignores_caches() -> None:
    version, digest = distribution_sha256("pyautogui")
    assert version and distribution_sha256("pyautogui") == (version, digest)
    with pytest.raises(ReadinessError, match="not installed"):
        distribution_sha256("no-such-distribution-here")


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"broker_version": "bad label!"}, "broker_version"),
        ({"broker_wheel": Path("wheels/missing.whl")}, "not a .whl"),
        ({"files": [Path("bin/none.ps1")]}, "not a file"),
        ({"deployment_id": "not-a-guid"}, "GUID"),
        ({"distributions": ["no-such-distribution-here"]}, "not installed"),
    ],
)
def test_build_manifest_refuses_bad_inputs(installation: Path, options: dict[str, Any], expected: str) -> None:
    with pytest.raises(ReadinessError, match=expected):
        make_manifest(installation, **options)


def test_build_manifest_refuses_files_outside_the_root(installation: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("x")
    with pytest.raises(ReadinessError, match="outside the installation root"):
        make_manifest(installation, files=[outside])


def test_write_manifest_is_idempotent(installation: Path, tmp_path: Path) -> None:
    path = tmp_path / "data" / "manifest.json"
    first = write_manifest(path, make_manifest(installation))
    data = path.read_bytes()
    assert not first.unchanged and first.sha256 == hashlib.sha256(data).hexdigest()
    assert data == manifest_bytes(first.manifest) and data.endswith(b"\n") and not data.startswith(b"\xef\xbb\xbf")
    again = write_manifest(path, make_manifest(installation))  # a new id and time, same content
    assert again.unchanged and path.read_bytes() == data
    assert again.manifest.deployment_id == first.manifest.deployment_id and again.sha256 == first.sha256
    forced = write_manifest(path, make_manifest(installation), keep_unchanged=False)
    assert not forced.unchanged and forced.manifest.deployment_id != first.manifest.deployment_id
    (installation / "template.dwg").write_bytes(b"AC1032 another template")
    changed = write_manifest(path, make_manifest(installation))
    assert not changed.unchanged and changed.manifest.deployment_id != forced.manifest.deployment_id
    assert load_manifest(path) == changed.manifest


def test_verify_manifest_rehashes_everything(installation: Path, tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    written = write_manifest(path, make_manifest(installation))
    check = verify_manifest(path)
    assert check.ok and check.problems == ()
    assert check.manifest_sha256 == written.sha256 and check.deployment_id == written.manifest.deployment_id
    assert check.broker_sha256 == written.manifest.broker_wheel.sha256 and check.input_driver_version == "2.5"
    assert check.files_checked == 6

    (installation / "bin" / "Start-AutocadBenchBroker.ps1").write_text("# tampered\n")
    (installation / "template.dwg").unlink()
    (installation / "venv" / "site-packages" / "fakedriver" / "__init__.py").write_text("VALUE = 2\n")
    check = verify_manifest(path)
    assert not check.ok
    assert "bin/Start-AutocadBenchBroker.ps1: content differs from the manifest" in check.problems
    assert "template.dwg: missing" in check.problems
    assert "the installed fakedriver files differ from the manifest" in check.problems


def test_verify_manifest_of_a_missing_or_broken_manifest(tmp_path: Path) -> None:
    check = verify_manifest(tmp_path / "manifest.json")
    assert not check.ok and "cannot read the manifest" in check.problems[0]
    (tmp_path / "manifest.json").write_text('{"format": "autocad-bench-deployment/1"}')
    check = verify_manifest(tmp_path / "manifest.json")
    assert not check.ok and "is invalid" in check.problems[0]


def run_cli(*arguments: str, site: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = str(site) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "autocad_bench_broker", *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_manifest_cli_write_and_verify(installation: Path, tmp_path: Path) -> None:
    """The installer's two calls, with the real pyautogui as the input driver."""
    site = installation / "venv" / "site-packages"
    output = tmp_path / "data" / "manifest.json"
    archive = installation / "wheels" / "pyautogui-0.9.54-py3-none-any.whl"
    archive.write_bytes(b"driver archive")
    write = [
        "manifest", "write", "--root", str(installation), "--output", str(output),
        "--broker-version", "windows-autocad-2019-v11",
        "--broker-wheel", str(installation / "wheels" / "autocad_bench_broker-0.1.0-py3-none-any.whl"),
        "--file", "bin/Start-AutocadBenchBroker.ps1", "--file", str(installation / "template.dwg"),
        "--distribution", "fakedriver", "--input-driver-archive", str(archive),
    ]  # fmt: skip
    first = run_cli(*write, site=site)
    assert first.returncode == 0, first.stderr
    result = json.loads(first.stdout)
    assert not result["unchanged"] and result["manifest_sha256"] == hashlib.sha256(output.read_bytes()).hexdigest()
    manifest = load_manifest(output)
    assert manifest.input_driver.name == "pyautogui"
    assert manifest.input_driver.archive_sha256 == hashlib.sha256(b"driver archive").hexdigest()
    second = json.loads(run_cli(*write, site=site).stdout)
    assert second["unchanged"] and second["deployment_id"] == result["deployment_id"]

    verified = run_cli("manifest", "verify", "--manifest", str(output), site=site)
    assert verified.returncode == 0, verified.stdout
    assert json.loads(verified.stdout)["ok"] is True
    (installation / "template.dwg").write_bytes(b"changed")
    failed = run_cli("manifest", "verify", "--manifest", str(output), "--root", str(installation), site=site)
    assert failed.returncode == 1 and json.loads(failed.stdout)["problems"] == [
        "template.dwg: content differs from the manifest"
    ]
    bad = run_cli(*[arg if arg != "windows-autocad-2019-v11" else "bad label" for arg in write], site=site)
    assert bad.returncode == 2 and bad.stderr.startswith("error: broker_version") and bad.stdout == ""


# -- prewarm -------------------------------------------------------------------------------------


class FollowingPointer:
    """Reads the pointer where the recording driver last moved it (``stuck``: never moves)."""

    def __init__(self, driver: RecordingDriver, start: tuple[int, int] | None, stuck: bool = False) -> None:
        self.driver, self.start, self.stuck = driver, start, stuck
        self.reads = 0

    def __call__(self) -> tuple[int, int] | None:
        self.reads += 1
        moves = [call.args for call in self.driver.calls if call.method == "move"]
        return self.start if self.stuck or not moves else (moves[-1][0], moves[-1][1])


WINDOWS_DESKTOP = DesktopInfo("WinSta0", "Default", "Default", 1, 1, "Administrator", windows=True)


def test_prewarm_moves_to_the_centre_and_back() -> None:
    driver = RecordingDriver(size=(1920, 1080))
    result = prewarm(driver, FollowingPointer(driver, (5, 7)), WINDOWS_DESKTOP)
    assert result.ok and result.problems == ()
    assert [call.args for call in driver.calls] == [(960, 540), (5, 7)]
    assert (result.start, result.target, result.observed, result.returned) == ((5, 7), (960, 540), (960, 540), (5, 7))
    assert (result.window_station, result.desktop, result.session_id) == ("WinSta0", "Default", 1)
    assert result.driver_version == driver.version and (result.screen_width, result.screen_height) == (1920, 1080)


def test_prewarm_target_differs_from_the_start() -> None:
    assert prewarm_target((1920, 1080), (960, 540)) == (1000, 580)
    assert prewarm_target((1920, 1080), None) == (960, 540)
    assert prewarm_target((41, 41), (20, 20)) == (40, 40)


def test_a_pointer_that_does_not_move_fails_within_the_bound() -> None:
    driver = RecordingDriver(size=(1920, 1080))
    clock = FakeClock()
    pointer = FollowingPointer(driver, (5, 7), stuck=True)
    result = prewarm(driver, pointer, WINDOWS_DESKTOP, timeout_s=1.0, clock=clock, sleep=lambda: clock.sleep(0.1))
    assert not result.ok and result.observed == (5, 7)
    assert result.problems == ("the pointer is at (5, 7) after the move to (960, 540)",)
    assert 1.0 <= clock.now <= 1.2 and pointer.reads <= 25


@pytest.mark.parametrize(
    ("desktop", "expected"),
    [
        (DesktopInfo("WinSta0", "Winlogon", "Winlogon", 1, 1, "Administrator", True), "WinSta0\\Winlogon"),
        (DesktopInfo("Service-0x0-3e7$", "Default", None, 0, 1, "SYSTEM", True), "not WinSta0\\Default"),
        (DesktopInfo("WinSta0", "Default", None, 1, 1, "Administrator", True), "input desktop is not accessible"),
        (DesktopInfo("WinSta0", "Default", "Default", 0, 1, "Administrator", True), "session 0"),
    ],
)
def test_prewarm_requires_the_interactive_default_desktop_on_windows(desktop: DesktopInfo, expected: str) -> None:
    driver = RecordingDriver(size=(1920, 1080))
    result = prewarm(driver, FollowingPointer(driver, (5, 7)), desktop)
    assert not result.ok and any(expected in problem for problem in result.problems), result.problems
    assert result.returned == (5, 7)  # the move itself still happened


def test_prewarm_never_raises() -> None:
    class Broken(RecordingDriver):
        def move(self, x: int, y: int) -> None:
            raise RuntimeError("SendInput was blocked\nsecond line")

    driver = Broken(size=(1920, 1080))
    result = prewarm(driver, FollowingPointer(driver, None), desktop_info(":0"))
    assert not result.ok
    assert result.problems == (
        "the pointer position cannot be read before the move",
        "RuntimeError: SendInput was blocked",
    )
    linux = desktop_info(":7")
    assert (linux.windows, linux.session_id, linux.window_station) == (False, 7, None)


@pytest.mark.integration
@needs_xvfb
def test_prewarm_moves_the_real_pointer_on_xvfb(xvfb: XvfbDisplay) -> None:
    subprocess.run(["xdotool", "mousemove", "17", "29"], env={"DISPLAY": xvfb.name}, check=True, timeout=10)
    driver = PyAutoGUIDriver(xvfb.name)
    reader = pointer_reader(xvfb.name)
    try:
        result = prewarm(driver, reader, desktop_info(xvfb.name))
    finally:
        reader.close()
        driver.close()
    assert result.ok, result.problems
    assert (result.start, result.observed, result.returned) == ((17, 29), (960, 540), (17, 29))
    assert result.session_id == xvfb.number and "pyautogui/" in (result.driver_version or "")


@pytest.mark.integration
@needs_xvfb
def test_prewarm_cli_on_xvfb_prints_json_and_leaves_the_pointer(xvfb: XvfbDisplay) -> None:
    subprocess.run(["xdotool", "mousemove", "300", "200"], env={"DISPLAY": xvfb.name}, check=True, timeout=10)
    run = run_cli("prewarm", "--display", xvfb.name)
    assert run.returncode == 0, run.stdout + run.stderr
    result = PrewarmResult.model_validate_json(run.stdout)
    assert result.ok and result.target == (960, 540) and result.returned == (300, 200)
    assert (result.screen_width, result.screen_height) == (1920, 1080)
    where = subprocess.run(
        ["xdotool", "getmouselocation", "--shell"],
        env={"DISPLAY": xvfb.name},
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    ).stdout
    assert "X=300" in where.split() and "Y=200" in where.split()


def test_prewarm_cli_without_a_display_fails_with_json() -> None:
    run = run_cli("prewarm", "--display", ":65003", "--timeout-s", "0.2")
    assert run.returncode == 1
    result = PrewarmResult.model_validate_json(run.stdout)
    assert not result.ok and result.problems


# -- /health over real HTTP ----------------------------------------------------------------------


@asynccontextmanager
async def health_server(tmp_path: Path, readiness: Path | None) -> AsyncIterator[BrokerClient]:
    driver = RecordingDriver(size=SIZE)
    capture = FakeCapture(driver)
    adapter = FakeAdapter(capture)
    template = tmp_path / "template.dxf"
    template.write_text("FAKE TEMPLATE\n")
    token = secrets.token_urlsafe(24)
    settings = BrokerSettings(
        workdir=tmp_path / "runtime",
        template=template,
        broker_version="windows-autocad-2019-v11",
        manifest_sha256=SHA,
        interactive_session_id=1,
        stability=FAST_STABILITY,
        shutdown_timeout_s=5.0,
        request_grace_s=0.2,
        readiness=readiness,
    )
    server = BrokerServer(
        settings, token, driver, capture, adapter, boot_id=BOOT.boot_id, startup_id=record_json()["startup_id"]
    )
    await server.start()
    try:
        yield BrokerClient(server.url, token, operation_deadline_s=20.0, wait_initial_s=0.0, wait_max_s=0.0)
    finally:
        await server.stop()


async def test_health_reports_the_readiness_record_of_this_boot(tmp_path: Path) -> None:
    path = tmp_path / "state" / "ready.json"
    async with health_server(tmp_path, path) as client:
        before = await client.health()
        assert (before.deployment_id, before.readiness_startup_id, before.pointer_prewarm_ok) == (None, None, None)
        write_record(path, bom=True)
        health = await client.health()
        assert isinstance(health, HealthResponse)
        assert health.deployment_id == "6f9619ff-8b86-d011-b42d-00c04fc964ff"
        assert health.readiness_startup_id == health.startup_id == record_json()["startup_id"]
        assert health.pointer_prewarm_ok is True
        write_record(path, prewarm_ok=False)
        assert (await client.health()).pointer_prewarm_ok is False
        write_record(path, boot_id="boot-earlier")  # another boot's record is no evidence
        assert (await client.health()).deployment_id is None
        path.write_text("{")
        stale = await client.health()
        assert (stale.deployment_id, stale.readiness_startup_id, stale.pointer_prewarm_ok) == (None, None, None)
        assert stale.boot_id == BOOT.boot_id and stale.state == "idle"


async def test_health_without_readiness_keeps_the_old_shape(tmp_path: Path) -> None:
    async with health_server(tmp_path, None) as client:
        health = await client.health()
    assert (health.deployment_id, health.readiness_startup_id, health.pointer_prewarm_ok) == (None, None, None)
    assert health_fields(None, "boot") == {
        "deployment_id": None,
        "readiness_startup_id": None,
        "pointer_prewarm_ok": None,
    }


def test_health_response_accepts_a_broker_without_the_new_fields() -> None:
    """An older broker's /health (no readiness fields) still parses in the new client."""
    old = {
        "protocol_version": 1,
        "broker_version": "windows-autocad-2019-v10",
        "input_driver_version": "autocad-bench-input/1 pyautogui/0.9.54",
        "pid": 10,
        "interactive_session_id": 1,
        "desktop_width": 1920,
        "desktop_height": 1080,
        "boot_id": "boot-1",
        "startup_id": "s",
        "manifest_sha256": SHA,
        "app": "autocad",
        "state": "idle",
        "session_id": None,
    }
    health = HealthResponse.model_validate(old)
    assert health.deployment_id is None and health.pointer_prewarm_ok is None


# -- serve options -------------------------------------------------------------------------------


def test_serve_refuses_a_malformed_startup_id(tmp_path: Path) -> None:
    template = tmp_path / "template.dxf"
    template.write_text("0\nEOF\n")
    env = dict(os.environ, AUTOCAD_BENCH_BROKER_TOKEN=secrets.token_urlsafe(24))
    run = subprocess.run(
        [
            sys.executable, "-m", "autocad_bench_broker", "serve", "--app", "librecad", "--display", ":65004",
            "--workdir", str(tmp_path / "w"), "--template", str(template), "--broker-version", "v",
            "--startup-id", "bad id",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )  # fmt: skip
    assert run.returncode == 2 and run.stderr.startswith("error: --startup-id"), run.stderr
