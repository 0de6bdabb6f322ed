"""Read-only admission checks of the local-xvfb backend: tools, broker, state directory, capacity.

Nothing here starts a process, creates a file or imports the broker's server module: a
plan-mode run on a machine without the packages must only say what is missing and how to
install it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from autocad_bench.errors import missing_extra_message
from autocad_bench.infrastructure import CheckResult, PreflightReport, PreflightRequest
from autocad_bench_xvfb.settings import LocalXvfbSettings, Tool

INSTALL_HINT = "apt-get install -y xvfb librecad xdotool"
TOOLS: tuple[tuple[Tool, str], ...] = (("xvfb", "Xvfb"), ("librecad", "LibreCAD"), ("xdotool", "xdotool"))


def cpu_count() -> int:
    """CPUs this process may run on (its affinity on Linux, else the machine's count; at least 1)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def available_memory_mb() -> int | None:
    """``MemAvailable`` from ``/proc/meminfo`` in MiB; None when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def tool_check(settings: LocalXvfbSettings, tool: Tool, label: str) -> CheckResult:
    """Whether the ``tool`` executable of ``settings`` is found (a path, or a name on ``PATH``).

    A missing tool fails the check with the install hint; ``label`` names it in the reason.
    """
    command = settings.executable(tool)
    found = shutil.which(command)
    if found is None:
        where = f"{command!r} is not an executable file" if os.sep in command else f"{command!r} is not on PATH"
        return CheckResult(name=tool, passed=False, reason=f"{label} not found ({where}): {INSTALL_HINT}",
                           details={"command": command, "install": INSTALL_HINT})
    return CheckResult(name=tool, passed=True, reason=f"{label} found at {found}", details={"path": found})


def broker_check(broker_command: Sequence[str], default: bool) -> CheckResult:
    """Whether the broker can be started: the custom ``broker_command``'s program is found, or
    (``default``) ``autocad_bench_broker`` and its server entry point are importable.

    A missing broker package fails with the extra to install; nothing is imported or started.
    """
    if not default:
        program = broker_command[0]
        found = shutil.which(program)
        return CheckResult(name="broker", passed=found is not None,
                           reason=f"broker command {program!r} {'found' if found else 'not found'}")
    if importlib.util.find_spec("autocad_bench_broker") is None:
        return CheckResult(name="broker", passed=False,
                           reason=missing_extra_message("the broker package autocad_bench_broker", "broker"))
    try:
        server = importlib.util.find_spec("autocad_bench_broker.__main__")
    except (ImportError, ValueError):
        server = None
    if server is None:
        return CheckResult(name="broker", passed=False,
                           reason="autocad_bench_broker is installed but has no server command "
                                  "(python -m autocad_bench_broker serve); upgrade autocad-bench-broker")
    return CheckResult(name="broker", passed=True, reason="autocad_bench_broker is importable and has its server")


def state_dir_check(state_dir: Path) -> CheckResult:
    """Whether worker records can be created in ``state_dir``.

    Fails when the nearest existing ancestor is not a directory writable and searchable by this user.
    """
    existing = state_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    writable = existing.is_dir() and os.access(existing, os.W_OK | os.X_OK)
    return CheckResult(name="state_dir", passed=writable,
                       reason=(f"worker records go to {state_dir}" if writable
                               else f"cannot create worker records in {state_dir} ({existing} is not writable)"),
                       details={"path": str(state_dir)})


def capacity(settings: LocalXvfbSettings) -> tuple[int, str]:
    """How many desktops fit at once, by CPUs and available memory, and why (the reason text).

    When the available memory is unknown only the CPUs count; never negative.
    """
    cpus = cpu_count()
    memory = available_memory_mb()
    by_cpu = int(cpus / settings.cpus_per_rollout)
    by_memory = memory // settings.memory_per_rollout_mb if memory is not None else by_cpu
    reason = (f"{cpus} CPUs / {settings.cpus_per_rollout} per rollout = {by_cpu}; "
              + (f"{memory} MiB available / {settings.memory_per_rollout_mb} MiB per rollout = {by_memory}"
                 if memory is not None else "available memory unknown"))
    return max(0, min(by_cpu, by_memory)), reason


def run_preflight(request: PreflightRequest, settings: LocalXvfbSettings, state_dir: Path,
                  broker_command: Sequence[str], default_broker: bool) -> PreflightReport:
    """The admission report of the local-xvfb backend: platform, tools, broker, state directory, capacity.

    The admitted wave is the smallest of the requested concurrency, the number of assignments and
    the capacity; the report passes only when every check does. Read-only: starts nothing,
    creates nothing.
    """
    linux = sys.platform.startswith("linux")
    checks = [CheckResult(name="platform", passed=linux,
                          reason="Linux (/proc and Xvfb)" if linux else f"local-xvfb needs Linux, not {sys.platform}")]
    checks += [tool_check(settings, tool, label) for tool, label in TOOLS]
    checks.append(broker_check(broker_command, default_broker))
    checks.append(state_dir_check(state_dir))
    slots, reason = capacity(settings)
    wave = max(0, min(request.max_concurrency, len(request.assignments), slots))
    checks.append(CheckResult(name="capacity", passed=slots >= 1,
                              reason=f"{reason}; admitting {wave} desktop(s) at once",
                              details={"capacity": slots, "admitted_wave": wave}))
    return PreflightReport(checks=tuple(checks), admitted_wave=wave)
