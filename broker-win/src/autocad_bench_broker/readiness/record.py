"""The current-boot readiness record (``ready.json``): parse, check against this boot, report.

``Start-AutocadBenchBroker.ps1`` writes the record at every boot once the broker answers
``/health``. :func:`load_readiness` parses it and refuses a record of another boot (raising
:class:`ReadinessError`); :func:`readiness_report` is what the AWS image's ``readiness.ps1``
prints, and :func:`health_fields` what the broker's ``/health`` adds from it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from autocad_bench_broker.readiness.common import BOOT_TOLERANCE_S, ReadinessError, Sha256Hex, _first_problem
from autocad_bench_broker.readiness.prewarm import PrewarmResult
from autocad_bench_broker.readiness.probes import BootInfo, current_boot


class ReadinessRecord(BaseModel):
    """``ready.json``: the current-boot evidence ``Start-AutocadBenchBroker.ps1`` writes.

    Unknown fields are ignored (the record is written by PowerShell and read by several
    consumers); every field listed here is required unless it has a default.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    format: Literal["autocad-bench-readiness/1"]
    rollout_id: str
    batch_id: str | None = None
    attempt_id: str | None = None
    boot_id: str = Field(min_length=1)
    """The broker's own boot id (``/health``)."""
    booted_at: datetime
    """``Win32_OperatingSystem.LastBootUpTime`` when the record was written."""
    startup_id: str = Field(min_length=1)
    """Drawn by the launcher for this start and given to the broker (``--startup-id``)."""
    pid: int = Field(ge=1)
    ready_at: datetime
    interactive_session_id: int = Field(ge=0)
    console_session_id: int | None = None
    console_user: str
    desktop_width: int = Field(ge=1)
    desktop_height: int = Field(ge=1)
    window_station: str | None = None
    desktop: str | None = None
    broker_version: str
    input_driver_version: str
    manifest_sha256: Sha256Hex
    deployment_id: str
    broker_sha256: Sha256Hex
    broker_port: int = Field(ge=1, le=65535)
    prewarm_ok: bool
    prewarm: PrewarmResult | None = None
    manifest_verified: bool = False
    problems: tuple[str, ...] = ()


def readiness_problems(
    record: ReadinessRecord,
    boot: BootInfo,
    *,
    now: datetime | None = None,
    tolerance_s: float = BOOT_TOLERANCE_S,
) -> list[str]:
    """Why ``record`` does not belong to the boot ``boot`` (empty: it does, as far as checkable)."""
    tolerance = timedelta(seconds=tolerance_s)
    now = now or datetime.now(UTC)
    problems = []
    if boot.boot_id is not None and record.boot_id != boot.boot_id:
        problems.append(f"the record belongs to boot {record.boot_id}, this is boot {boot.boot_id}")
    if boot.booted_at is not None and abs(record.booted_at - boot.booted_at) > tolerance:
        problems.append(
            f"the record's boot time {record.booted_at.isoformat()} is not this boot's {boot.booted_at.isoformat()}"
        )
    if record.ready_at < record.booted_at:
        problems.append("the record was written before the boot it names")
    if boot.booted_at is not None and record.ready_at < boot.booted_at - tolerance:
        problems.append("the record was written before this boot")
    if record.ready_at > now + tolerance:
        problems.append("the record's ready_at lies in the future")
    return problems


def parse_readiness(raw: bytes | str) -> ReadinessRecord:
    """Parse a readiness record (a UTF-8 BOM, as Windows PowerShell may write, is accepted)."""
    text = raw.decode("utf-8-sig") if isinstance(raw, bytes) else raw.removeprefix("\ufeff")
    try:
        return ReadinessRecord.model_validate_json(text)
    except ValidationError as error:
        raise ReadinessError(f"the readiness record is invalid: {_first_problem(error)}") from None


def load_readiness(
    path: Path,
    *,
    boot: BootInfo | None = None,
    now: datetime | None = None,
    tolerance_s: float = BOOT_TOLERANCE_S,
) -> ReadinessRecord:
    """Read ``path`` and check it belongs to the current boot; raises :class:`ReadinessError`.

    ``boot`` defaults to :func:`current_boot`; a part of it that is None is not checked
    (pass ``BootInfo(server_boot_id, None)`` to compare with a known boot id only).
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ReadinessError("no readiness record yet") from None
    except OSError as error:
        raise ReadinessError(f"cannot read the readiness record: {error.strerror or error}") from None
    record = parse_readiness(raw)
    problems = readiness_problems(
        record, boot if boot is not None else current_boot(), now=now, tolerance_s=tolerance_s
    )
    if problems:
        raise ReadinessError("; ".join(problems))
    return record


def readiness_report(
    path: Path,
    *,
    status: Path | None = None,
    wait_s: float = 0.0,
    poll_s: float = 1.0,
    boot: BootInfo | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """What the AWS image's ``readiness.ps1`` prints (``ReadinessReport`` of the aws backend).

    Waits at most ``wait_s`` for a record of the current boot. ``readiness`` is that record,
    or else the last parseable record (even of another boot: the controller then names the
    stale boot), or None; ``problems`` says why the record is not (yet) current, followed by
    the launcher's failure from ``status`` (``start-status.json``) when it recorded one.
    """
    boot = boot if boot is not None else current_boot()
    deadline = clock() + wait_s
    while True:
        record: ReadinessRecord | None = None
        try:
            record = parse_readiness(path.read_bytes())
            problems = readiness_problems(record, boot)
        except FileNotFoundError:
            problems = ["no readiness record yet"]
        except (OSError, ReadinessError) as error:
            problems = [str(error)]
        if not problems or clock() >= deadline:
            break
        sleep(min(poll_s, max(0.0, deadline - clock())))
    if problems and status is not None:
        problems.extend(_status_problem(status))
    return {
        "boot_id": boot.boot_id,
        "booted_at": boot.booted_at.isoformat() if boot.booted_at is not None else None,
        "readiness": record.model_dump(mode="json") if record is not None else None,
        "problems": problems,
    }


def _status_problem(path: Path) -> list[str]:
    """The launcher's recorded failure (``start-status.json``), if any."""
    try:
        status = json.loads(path.read_bytes().decode("utf-8-sig"))
    except (OSError, ValueError):
        return []
    if not isinstance(status, dict) or not status.get("error"):
        return []
    return [f"launcher {status.get('phase', 'unknown')}: {status['error']}"]


def health_fields(path: Path | None, boot_id: str) -> dict[str, Any]:
    """The optional ``/health`` fields from the readiness record at ``path``.

    Only a record of boot ``boot_id`` (the broker's own) is reported; a missing, malformed or
    stale record gives None for every field.
    """
    empty: dict[str, Any] = {"deployment_id": None, "readiness_startup_id": None, "pointer_prewarm_ok": None}
    if path is None:
        return empty
    try:
        record = load_readiness(path, boot=BootInfo(boot_id, None))
    except ReadinessError:
        return empty
    return {
        "deployment_id": record.deployment_id,
        "readiness_startup_id": record.startup_id,
        "pointer_prewarm_ok": record.prewarm_ok,
    }
