"""PowerShell scripts as data, and their one rendering to text.

Every host interaction is a :class:`Script`: a few statements, each a pipeline of cmdlets with
named parameters. Values are rendered as single-quoted literals (so no value is ever parsed as
code), secrets as the variables ``$AbSecret0``, ``$AbSecret1``... whose values the runner
delivers out of band (environment of a local ``powershell.exe``, parameters of a PSRP
pipeline): a secret never appears in script text, argv, logs or error messages.

An *exclusive* script runs under the host-wide named mutex ``Global\\AutoCADBenchHyperVPool``,
which makes a read-compare-write of a VM's Notes atomic between every controller that uses
the host. A crashed holder's mutex is abandoned, and the next waiter takes it over.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from autocad_bench_hyperv.bounds import HOST_COMMAND_S, POOL_LOCK_WAIT_MS

POOL_MUTEX = "Global\\AutoCADBenchHyperVPool"
SECRET_PREFIX = "AbSecret"
_QUOTES = "'\u2018\u2019\u201a\u201b"
"""PowerShell treats the typographic single quotes like ``'``: each is doubled inside a literal."""


def quote(value: str) -> str:
    """A single-quoted PowerShell literal of ``value`` (nothing inside is expanded)."""
    for char in _QUOTES:
        value = value.replace(char, char + char)
    return "'" + value + "'"


@dataclass(frozen=True, slots=True)
class Secret:
    """The ``index``-th secret of the script (rendered ``$AbSecret<index>``)."""

    index: int


@dataclass(frozen=True, slots=True)
class Var:
    """A variable assigned earlier in the same script (rendered ``$<name>``)."""

    name: str


@dataclass(frozen=True, slots=True)
class Block:
    """A script block (``{ ... }``): a filter or the script run inside a guest."""

    text: str


Value = str | int | bool | Secret | Var | Block | tuple["Value", ...]


@dataclass(frozen=True, slots=True)
class Cmd:
    """One cmdlet with named parameters (``None`` marks a switch)."""

    name: str
    params: tuple[tuple[str, Value | None], ...] = ()


Pipeline = tuple[Cmd, ...]


@dataclass(frozen=True, slots=True)
class Assign:
    """``$<var> = <pipeline>``."""

    var: str
    pipeline: Pipeline


@dataclass(frozen=True, slots=True)
class If:
    """``if (<condition>) { <body> }``: the body runs when the condition pipeline has output."""

    condition: Pipeline
    body: tuple[Statement, ...]


Statement = Pipeline | Assign | If


@dataclass(frozen=True)
class Script:
    """One host interaction: what the runner sends, with its secrets kept apart."""

    description: str
    statements: tuple[Statement, ...]
    secrets: tuple[str, ...] = field(default=(), repr=False)
    exclusive: bool = False
    timeout_s: float = HOST_COMMAND_S
    read_only: bool = False

    def body(self) -> str:
        """The script text without the runner's prelude (never contains a secret value)."""
        lines = [render_statement(statement) for statement in self.statements]
        if not self.exclusive:
            return "\n".join(lines)
        return "\n".join([*EXCLUSIVE_OPEN, *lines, *EXCLUSIVE_CLOSE])




EXCLUSIVE_OPEN = (
    "$AbMutex = New-Object -TypeName System.Threading.Mutex -ArgumentList @($false, " + quote(POOL_MUTEX) + ")",
    "try { $AbHeld = $AbMutex.WaitOne(" + str(POOL_LOCK_WAIT_MS) + ") } "
    "catch [System.Threading.AbandonedMutexException] { $AbHeld = $true }",
    "if (-not $AbHeld) { throw 'autocad-bench: the Hyper-V pool lock is busy' }",
    "try {",
)
EXCLUSIVE_CLOSE = ("} finally { $AbMutex.ReleaseMutex() }",)
"""The glue of an exclusive script (a test host recognizes exactly these lines)."""


def render_value(value: Value) -> str:
    """``value`` as PowerShell: a quoted literal, ``$true``/``$false``, a number, a ``$`` variable
    (secrets included), a script block or an ``@(...)`` array.
    """
    if isinstance(value, bool):
        return "$true" if value else "$false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, Secret):
        return f"${SECRET_PREFIX}{value.index}"
    if isinstance(value, Var):
        return f"${value.name}"
    if isinstance(value, Block):
        return "{ " + value.text.strip() + " }"
    return "@(" + ", ".join(render_value(item) for item in value) + ")"


def render_cmd(command: Cmd) -> str:
    """One cmdlet with its parameters rendered (``-Name`` for a switch, ``-Name:$true`` for a bool)."""
    parts = [command.name]
    for name, value in command.params:
        if value is None:
            parts.append(f"-{name}")
        elif isinstance(value, bool):
            parts.append(f"-{name}:{render_value(value)}")
        else:
            parts.append(f"-{name} {render_value(value)}")
    return " ".join(parts)


def render_pipeline(pipeline: Pipeline) -> str:
    """The commands of ``pipeline`` joined by ``|``."""
    return " | ".join(render_cmd(command) for command in pipeline)


def render_statement(statement: Statement) -> str:
    """One statement as script text (an assignment, an ``if`` block or a pipeline)."""
    if isinstance(statement, Assign):
        return f"${statement.var} = {render_pipeline(statement.pipeline)}"
    if isinstance(statement, If):
        inner = "\n".join(render_statement(s) for s in statement.body)
        return f"if ({render_pipeline(statement.condition)}) {{\n{inner}\n}}"
    return render_pipeline(statement)


def cmd(name: str, *switches: str, **params: Value | None) -> Cmd:
    """``cmd('Stop-VM', 'TurnOff', Confirm=False)``: switches first, then named parameters in order."""
    return Cmd(name, tuple((s, None) for s in switches) + tuple(params.items()))


def to_json() -> Cmd:
    """The last command of every pipeline whose output the backend reads."""
    return cmd("ConvertTo-Json", "Compress", Depth=4)


def select(*properties: str) -> Cmd:
    """``Select-Object -Property`` with ``properties`` (keeps the JSON the backend reads small)."""
    return cmd("Select-Object", Property=tuple(properties))


def where_notes_equal(notes: str) -> Cmd:
    """Only a VM whose Notes are exactly ``notes`` (case-sensitive) passes."""
    return cmd("Where-Object", FilterScript=Block(f"[string]$_.Notes -ceq {quote(notes)}"))


def where_not_off() -> Cmd:
    """Only a VM whose State is not ``Off`` passes."""
    return cmd("Where-Object", FilterScript=Block("$_.State -ne 'Off'"))


def secrets_of(values: Sequence[str]) -> tuple[Secret, ...]:
    """The :class:`Secret` placeholders for ``values``, in order (nothing in the package
    calls it at present).
    """
    return tuple(Secret(i) for i in range(len(values)))
