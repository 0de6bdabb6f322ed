"""What runs inside a VM (PowerShell Direct, ``Invoke-Command -VMName``) and what it must report.

Three script blocks, each run by the host in the guest with the guest administrator
credential:

* :data:`ARM_SCRIPT` writes the per-rollout broker token and the rollout identity to
  ``C:\\ProgramData\\AutoCADBench\\secret\\arm.json`` (a directory only SYSTEM and
  Administrators can read). The image's start-up task (``image/start-broker.ps1`` in this
  package) waits for that file, starts the broker in the console session with the token in
  its environment and writes the readiness record. This is the only way the token reaches
  the guest: never argv, never the VM's Notes.
* :data:`READINESS_SCRIPT` reports the current boot time and the readiness record.
* :data:`TOKEN_SCRIPT` reads the armed record back (recovery reconnects to the same broker).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from autocad_bench.infrastructure import readiness

GUEST_ROOT = "C:\\ProgramData\\AutoCADBench"
ARM_FILE = GUEST_ROOT + "\\secret\\arm.json"
READY_FILE = GUEST_ROOT + "\\state\\ready.json"

ARM_SCRIPT = """param([string]$Token, [string]$BatchId, [string]$RolloutId, [string]$AttemptId, [string]$BrokerVersion)
$dir = 'C:\\ProgramData\\AutoCADBench\\secret'
New-Item -ItemType Directory -Force -Path $dir | Out-Null
$acl = New-Object System.Security.AccessControl.DirectorySecurity
$acl.SetAccessRuleProtection($true, $false)
foreach ($sid in @('S-1-5-18', 'S-1-5-32-544')) {
  $who = New-Object System.Security.Principal.SecurityIdentifier($sid)
  $rule = New-Object System.Security.AccessControl.FileSystemAccessRule(
    $who, 'FullControl', 'ContainerInherit,ObjectInherit', 'None', 'Allow')
  $acl.AddAccessRule($rule)
}
Set-Acl -Path $dir -AclObject $acl
$record = [ordered]@{
  token = $Token; batch_id = $BatchId; rollout_id = $RolloutId; attempt_id = $AttemptId
  broker_version = $BrokerVersion; armed_at = (Get-Date).ToUniversalTime().ToString('o')
}
$tmp = Join-Path $dir 'arm.json.tmp'
[System.IO.File]::WriteAllText($tmp, ($record | ConvertTo-Json -Compress))
Move-Item -Force -Path $tmp -Destination (Join-Path $dir 'arm.json')
[pscustomobject]@{ armed = $true; rollout_id = $RolloutId }"""

READINESS_SCRIPT = """$os = Get-CimInstance -ClassName Win32_OperatingSystem
$report = [ordered]@{ booted_at = $os.LastBootUpTime.ToUniversalTime().ToString('o'); readiness = $null }
$ready = 'C:\\ProgramData\\AutoCADBench\\state\\ready.json'
if (Test-Path -LiteralPath $ready) { $report.readiness = Get-Content -Raw -LiteralPath $ready | ConvertFrom-Json }
[pscustomobject]$report"""

TOKEN_SCRIPT = """$arm = 'C:\\ProgramData\\AutoCADBench\\secret\\arm.json'
if (Test-Path -LiteralPath $arm) {
  Get-Content -Raw -LiteralPath $arm | ConvertFrom-Json |
    Select-Object -Property token, batch_id, rollout_id, attempt_id
}"""


class BrokerReadiness(readiness.BrokerReadiness):
    """The broker's readiness record (``ready.json`` in the guest), written by ``start-broker.ps1``."""

    booted_at: datetime


class ReadinessReport(BaseModel):
    """What :data:`READINESS_SCRIPT` prints: the current boot and the record, if written."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    booted_at: datetime
    readiness: BrokerReadiness | None = None


class ArmedRecord(BaseModel):
    """What :data:`TOKEN_SCRIPT` prints."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    token: str = Field(repr=False)
    batch_id: str
    rollout_id: str
    attempt_id: str


def readiness_problems(report: ReadinessReport, *, rollout_id: str, broker_version: str, broker_port: int,
                       console_user: str) -> list[str]:
    """Handoff evidence of the current boot; empty when the VM is ready for this rollout."""
    ready = report.readiness
    if ready is None:
        return ["the broker has not written its readiness record (not ready yet)"]
    problems = []
    if abs((ready.booted_at - report.booted_at).total_seconds()) > 2:
        problems.append("the readiness record belongs to an earlier boot")
    if ready.ready_at < report.booted_at:
        problems.append("the readiness record predates the current boot")
    problems += readiness.broker_problems(ready, rollout_id=rollout_id, broker_version=broker_version,
                                          broker_port=broker_port)
    if ready.console_user.split("\\")[-1].lower() != console_user.split("\\")[-1].lower():
        problems.append(f"console user is {ready.console_user!r}, not {console_user!r}")
    problems += readiness.desktop_problems(ready)
    return problems
