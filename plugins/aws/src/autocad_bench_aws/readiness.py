"""SSM commands on the worker: current-boot readiness and the evaluation export.

Both run scripts the operator's image provides (``docs/aws.md``) through
``AWS-RunPowerShellScript``; the command result is read with ``GetCommandInvocation``, polled
every few seconds within the command's bound.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from autocad_bench.infrastructure import readiness
from autocad_bench_aws.bounds import SSM_COMMAND_POLL_S, scaled
from autocad_bench_aws.calls import AwsCallError, AwsSession, call

READINESS_SCRIPT = r"C:\Program Files\AutoCADBench\bin\readiness.ps1"
EXPORT_SCRIPT = r"C:\Program Files\AutoCADBench\bin\export-evaluation.ps1"
DOCUMENT = "AWS-RunPowerShellScript"
CONSOLE_USER = "Administrator"


class CommandFailed(Exception):
    """An SSM command did not succeed within its bound."""


class BrokerReadiness(readiness.BrokerReadiness):
    """The broker's readiness record (``ready.json`` on the worker)."""

    deployment_id: str
    broker_sha256: str
    prewarm_ok: bool


class ReadinessReport(BaseModel):
    """What ``readiness.ps1`` prints: the current boot and the broker's record (if any)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    boot_id: str
    booted_at: datetime
    readiness: BrokerReadiness | None = None


async def run_command(session: AwsSession, instance_id: str, commands: list[str], timeout_s: float,
                      comment: str) -> str:
    """Run ``commands`` on the worker; return standard output, raise :class:`CommandFailed`."""
    ssm = session.ssm
    execution = max(30, int(timeout_s))
    try:
        sent = await asyncio.to_thread(call, "SendCommand", lambda: ssm.send_command(
            InstanceIds=[instance_id], DocumentName=DOCUMENT, Comment=comment[:100],
            Parameters={"commands": commands, "executionTimeout": [str(execution)]}, TimeoutSeconds=max(30, execution)))
    except AwsCallError as error:
        raise CommandFailed(str(error)) from error
    command_id = sent["Command"]["CommandId"]
    deadline = time.monotonic() + timeout_s
    while True:
        await asyncio.sleep(min(scaled(SSM_COMMAND_POLL_S), max(0.0, deadline - time.monotonic())))
        try:
            result: dict[str, Any] = await asyncio.to_thread(
                call, "GetCommandInvocation",
                lambda: ssm.get_command_invocation(CommandId=command_id, InstanceId=instance_id))
        except AwsCallError as error:
            if error.code != "InvocationDoesNotExist":
                raise CommandFailed(str(error)) from error
            result = {"Status": "Pending"}
        status = str(result.get("Status"))
        if status == "Success":
            return str(result.get("StandardOutputContent", ""))
        if status in ("Failed", "Cancelled", "TimedOut", "Cancelling"):
            err = str(result.get("StandardErrorContent", ""))[:500]
            raise CommandFailed(f"{comment}: command {status} (exit {result.get('ResponseCode')}): {err}")
        if time.monotonic() >= deadline:
            raise CommandFailed(f"{comment}: no result within {timeout_s:.0f} s (status {status})")


def parse_readiness(output: str) -> ReadinessReport:
    """The last JSON line of the readiness output."""
    for line in reversed(output.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return ReadinessReport.model_validate(json.loads(line))
            except (ValueError, ValidationError) as error:
                raise CommandFailed(f"readiness output is not a readiness report: {error}") from None
    raise CommandFailed("readiness printed no JSON report")


def readiness_problems(report: ReadinessReport, *, rollout_id: str, broker_version: str, broker_port: int) -> list[str]:
    """Handoff evidence items 3 to 6 of the sandbox contract; empty when the clone is ready."""
    ready = report.readiness
    if ready is None:
        return ["the broker has not written its readiness record (not ready yet)"]
    problems = []
    if ready.boot_id != report.boot_id:
        problems.append(f"readiness belongs to boot {ready.boot_id}, the worker is in boot {report.boot_id}")
    if ready.ready_at < report.booted_at:
        problems.append("readiness record predates the current boot")
    problems += readiness.broker_problems(ready, rollout_id=rollout_id, broker_version=broker_version,
                                          broker_port=broker_port)
    if ready.console_user != CONSOLE_USER:
        problems.append(f"console user is {ready.console_user!r}, not {CONSOLE_USER}")
    problems += readiness.desktop_problems(ready)
    if not ready.prewarm_ok:
        problems.append("the input driver's pointer prewarm did not succeed")
    return problems
