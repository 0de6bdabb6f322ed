"""A faithful in-memory Hyper-V host that answers the PowerShell the backend sends.

:class:`FakeHyperVHost` receives exactly what ``powershell.exe`` would receive from
:class:`~autocad_bench_hyperv.runner.LocalPowerShellRunner` (argv with ``-EncodedCommand``,
secrets in ``AUTOCAD_BENCH_PS_SECRET_<i>``), decodes the UTF-16LE script, parses it with
its own parser (independent of the backend's renderer) and executes it against VM state:
power state, Notes, checkpoints (which bring back the Notes they were taken with, as applying
a Hyper-V checkpoint restores the VM configuration), heartbeat, adapters, and a guest that
answers PowerShell Direct. It answers like powershell.exe: exit code, JSON on stdout,
``Cmdlet : message`` on stderr. An unknown cmdlet, an unknown parameter, a missing prelude,
malformed exclusive glue or a positional argument is an error, so a wrong command fails the
test that sends it.

Concurrency: an *exclusive* script holds the host's pool mutex for its whole run (like the
named ``Global\\`` mutex); other scripts yield between pipeline stages and statements, so a
read-compare-write that forgot the lock can interleave with another controller's.

The guest side is emulated by contract: the three script blocks the backend sends into a
VM (arm, readiness, token) are recognised by their exact text and answered the way the
image's ``start-broker.ps1`` would make them answer, with a :class:`FakeBroker` on loopback
as the broker inside the VM.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from autocad_bench.testing.fake_broker import FakeBroker
from autocad_bench_hyperv import guest as guest_scripts

SECRET_ENV = "AUTOCAD_BENCH_PS_SECRET_"
STATES = {"Running": 2, "Off": 3, "Saved": 6}
EXPECTED_FLAGS = ["-NoLogo", "-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass", "-EncodedCommand"]
PRELUDE = ["$ErrorActionPreference = 'Stop'", "$ProgressPreference = 'SilentlyContinue'"]
# The exclusive glue, transcribed independently: a change in the backend must be mirrored here.
GLUE_OPEN = [
    "$AbMutex = New-Object -TypeName System.Threading.Mutex -ArgumentList @($false, 'Global\\AutoCADBenchHyperVPool')",
    "try { $AbHeld = $AbMutex.WaitOne(30000) } catch [System.Threading.AbandonedMutexException] { $AbHeld = $true }",
    "if (-not $AbHeld) { throw 'autocad-bench: the Hyper-V pool lock is busy' }",
    "try {",
]
GLUE_CLOSE = "} finally { $AbMutex.ReleaseMutex() }"

# Every cmdlet the fake knows, with the parameters it accepts (anything else is rejected).
CMDLETS: dict[str, frozenset[str]] = {
    "Get-VM": frozenset({"Name"}),
    "Set-VM": frozenset({"Name", "Notes", "Passthru"}),
    "Start-VM": frozenset({"Name"}),
    "Stop-VM": frozenset({"Name", "TurnOff", "Confirm"}),
    "Get-VMCheckpoint": frozenset({"VMName", "Name"}),
    "Restore-VMCheckpoint": frozenset({"Confirm"}),
    "Get-VMIntegrationService": frozenset({"VMName", "Name"}),
    "Get-VMNetworkAdapter": frozenset({"VMName"}),
    "Invoke-Command": frozenset({"VMName", "Credential", "ScriptBlock", "ArgumentList"}),
    "ConvertTo-SecureString": frozenset({"String", "AsPlainText", "Force"}),
    "New-Object": frozenset({"TypeName", "ArgumentList"}),
    "Where-Object": frozenset({"FilterScript"}),
    "Select-Object": frozenset({"Property"}),
    "ConvertTo-Json": frozenset({"Depth", "Compress"}),
    "Remove-Item": frozenset({"Path"}),
}
ALIASES = {"Get-VMSnapshot": "Get-VMCheckpoint", "Restore-VMSnapshot": "Restore-VMCheckpoint"}
PSCREDENTIAL = "System.Management.Automation.PSCredential"
SWITCHES = {"Passthru", "TurnOff", "AsPlainText", "Force", "Compress"}


class PsError(Exception):
    """A terminating error, reported as ``<cmdlet> : <message>`` with exit code 1."""

    def __init__(self, cmdlet: str, message: str) -> None:
        super().__init__(f"{cmdlet} : {message}")


# --- parsing ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    text: str


@dataclass(frozen=True)
class VarRef:
    name: str


@dataclass(frozen=True)
class EnvRef:
    name: str


@dataclass(frozen=True)
class Bare:
    text: str


@dataclass(frozen=True)
class Command:
    name: str
    params: dict[str, Any]


@dataclass(frozen=True)
class Assignment:
    var: str
    value: Any  # a pipeline (list of Command) or a literal


@dataclass(frozen=True)
class IfStatement:
    condition: list[Command]
    body: list[Any]


class Parser:
    """A recursive-descent parser for the subset of PowerShell the backend may emit."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def error(self, message: str) -> PsError:
        return PsError("ParserError", f"{message} at offset {self.pos}: {self.text[self.pos:self.pos + 40]!r}")

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_spaces(self) -> None:
        while self.peek() in (" ", "\t"):
            self.pos += 1

    def statements(self) -> list[Any]:
        found: list[Any] = []
        while True:
            while self.peek() in (" ", "\t", "\n", "\r", ";"):
                self.pos += 1
            if not self.peek():
                return found
            found.append(self.statement())

    def statement(self) -> Any:
        if self.text.startswith("if (", self.pos):
            self.pos += 4
            condition = self.pipeline(until=")")
            if self.peek() != ")":
                raise self.error("expected )")
            self.pos += 1
            self.skip_spaces()
            body = self.block()
            return IfStatement(condition, Parser(body.text).statements())
        if self.peek() == "$":
            start = self.pos
            name = self.variable_name()
            self.skip_spaces()
            if self.peek() == "=":
                self.pos += 1
                self.skip_spaces()
                if self.peek() in ("'", "$"):
                    return Assignment(name, self.value())
                return Assignment(name, self.pipeline())
            self.pos = start
            raise self.error("a statement may not start with a variable")
        return self.pipeline()

    def pipeline(self, until: str = "") -> list[Command]:
        commands = [self.command(until)]
        while True:
            self.skip_spaces()
            if self.peek() == "|":
                self.pos += 1
                self.skip_spaces()
                commands.append(self.command(until))
                continue
            return commands

    def command(self, until: str) -> Command:
        name = self.bareword()
        if not name:
            raise self.error("expected a command name")
        params: dict[str, Any] = {}
        while True:
            self.skip_spaces()
            char = self.peek()
            if char in ("", "\n", "\r", ";", "|") or (until and char == until):
                return Command(name, params)
            if char != "-":
                raise PsError(name, f"positional arguments are not used by the backend: {self.text[self.pos:][:30]!r}")
            self.pos += 1
            pname = self.bareword(stop=":")
            if pname in params:
                raise PsError(name, f"Cannot bind parameter because parameter '{pname}' is specified more than once.")
            if self.peek() == ":":
                self.pos += 1
                params[pname] = self.value()
                continue
            self.skip_spaces()
            nxt = self.peek()
            if nxt in ("", "\n", "\r", ";", "|", "-") or (until and nxt == until):
                params[pname] = True if pname in SWITCHES else _Missing(pname)
            else:
                params[pname] = self.value()

    def value(self) -> Any:
        char = self.peek()
        if char == "'":
            return self.string()
        if char == "$":
            name = self.variable_name()
            if name == "true":
                return True
            if name == "false":
                return False
            if name.lower().startswith("env:"):
                return EnvRef(name[4:])
            return VarRef(name)
        if self.text.startswith("@(", self.pos):
            self.pos += 2
            items: list[Any] = []
            while True:
                self.skip_spaces()
                if self.peek() == ")":
                    self.pos += 1
                    return items
                items.append(self.value())
                self.skip_spaces()
                if self.peek() == ",":
                    self.pos += 1
                elif self.peek() != ")":
                    raise self.error("expected , or ) in an array")
        if char == "{":
            return self.block()
        if char.isdigit():
            start = self.pos
            while self.peek().isdigit():
                self.pos += 1
            return int(self.text[start:self.pos])
        word = self.bareword()
        if not word:
            raise self.error("expected a value")
        return Bare(word)

    def string(self) -> str:
        assert self.peek() == "'"
        self.pos += 1
        out = []
        while True:
            char = self.peek()
            if not char:
                raise self.error("unterminated string")
            if char == "'":
                if self.text.startswith("''", self.pos):
                    out.append("'")
                    self.pos += 2
                    continue
                self.pos += 1
                return "".join(out)
            if char in "\u2018\u2019\u201a\u201b":
                raise self.error("typographic quotes are quote characters in PowerShell")
            out.append(char)
            self.pos += 1

    def block(self) -> Block:
        if self.peek() != "{":
            raise self.error("expected {")
        depth = 0
        start = self.pos
        in_string = False
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if in_string:
                if char == "'":
                    in_string = False
            elif char == "'":
                in_string = True
            elif char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    self.pos += 1
                    return Block(self.text[start + 1:self.pos - 1].strip())
            self.pos += 1
        raise self.error("unterminated script block")

    def variable_name(self) -> str:
        assert self.peek() == "$"
        self.pos += 1
        start = self.pos
        while self.peek() and (self.peek().isalnum() or self.peek() in "_:"):
            self.pos += 1
        return self.text[start:self.pos]

    def bareword(self, stop: str = "") -> str:
        start = self.pos
        while self.peek() and not self.peek().isspace() and self.peek() not in "|;(){},'" + stop:
            self.pos += 1
        return self.text[start:self.pos]


@dataclass(frozen=True)
class _Missing:
    name: str


# --- VM state ---------------------------------------------------------------------------------


@dataclass
class Checkpoint:
    name: str
    notes: str
    state: str = "Off"


@dataclass
class FakeVm:
    name: str
    notes: str = ""
    state: str = "Off"
    checkpoints: list[Checkpoint] = field(default_factory=list)
    dirty: bool = False
    started_at: float = 0.0
    boot_id: str = ""
    booted_at: datetime | None = None
    armed: dict[str, str] | None = None
    armed_at: float = 0.0
    ready_at: datetime | None = None
    startup_id: str = ""
    broker: FakeBroker | None = None
    history: list[str] = field(default_factory=list)


@dataclass
class SecureString:
    value: str = field(repr=False)


@dataclass
class Credential:
    username: str
    password: str = field(repr=False)


@dataclass
class Service:
    vm: FakeVm
    name: str


@dataclass
class Adapter:
    vm: FakeVm


@dataclass
class Snapshot:
    vm: FakeVm
    checkpoint: Checkpoint


@dataclass
class Faults:
    """Scheduled misbehaviour of the host and its guests."""

    never_heartbeat: set[str] = field(default_factory=set)
    restore_failures: dict[str, int] = field(default_factory=dict)
    readiness_changes: dict[str, dict[str, Any]] = field(default_factory=dict)
    direct_unavailable: dict[str, int] = field(default_factory=dict)


class FakeHyperVHost:
    """One Hyper-V host. ``boot_s``: Start-VM to heartbeat OK; ``ready_s``: arming to readiness record."""

    def __init__(self, name: str, vms: Sequence[str], *, guest_username: str, guest_password: str,
                 brokers: Mapping[str, FakeBroker] | None = None, checkpoint: str = "autocad-bench-clean",
                 broker_version: str = "windows-autocad-2019-v11", boot_s: float = 0.05, ready_s: float = 0.05,
                 stage_delay_s: float = 0.002, mark: bool = True) -> None:
        self.name = name
        self.guest_username = guest_username
        self.guest_password = guest_password
        self.boot_s = boot_s
        self.ready_s = ready_s
        self.stage_delay_s = stage_delay_s
        self.faults = Faults()
        self.vms: dict[str, FakeVm] = {}
        self.mutex = threading.RLock()
        self.state_lock = threading.RLock()
        self.scripts: list[str] = []
        self.cmdlets: list[str] = []
        self.arm_events: dict[str, threading.Event] = {}
        self.leases: list[tuple[str, str, str]] = []  # (vm, previous notes, new notes) of every Notes change
        self.tokens: list[str] = []  # every broker token a guest was armed with
        self.injected_earlier: dict[str, int] = {}  # actions of brokers an earlier boot ran
        free = json.dumps({"autocad_bench": 1, "state": "free", "broker_version": broker_version},
                          separators=(",", ":"))
        for vm in vms:
            # The operator took the checkpoint before marking the clone: the checkpoint's Notes are empty.
            machine = FakeVm(vm, notes=free if mark else "", checkpoints=[Checkpoint(checkpoint, "")])
            machine.broker = (brokers or {}).get(vm)
            self.vms[vm] = machine

    # --- the powershell.exe interface ----------------------------------------------------------

    def execute(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float = 60.0) -> tuple[int, str, str]:
        """Run one ``powershell.exe`` invocation (argv without the program); (exit code, stdout, stderr)."""
        args = list(argv)
        if args[0].lower().endswith(("powershell.exe", "powershell")) or "/" in args[0]:
            args = args[1:]
        if args[:-1] != EXPECTED_FLAGS:
            return 1, "", f"unexpected powershell.exe arguments: {args[:-1]}"
        text = base64.b64decode(args[-1]).decode("utf-16-le")
        self.scripts.append(text)
        try:
            return 0, self.run_script(text, env), ""
        except PsError as error:
            return 1, "", str(error)

    def run_script(self, text: str, env: Mapping[str, str]) -> str:
        lines = text.split("\n")
        if lines[:2] != PRELUDE:
            raise PsError("Prelude", "the script must start with $ErrorActionPreference = 'Stop'")
        variables: dict[str, Any] = {}
        index = 2
        while index + 1 < len(lines) and lines[index].startswith("$AbSecret"):
            number = lines[index].split(" = ")[0][len("$AbSecret"):]
            expected = [f"$AbSecret{number} = $env:{SECRET_ENV}{number}", f"Remove-Item -Path Env:{SECRET_ENV}{number}"]
            if lines[index:index + 2] != expected:
                raise PsError("Prelude", f"malformed secret lines: {lines[index:index + 2]}")
            if f"{SECRET_ENV}{number}" not in env:
                raise PsError("Prelude", f"secret {number} is not in the environment")
            variables[f"AbSecret{number}"] = env[f"{SECRET_ENV}{number}"]
            index += 2
        body = lines[index:]
        exclusive = body[:len(GLUE_OPEN)] == GLUE_OPEN
        if exclusive:
            if body[-1] != GLUE_CLOSE:
                raise PsError("ParserError", "exclusive glue is not closed")
            body = body[len(GLUE_OPEN):-1]
        elif any("AbMutex" in line for line in body):
            raise PsError("ParserError", "malformed exclusive glue")
        statements = Parser("\n".join(body)).statements()
        output: list[str] = []
        if exclusive:
            with self.mutex:
                self._run(statements, variables, output)
        else:
            self._run(statements, variables, output)
        return "\n".join(output)

    # --- execution -------------------------------------------------------------------------------

    def _run(self, statements: list[Any], variables: dict[str, Any], output: list[str]) -> None:
        for statement in statements:
            time.sleep(self.stage_delay_s)
            if isinstance(statement, Assignment):
                if isinstance(statement.value, list):
                    result = self._pipeline(statement.value, variables)
                    variables[statement.var] = result[0] if len(result) == 1 else result
                else:
                    variables[statement.var] = self._resolve(statement.value, variables, "Assignment")
            elif isinstance(statement, IfStatement):
                if self._pipeline(statement.condition, variables):
                    self._run(statement.body, variables, output)
            else:
                for item in self._pipeline(statement, variables):
                    if not isinstance(item, str):
                        raise PsError("Output", "the backend must convert every output to JSON")
                    output.append(item)

    def _pipeline(self, commands: list[Command], variables: dict[str, Any]) -> list[Any]:
        items: list[Any] | None = None
        for command in commands:
            name = ALIASES.get(command.name, command.name)
            if name not in CMDLETS:
                raise PsError(command.name, f"The term '{command.name}' is not recognized as the name of a "
                              "cmdlet, function, script file, or operable program.")
            for pname, value in command.params.items():
                if pname not in CMDLETS[name]:
                    raise PsError(name, f"A parameter cannot be found that matches parameter name '{pname}'.")
                if isinstance(value, _Missing):
                    raise PsError(name, f"Missing an argument for parameter '{pname}'.")
            params = {k: self._resolve(v, variables, name) for k, v in command.params.items()}
            self.cmdlets.append(name)
            with self.state_lock:
                items = getattr(self, "_" + name.replace("-", "_").lower())(params, items)
            time.sleep(self.stage_delay_s)
        return items or []

    def _resolve(self, value: Any, variables: dict[str, Any], cmdlet: str) -> Any:
        if isinstance(value, VarRef):
            if value.name not in variables:
                raise PsError(cmdlet, f"variable ${value.name} is not set")
            return variables[value.name]
        if isinstance(value, list):
            return [self._resolve(v, variables, cmdlet) for v in value]
        if isinstance(value, EnvRef):
            raise PsError(cmdlet, "$env: is only read by the secret prelude")
        return value

    def _vm(self, cmdlet: str, name: Any) -> FakeVm:
        if not isinstance(name, str) or name not in self.vms:
            raise PsError(cmdlet, f'Hyper-V was unable to find a virtual machine with name "{name}".')
        return self.vms[name]

    def _names(self, cmdlet: str, value: Any) -> list[FakeVm]:
        names = value if isinstance(value, list) else [value]
        return [self._vm(cmdlet, n) for n in names]

    @staticmethod
    def _require_vms(cmdlet: str, items: list[Any] | None) -> list[FakeVm]:
        if items is None:
            raise PsError(cmdlet, "no input and no -Name")
        for item in items:
            if not isinstance(item, FakeVm):
                raise PsError(cmdlet, f"The input object cannot be bound to any parameters: {type(item).__name__}")
        return list(items)

    # Hyper-V ---------------------------------------------------------------------------------------

    def _get_vm(self, params: dict[str, Any], items: list[Any] | None) -> list[Any]:
        if items is not None:
            raise PsError("Get-VM", "Get-VM does not take pipeline input here")
        if "Name" in params:
            return self._names("Get-VM", params["Name"])
        return list(self.vms.values())

    def _set_vm(self, params: dict[str, Any], items: list[Any] | None) -> list[Any]:
        vms = self._names("Set-VM", params["Name"]) if "Name" in params else self._require_vms("Set-VM", items)
        if "Name" in params and items is not None:
            raise PsError("Set-VM", "both -Name and pipeline input")
        if "Notes" in params:
            if not isinstance(params["Notes"], str):
                raise PsError("Set-VM", "-Notes takes a string")
            for vm in vms:
                self.leases.append((vm.name, vm.notes, params["Notes"]))
                vm.notes = params["Notes"]
                vm.history.append("notes")
        return vms if params.get("Passthru") else []

    def _start_vm(self, params: dict[str, Any], items: list[Any] | None) -> list[Any]:
        for vm in self._names("Start-VM", params.get("Name")):
            if vm.state == "Running":
                raise PsError("Start-VM", f"'{vm.name}' failed to change state: the operation cannot be performed "
                              "while the object is in its current state.")
            vm.state = "Running"
            vm.dirty = True
            vm.started_at = time.monotonic()
            vm.boot_id = f"boot-{secrets.token_hex(4)}"
            vm.booted_at = datetime.now(UTC).replace(microsecond=0)
            vm.armed = None
            vm.ready_at = None
            vm.history.append("start")
            if vm.broker is not None:
                vm.broker.token = secrets.token_urlsafe(24)  # a broker that nobody armed accepts nobody
        return []

    def _stop_vm(self, params: dict[str, Any], items: list[Any] | None) -> list[Any]:
        if params.get("TurnOff") is not True or params.get("Confirm") is not False:
            raise PsError("Stop-VM", "the backend must turn off without a prompt (-TurnOff -Confirm:$false)")
        vms = self._names("Stop-VM", params["Name"]) if "Name" in params else self._require_vms("Stop-VM", items)
        for vm in vms:
            if vm.state == "Off":
                raise PsError("Stop-VM", f"'{vm.name}' is already turned off.")
            vm.state = "Off"
            vm.armed = None
            vm.history.append("turn-off")
            if vm.broker is not None:
                vm.broker.token = secrets.token_urlsafe(24)
        return []

    def _get_vmcheckpoint(self, params: dict[str, Any], items: list[Any] | None) -> list[Any]:
        found: list[Any] = []
        for vm in self._names("Get-VMCheckpoint", params.get("VMName")):
            found += [Snapshot(vm, c) for c in vm.checkpoints if "Name" not in params or c.name == params["Name"]]
        if "Name" in params and not found:
            raise PsError("Get-VMCheckpoint", "Unable to find a snapshot matching the given criteria.")
        return found

    def _restore_vmcheckpoint(self, params: dict[str, Any], items: list[Any] | None) -> list[Any]:
        if params.get("Confirm") is not False:
            raise PsError("Restore-VMCheckpoint", "the backend must restore without a prompt (-Confirm:$false)")
        for item in items or []:
            if not isinstance(item, Snapshot):
                raise PsError("Restore-VMCheckpoint", "pipeline input must be a checkpoint")
            vm = item.vm
            if self.faults.restore_failures.get(vm.name, 0) > 0:
                self.faults.restore_failures[vm.name] -= 1
                raise PsError("Restore-VMCheckpoint", f"'{vm.name}' failed to apply checkpoint: the storage is busy.")
            if vm.state == "Running":
                raise PsError("Restore-VMCheckpoint", f"'{vm.name}' is running; turn it off first.")
            vm.state = item.checkpoint.state
            vm.notes = item.checkpoint.notes
            vm.dirty = False
            vm.armed = None
            vm.ready_at = None
            vm.history.append("restore")
        return []

    def _get_vmintegrationservice(self, params: dict[str, Any], items: list[Any] | None) -> list[Any]:
        vm = self._vm("Get-VMIntegrationService", params.get("VMName"))
        if params.get("Name") != "Heartbeat":
            raise PsError("Get-VMIntegrationService", f"no integration service named {params.get('Name')!r}")
        return [Service(vm, "Heartbeat")]

    def _get_vmnetworkadapter(self, params: dict[str, Any], items: list[Any] | None) -> list[Any]:
        return [Adapter(self._vm("Get-VMNetworkAdapter", params.get("VMName")))]

    def heartbeat_ok(self, vm: FakeVm) -> bool:
        return (vm.state == "Running" and vm.name not in self.faults.never_heartbeat
                and time.monotonic() - vm.started_at >= self.boot_s)

    # Objects and formatting ------------------------------------------------------------------------

    def _where_object(self, params: dict[str, Any], items: list[Any] | None) -> list[Any]:
        block = params.get("FilterScript")
        if not isinstance(block, Block):
            raise PsError("Where-Object", "-FilterScript takes a script block")
        notes = Parser(block.text)
        if block.text.startswith("[string]$_.Notes -ceq '"):
            notes.pos = len("[string]$_.Notes -ceq ")
            wanted = notes.string()
            if notes.pos != len(block.text):
                raise PsError("Where-Object", f"unsupported filter {block.text!r}")
            return [vm for vm in self._require_vms("Where-Object", items) if vm.notes == wanted]
        if block.text == "$_.State -ne 'Off'":
            return [vm for vm in self._require_vms("Where-Object", items) if vm.state != "Off"]
        raise PsError("Where-Object", f"the fake host does not evaluate the filter {block.text!r}")

    def _select_object(self, params: dict[str, Any], items: list[Any] | None) -> list[Any]:
        properties = params.get("Property")
        if not isinstance(properties, list) or not all(isinstance(p, str) for p in properties):
            raise PsError("Select-Object", "-Property takes an array of names")
        return [{p: self._property(item, p) for p in properties} for item in items or []]

    def _property(self, item: Any, name: str) -> Any:
        if isinstance(item, FakeVm):
            return {"Name": item.name, "State": STATES.get(item.state, 1), "Notes": item.notes}.get(name)
        if isinstance(item, Snapshot):
            return {"VMName": item.vm.name, "Name": item.checkpoint.name}.get(name)
        if isinstance(item, Service):
            status = "OK" if self.heartbeat_ok(item.vm) else ("No Contact" if item.vm.state == "Running" else None)
            return {"VMName": item.vm.name, "Name": item.name, "Enabled": True,
                    "PrimaryStatusDescription": status}.get(name)
        if isinstance(item, Adapter):
            ips = ["127.0.0.1", "fe80::215:5dff:fe00:1"] if self.heartbeat_ok(item.vm) else []
            return {"VMName": item.vm.name, "IPAddresses": ips}.get(name)
        return None

    def _convertto_json(self, params: dict[str, Any], items: list[Any] | None) -> list[Any]:
        if params.get("Compress") is not True or not isinstance(params.get("Depth"), int):
            raise PsError("ConvertTo-Json", "expected -Compress and -Depth")
        values = [self._plain(item) for item in items or []]
        if not values:
            return []
        return [json.dumps(values[0] if len(values) == 1 else values, separators=(",", ":"))]

    def _plain(self, item: Any) -> Any:
        if isinstance(item, dict):
            return item
        raise PsError("ConvertTo-Json", f"the fake only serializes selected properties, not {type(item).__name__}")

    def _convertto_securestring(self, params: dict[str, Any], items: list[Any] | None) -> list[Any]:
        if params.get("AsPlainText") is not True or params.get("Force") is not True:
            raise PsError("ConvertTo-SecureString", "plain text needs -AsPlainText -Force")
        if not isinstance(params.get("String"), str):
            raise PsError("ConvertTo-SecureString", "-String takes a string")
        return [SecureString(params["String"])]

    def _new_object(self, params: dict[str, Any], items: list[Any] | None) -> list[Any]:
        type_name = params.get("TypeName")
        if (type_name.text if isinstance(type_name, Bare) else type_name) != PSCREDENTIAL:
            raise PsError("New-Object", f"the fake only builds PSCredential, not {params.get('TypeName')}")
        arguments = params.get("ArgumentList")
        if (not isinstance(arguments, list) or len(arguments) != 2 or not isinstance(arguments[0], str)
                or not isinstance(arguments[1], SecureString)):
            raise PsError("New-Object", "PSCredential takes (user name, SecureString)")
        return [Credential(arguments[0], arguments[1].value)]

    def _remove_item(self, params: dict[str, Any], items: list[Any] | None) -> list[Any]:
        raise PsError("Remove-Item", "only the secret prelude removes items")

    # PowerShell Direct -------------------------------------------------------------------------------

    def _invoke_command(self, params: dict[str, Any], items: list[Any] | None) -> list[Any]:
        vm = self._vm("Invoke-Command", params.get("VMName"))
        credential = params.get("Credential")
        if not isinstance(credential, Credential):
            raise PsError("Invoke-Command", "-Credential takes a PSCredential")
        block = params.get("ScriptBlock")
        if not isinstance(block, Block):
            raise PsError("Invoke-Command", "-ScriptBlock takes a script block")
        arguments = params.get("ArgumentList", [])
        if not isinstance(arguments, list):
            arguments = [arguments]
        if not self.heartbeat_ok(vm):
            raise PsError("Invoke-Command", "An error has occurred which Windows PowerShell cannot handle. A remote "
                          "session might have ended.")
        if self.faults.direct_unavailable.get(vm.name, 0) > 0:
            self.faults.direct_unavailable[vm.name] -= 1
            raise PsError("Invoke-Command", "The virtual machine is not ready for PowerShell Direct yet.")
        if (credential.username, credential.password) != (self.guest_username, self.guest_password):
            raise PsError("Invoke-Command", "The credential is invalid.")
        text = block.text
        if text == guest_scripts.ARM_SCRIPT.strip():
            return [self._guest_arm(vm, arguments)]
        if text == guest_scripts.READINESS_SCRIPT.strip():
            return [self._guest_readiness(vm)]
        if text == guest_scripts.TOKEN_SCRIPT.strip():
            return [self._guest_token(vm)] if vm.armed else []
        raise PsError("Invoke-Command", "the fake guest runs only the backend's arm, readiness and token scripts")

    def _guest_arm(self, vm: FakeVm, arguments: list[Any]) -> dict[str, Any]:
        if len(arguments) != 5 or not all(isinstance(a, str) for a in arguments):
            raise PsError("Invoke-Command", f"the arm script takes five strings, got {len(arguments)}")
        token, batch_id, rollout_id, attempt_id, version = arguments
        self.tokens.append(token)
        if vm.armed is None:
            vm.armed = {"token": token, "batch_id": batch_id, "rollout_id": rollout_id, "attempt_id": attempt_id,
                        "broker_version": version}
            vm.armed_at = time.monotonic()
            vm.startup_id = secrets.token_hex(8)
            vm.history.append("armed")
            if vm.broker is not None:
                # start-broker.ps1: the broker starts with the armed token in its environment.
                vm.broker.token = token
                vm.broker.boot_id = vm.boot_id
                vm.broker.startup_id = vm.startup_id
                self.injected_earlier[vm.name] = self.injected_earlier.get(vm.name, 0) + len(vm.broker.injected)
                vm.broker.clear()
        event = self.arm_events.get(vm.name)
        if event is not None:
            event.set()
        return {"armed": True, "rollout_id": rollout_id, **self._remoting(vm)}

    def _guest_readiness(self, vm: FakeVm) -> dict[str, Any]:
        assert vm.booted_at is not None
        report: dict[str, Any] = {"booted_at": vm.booted_at.isoformat(), "readiness": None, **self._remoting(vm)}
        if vm.armed is not None and vm.broker is not None and time.monotonic() - vm.armed_at >= self.ready_s:
            if vm.ready_at is None:
                vm.ready_at = datetime.now(UTC)
            broker = vm.broker
            record = {
                "rollout_id": vm.armed["rollout_id"], "boot_id": vm.boot_id, "booted_at": vm.booted_at.isoformat(),
                "startup_id": vm.startup_id, "pid": 12345, "ready_at": vm.ready_at.isoformat(),
                "interactive_session_id": 1, "console_user": "Administrator",
                "desktop_width": broker.display.width, "desktop_height": broker.display.height,
                "broker_version": broker.broker_version, "input_driver_version": "fake-input-1",
                "manifest_sha256": broker.manifest_sha256, "broker_port": 8765,
            }
            record.update(self.faults.readiness_changes.get(vm.name, {}))
            report["readiness"] = record
        return report

    def _guest_token(self, vm: FakeVm) -> dict[str, Any]:
        assert vm.armed is not None
        return {k: vm.armed[k] for k in ("token", "batch_id", "rollout_id", "attempt_id")} | self._remoting(vm)

    def _remoting(self, vm: FakeVm) -> dict[str, Any]:
        return {"PSComputerName": vm.name, "RunspaceId": "5d0c7f1e-0000-4000-8000-000000000000",
                "PSShowComputerName": True}

    # --- test helpers -----------------------------------------------------------------------------------

    def snapshot(self) -> tuple[tuple[str, str, str, bool, int], ...]:
        with self.state_lock:
            return tuple((vm.name, vm.state, vm.notes, vm.dirty, len(vm.checkpoints)) for vm in self.vms.values())

    def mark(self, vm: str) -> dict[str, Any] | None:
        notes = self.vms[vm].notes
        return json.loads(notes) if notes.startswith("{") else None

    def injected_total(self, vm: str) -> int:
        """Every action the VM's broker injected across boots."""
        broker = self.vms[vm].broker
        return self.injected_earlier.get(vm, 0) + (len(broker.injected) if broker is not None else 0)

    def executor(self) -> Callable[[Sequence[str], Mapping[str, str], float], tuple[int, str, str]]:
        return self.execute

