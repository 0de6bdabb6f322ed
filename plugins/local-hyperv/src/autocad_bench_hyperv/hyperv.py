"""Typed Hyper-V operations on one host, each one :class:`~autocad_bench_hyperv.commands.Script`.

The cmdlets and parameters used, all from the Hyper-V module of Windows Server 2016+ /
Windows PowerShell 5.1: ``Get-VM``, ``Set-VM -Notes``, ``Start-VM``,
``Stop-VM -TurnOff``, ``Get-VMCheckpoint``, ``Restore-VMCheckpoint``,
``Get-VMIntegrationService``, ``Get-VMNetworkAdapter`` and ``Invoke-Command -VMName``
(PowerShell Direct). Every mutation of a VM's Notes is a compare-and-set under the pool lock
(see :mod:`autocad_bench_hyperv.commands`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from autocad_bench_hyperv.bounds import GUEST_COMMAND_S
from autocad_bench_hyperv.commands import (
    Assign,
    Block,
    If,
    Script,
    Secret,
    Var,
    cmd,
    select,
    to_json,
    where_not_off,
    where_notes_equal,
)
from autocad_bench_hyperv.runner import CommandRunner, HostCommandError, run_read

# Microsoft.HyperV.PowerShell.VMState: ConvertTo-Json in Windows PowerShell 5.1 writes enums as numbers.
VM_STATES: dict[int, str] = {
    1: "Other", 2: "Running", 3: "Off", 4: "Stopping", 6: "Saved", 9: "Paused", 10: "Starting", 11: "Reset",
    32773: "Saving", 32776: "Pausing", 32777: "Resuming", 32779: "FastSaved", 32780: "FastSaving",
    32781: "ForceShutdown", 32782: "ForceReboot", 32783: "Hibernated", 32784: "ComponentServicing",
    32785: "RunningCritical", 32786: "OffCritical", 32787: "StoppingCritical", 32788: "SavedCritical",
    32789: "PausedCritical", 32790: "StartingCritical", 32791: "ResetCritical", 32792: "SavingCritical",
    32793: "PausingCritical", 32794: "ResumingCritical", 32795: "FastSavedCritical", 32796: "FastSavingCritical",
}
HEARTBEAT_OK = "OK"
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class VmInfo:
    """One VM as ``Get-VM`` lists it: its name, state name and Notes (empty when unset)."""

    name: str
    state: str
    notes: str


def state_name(raw: Any) -> str:
    """The name of a VM state as ``ConvertTo-Json`` wrote it (a number, a ``{Value: ...}``
    object or a string); ``State<n>`` for a number not in :data:`VM_STATES`.
    """
    if isinstance(raw, int):
        return VM_STATES.get(raw, f"State{raw}")
    if isinstance(raw, dict) and "Value" in raw:
        return state_name(raw["Value"])
    return str(raw)


def _vm(item: Any) -> VmInfo:
    if not isinstance(item, dict) or "Name" not in item:
        raise ValueError(f"not a VM: {item!r}"[:200])
    return VmInfo(name=str(item["Name"]), state=state_name(item.get("State")), notes=str(item.get("Notes") or ""))


class HostClient:
    """The Hyper-V operations the backend uses, on one host."""

    def __init__(self, runner: CommandRunner) -> None:
        self.runner = runner
        self.host = runner.host

    # --- reads ------------------------------------------------------------------------------

    def list_vms(self, *, exclusive: bool = False) -> dict[str, VmInfo]:
        """Every VM of the host by name (one ``Get-VM``; pools are small).

        ``exclusive`` reads under the pool lock, so the Notes a restore briefly brings back from
        the checkpoint (before the same locked script re-marks the VM) are never seen.
        """
        items = run_read(self.runner, Script(
            "list VMs", ((cmd("Get-VM"), select("Name", "State", "Notes"), to_json()),), read_only=True,
            exclusive=exclusive))
        vms = [_vm(item) for item in items]
        return {vm.name: vm for vm in vms}

    def get_vm(self, name: str) -> VmInfo:
        items = run_read(self.runner, Script(
            f"read {name}", ((cmd("Get-VM", Name=name), select("Name", "State", "Notes"), to_json()),),
            read_only=True))
        if len(items) != 1:
            raise HostCommandError(self.host, f"read {name}", f"expected one VM, got {len(items)}")
        return _vm(items[0])

    def checkpoints(self, vms: Sequence[str]) -> dict[str, list[str]]:
        """Checkpoint names per VM (``Get-VMCheckpoint``); VMs without any are absent."""
        if not vms:
            return {}
        items = run_read(self.runner, Script("list checkpoints", (
            (cmd("Get-VMCheckpoint", VMName=tuple(vms)), select("VMName", "Name"), to_json()),), read_only=True))
        found: dict[str, list[str]] = {}
        for item in items:
            if isinstance(item, dict):
                found.setdefault(str(item.get("VMName")), []).append(str(item.get("Name")))
        return found

    def heartbeat(self, vm: str) -> str:
        """``PrimaryStatusDescription`` of the Heartbeat integration service ("OK" when the guest answers)."""
        items = run_read(self.runner, Script(f"heartbeat of {vm}", ((
            cmd("Get-VMIntegrationService", VMName=vm, Name="Heartbeat"),
            select("VMName", "Name", "Enabled", "PrimaryStatusDescription"), to_json()),), read_only=True))
        if not items or not isinstance(items[0], dict):
            return "missing"
        if items[0].get("Enabled") is False:
            return "disabled"
        return str(items[0].get("PrimaryStatusDescription") or "unknown")

    def addresses(self, vm: str) -> list[str]:
        """IP addresses Hyper-V reports for the VM's adapters (needs the guest's integration services)."""
        items = run_read(self.runner, Script(f"addresses of {vm}", ((
            cmd("Get-VMNetworkAdapter", VMName=vm), select("VMName", "IPAddresses"), to_json()),), read_only=True))
        found: list[str] = []
        for item in items:
            raw = item.get("IPAddresses") if isinstance(item, dict) else None
            if isinstance(raw, list):
                found += [str(a) for a in raw]
            elif isinstance(raw, str):
                found.append(raw)
        return found

    # --- marks (compare-and-set under the pool lock) -------------------------------------------

    def swap_notes(self, vm: str, expected: str, desired: str) -> bool:
        """Set the Notes to ``desired`` only if they are exactly ``expected``; True when swapped."""
        items = self.runner.run(Script(f"mark {vm}", (
            (cmd("Get-VM", Name=vm), where_notes_equal(expected), cmd("Set-VM", "Passthru", Notes=desired),
             select("Name", "State", "Notes"), to_json()),), exclusive=True))
        return any(_vm(item).notes == desired for item in items)

    def reset_vm(self, vm: str, checkpoint: str, expected: str, desired: str) -> bool:
        """If the Notes are still ``expected``: turn off, restore ``checkpoint``, write ``desired``.

        All under the pool lock, so no other controller sees the Notes a restore may bring back
        from the checkpoint. Returns False (and changes nothing) when the VM is no longer ours.
        """
        items = self.runner.run(Script(f"restore {vm} to {checkpoint}", (If(
            (cmd("Get-VM", Name=vm), where_notes_equal(expected)),
            ((cmd("Get-VM", Name=vm), where_not_off(), cmd("Stop-VM", "TurnOff", Confirm=False)),
             (cmd("Get-VMCheckpoint", VMName=vm, Name=checkpoint), cmd("Restore-VMCheckpoint", Confirm=False)),
             (cmd("Set-VM", Name=vm, Notes=desired),),
             (cmd("Get-VM", Name=vm), select("Name", "State", "Notes"), to_json()))),), exclusive=True))
        return any(_vm(item).notes == desired for item in items)

    # --- power --------------------------------------------------------------------------------

    def start(self, vm: str) -> None:
        self.runner.run(Script(f"start {vm}", ((cmd("Start-VM", Name=vm),),)))

    def turn_off(self, vm: str) -> None:
        self.runner.run(Script(f"turn off {vm}", ((cmd("Get-VM", Name=vm), where_not_off(),
                                                   cmd("Stop-VM", "TurnOff", Confirm=False)),)))

    # --- guest (PowerShell Direct) -------------------------------------------------------------

    def guest(self, vm: str, description: str, script: str, arguments: Sequence[str | Secret], *,
              username: str, password: str, secrets: Sequence[str] = ()) -> list[Any]:
        """Run ``script`` in the guest with ``Invoke-Command -VMName`` as ``username``.

        The password is secret 0; ``secrets`` follow it (referenced as ``Secret(1)``...).
        """
        statements = (
            Assign("AbPassword", (cmd("ConvertTo-SecureString", "AsPlainText", "Force", String=Secret(0)),)),
            Assign("AbCredential", (cmd("New-Object", TypeName="System.Management.Automation.PSCredential",
                                        ArgumentList=(username, Var("AbPassword"))),)),
            (cmd("Invoke-Command", VMName=vm, Credential=Var("AbCredential"), ScriptBlock=Block(script),
                 ArgumentList=tuple(arguments)), to_json()),
        )
        return self.runner.run(Script(f"{description} in {vm}", statements, secrets=(password, *secrets),
                                      timeout_s=GUEST_COMMAND_S))

    def close(self) -> None:
        self.runner.close()


def parse_one(model: type[M], items: list[Any], what: str) -> M | None:
    """The first printed object as ``model``; None when nothing was printed; ValueError when malformed."""
    if not items:
        return None
    try:
        return model.model_validate(items[0])
    except ValidationError as error:
        raise ValueError(f"{what} is malformed: {error.error_count()} problems, first: {error.errors()[0]['msg']}")\
            from None
