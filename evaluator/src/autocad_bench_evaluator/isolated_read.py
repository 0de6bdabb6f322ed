"""Reading an untrusted DXF in a child process with hard memory and time limits.

The reader's own bounds (:class:`~autocad_bench_evaluator.metadata.ReadLimits`) are checked
between tags and between entities; ezdxf's work on one tag stream or one entity runs between
those checks. This module is the backstop for whatever slips through: the parse runs in a
fresh interpreter whose address space is capped (``RLIMIT_AS``, on top of what importing the
evaluator took) and which is killed when it outlives the wall-clock bound. A drawing that
hits either is an :class:`InvalidDrawing` (``memory-limit`` or ``time-limit``); a child that
fails for any other reason is the evaluator's fault and raises :class:`IsolatedReadError`.

The evaluation path (:func:`~autocad_bench_evaluator.evaluate.evaluate`) reads candidates
this way; trusted inputs (the gold drawings) are read in-process. On Windows, where
``resource`` does not exist, only the time limit applies.

Run as ``python -m autocad_bench_evaluator.isolated_read`` it is the child: it reads one
request (JSON) from stdin and writes one result (JSON) to stdout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from autocad_bench_evaluator.metadata import (
    InvalidDrawing,
    ReadLimits,
    ReadResult,
    metadata_from_json_mapping,
)
from autocad_bench_evaluator.spec import SchemaVersion

STARTUP_ALLOWANCE_S = 10.0
"""Wall time allowed on top of ``max_seconds`` for starting the interpreter and importing the
evaluator (about 0.3 s on an idle machine; generous for a loaded one)."""
_MEMORY_ERROR_EXIT = 3


class IsolatedReadError(RuntimeError):
    """The reading child failed for a reason that is not the drawing's: an evaluator fault."""


def read_dxf_isolated(
    path: Path, schema_version: SchemaVersion, limits: ReadLimits, *, source_format: str | None = None
) -> ReadResult:
    """:func:`~autocad_bench_evaluator.dxf_reader.read_dxf` in a child process under
    ``limits.max_memory_bytes`` of extra address space and ``limits.max_seconds`` (plus
    :data:`STARTUP_ALLOWANCE_S`) of wall time. Raises :class:`IsolatedReadError` for a child
    that crashes for another reason."""
    request = {
        "path": str(Path(path).resolve()),
        "schema_version": schema_version,
        "limits": limits.model_dump(mode="json"),
        "source_format": source_format,
    }
    timeout = limits.max_seconds + STARTUP_ALLOWANCE_S
    try:
        done = subprocess.run(
            # -P: the working directory is not put on sys.path, so no file there can stand in
            # for a module the child imports.
            [sys.executable, "-P", "-m", "autocad_bench_evaluator.isolated_read"],
            input=json.dumps(request).encode(),
            capture_output=True,
            timeout=timeout,
            check=False,
            env=_child_environment(),
        )
    except subprocess.TimeoutExpired:
        return InvalidDrawing(
            failure_class="time-limit",
            reason=f"reading the drawing took longer than {timeout:g} s; the reader was stopped",
            size=_size(path),
        )
    if done.returncode == _MEMORY_ERROR_EXIT:
        return InvalidDrawing(
            failure_class="memory-limit",
            reason=f"reading the drawing needed more than {limits.max_memory_bytes // (1024 * 1024)} MiB",
            size=_size(path),
        )
    if done.returncode != 0:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        raise IsolatedReadError(f"the reading child failed: {tail[0][:300]}")
    try:
        return metadata_from_json_mapping(json.loads(done.stdout))
    except ValueError as error:
        raise IsolatedReadError(f"the reading child returned no result: {error}") from None


def _size(path: Path) -> int | None:
    try:
        return Path(path).stat().st_size
    except OSError:
        return None


def _child_environment() -> dict[str, str]:
    env = dict(os.environ)
    # One thread per numeric library: the child only parses, and idle thread pools reserve
    # address space that would count against the memory limit.
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = "1"
    return env


def _limit_memory(extra_bytes: int) -> None:
    """Cap the address space at what the process uses now plus ``extra_bytes``."""
    try:
        import resource
    except ImportError:  # Windows: the time limit is the only backstop
        return
    used = _address_space_bytes()
    if used is None:
        return
    cap = used + extra_bytes
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def _address_space_bytes() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _child(stdin: Any, stdout: Any) -> int:
    from autocad_bench_evaluator.dxf_reader import read_dxf

    request = json.loads(stdin.read())
    limits = ReadLimits.model_validate(request["limits"])
    # Everything the read needs is imported before the cap, so the cap measures the read.
    import ezdxf.document
    import ezdxf.recover  # noqa: F401

    _limit_memory(limits.max_memory_bytes)
    try:
        result = read_dxf(
            Path(request["path"]), request["schema_version"], limits, source_format=request["source_format"]
        )
        data = result.to_json_bytes()
    except MemoryError:
        return _MEMORY_ERROR_EXIT
    stdout.write(data)
    stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.stdin, sys.stdout.buffer))
