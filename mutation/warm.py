"""A pre-warmed pytest for mutation runs: import the third-party stack once, fork per mutant.

Importing pytest, hypothesis, pydantic, ezdxf, aiohttp ... takes most of a short test run, and
cosmic-ray starts the test command once per mutant. ``serve`` imports every third-party module
that the module's tests import (found by one collection pass in a child) and then, for each
``client`` request, forks a child that imports the project's packages fresh from disk (so it
sees the file cosmic-ray just mutated) and runs ``pytest.main``. The client exits with pytest's
exit code; when no server answers it runs pytest itself, so a dead server never reads as
"killed".

    python mutation/warm.py serve SOCKET -- PYTEST_ARGS...
    python mutation/warm.py client SOCKET TIMEOUT -- PYTEST_ARGS...
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import socket
import sys

PROJECT_PREFIXES = ("autocad_bench", "example_autocad_backend", "tests", "conftest", "mutation")


def _is_project(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") or name.startswith(p + "_") for p in PROJECT_PREFIXES)


def _third_party_modules(pytest_args: list[str]) -> list[str]:
    """The non-project modules that collecting ``pytest_args`` imports (found in a child)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        try:
            import pytest

            pytest.main(["--collect-only", "-q", *pytest_args])
            names = sorted(n for n in list(sys.modules) if not _is_project(n) and "__main__" not in n)
            os.write(write, json.dumps(names).encode())
        finally:
            os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 1 << 16):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    return list(json.loads(b"".join(chunks) or b"[]"))


def serve(path: str, pytest_args: list[str]) -> None:
    """Pre-import, then answer one request at a time until killed."""
    sys.dont_write_bytecode = True
    # asyncio before the sorted list below: that list imports ``_asyncio`` (the C tasks) first,
    # after which asyncio's Python task registry and the C one differ, and in every forked
    # child ``asyncio.current_task()`` is None and ``asyncio.timeout()`` refuses to run.
    import asyncio  # noqa: F401

    import pytest  # noqa: F401

    for name in _third_party_modules(pytest_args):
        with contextlib.suppress(BaseException):
            importlib.import_module(name)
    for name in [n for n in sys.modules if _is_project(n)]:
        del sys.modules[name]  # imported by some third-party plugin: the child must re-import it
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped automatically
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(4)
    with open(path + ".ready", "w") as ready:
        ready.write(str(os.getpid()))
    while True:
        conn, _ = server.accept()
        request = json.loads(conn.makefile("rb").readline())
        if os.fork() == 0:
            server.close()
            _child(conn, request)
        conn.close()


def _child(conn: socket.socket, request: dict[str, object]) -> None:
    rc = 3
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.alarm(int(float(str(request["timeout"]))) + 5)  # never outlive the client's timeout
        os.chdir(str(request["cwd"]))
        sys.path[:0] = [str(p) for p in request.get("sys_path") or []]  # type: ignore[attr-defined]
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        import pytest

        rc = int(pytest.main([str(a) for a in request["args"]]))  # type: ignore[attr-defined]
    finally:
        with contextlib.suppress(OSError):
            conn.sendall(f"{rc}\n".encode())
        os._exit(rc)


def client(
    path: str, timeout: float, pytest_args: list[str], *, sys_path: list[str] | None = None, fallback: bool = True
) -> int:
    """Run ``pytest_args`` in a fresh fork of the server (``sys_path`` first on its path); pytest
    in-process if none answers and ``fallback``."""
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(path)
    except OSError:
        if not fallback:
            raise
        import pytest

        return int(pytest.main(pytest_args))
    request = {"cwd": os.getcwd(), "args": pytest_args, "timeout": timeout, "sys_path": sys_path or []}
    conn.sendall(json.dumps(request).encode() + b"\n")
    answer = conn.makefile("rb").readline().strip()
    return int(answer) if answer else 3


def main(argv: list[str]) -> int:
    """Command line: see the module docstring."""
    split = argv.index("--")
    head, args = argv[:split], argv[split + 1 :]
    if head[0] == "serve":
        serve(head[1], args)
        return 0
    return client(head[1], float(head[2]), args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
