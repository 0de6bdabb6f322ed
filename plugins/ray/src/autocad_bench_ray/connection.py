"""Joining the Ray cluster a batch names, and the local cluster ``local_cluster`` starts.

Ray is imported here and in the other modules of this package only, never by core. Before
the first import this module sets two Ray switches unless the operator set them:
``RAY_ENABLE_UV_RUN_RUNTIME_ENV=0`` (under ``uv run`` Ray would otherwise ship and rebuild
the whole working directory for every worker) and, for a local cluster only,
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (every node on 127.0.0.1, nothing on the network).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading

from autocad_bench_ray.settings import LocalClusterSettings, RaySettings

_lock = threading.RLock()
_connected: str | None = None
_local: dict[str, _LocalCluster] = {}
"""batch id -> the local cluster process this process started for it."""
LOCAL_CLUSTER_STOP_S = 60.0
"""A local cluster's shutdown after its stdin closed, before SIGKILL of its process group."""


class ClusterUnavailable(Exception):
    """The Ray cluster cannot be reached or started."""


def prepare_environment(local: bool) -> None:
    """Set Ray's switches (see the module docstring) before Ray is imported; never overrides the operator."""
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    if local:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


def connect(address: str) -> None:
    """Connect this process to the cluster at ``address`` (again only if it is another one).

    Raises :class:`ClusterUnavailable` when Ray cannot connect.
    """
    global _connected
    prepare_environment(local=address.startswith("127."))
    import ray

    with _lock:
        if ray.is_initialized() and _connected == address:
            return
        if ray.is_initialized():
            ray.shutdown()
        # Ray installs signal handlers of its own in a driver; the caller's (the wrapper's bounded
        # stop, the controller's graceful stop) must stay in charge of SIGTERM and SIGINT.
        main = threading.current_thread() is threading.main_thread()
        handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)} if main else {}
        try:
            ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR, configure_logging=False)
        except Exception as error:  # Ray raises ConnectionError, RuntimeError, TimeoutError...
            raise ClusterUnavailable(f"cannot connect to the Ray cluster at {address}: "
                                     f"{type(error).__name__}: {error}") from error
        finally:
            for signum, handler in handlers.items():
                if handler is not None:
                    signal.signal(signum, handler)
        _connected = address


def start_local_cluster(batch_id: str, local: LocalClusterSettings, resource: str) -> str:
    """Start (once per batch and process) ``local.nodes`` Ray nodes on 127.0.0.1; returns the address.

    The cluster runs in a child process (:mod:`autocad_bench_ray.local_cluster`; Ray starts
    nodes from a main thread only) that stops when this process closes its stdin, also when
    this process is killed. Raises :class:`ClusterUnavailable` when it does not start within
    ``local.start_timeout_s``.
    """
    prepare_environment(local=True)
    with _lock:
        process = _local.get(batch_id)
        if process is not None:
            return str(process.address)
        argv = [sys.executable, "-m", "autocad_bench_ray.local_cluster", "--nodes", str(local.nodes),
                "--slots", str(local.desktop_slots), "--cpus", f"{local.cpus_per_node:g}", "--resource", resource]
        child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 start_new_session=True)
        assert child.stdout is not None
        ready: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: ready.put(child.stdout.readline().decode() if child.stdout else ""),
                         daemon=True).start()
        try:
            line = ready.get(timeout=local.start_timeout_s)
            answer = json.loads(line) if line.strip() else {"error": f"exited with code {child.poll()}"}
        except (queue.Empty, ValueError):
            answer = {"error": f"no address within {local.start_timeout_s:g} s"}
        if "address" not in answer:
            _stop_process(child)
            raise ClusterUnavailable(f"cannot start a local Ray cluster of {local.nodes} nodes: {answer['error']}")
        _local[batch_id] = _LocalCluster(child, str(answer["address"]))
        return str(answer["address"])


class _LocalCluster:
    def __init__(self, process: subprocess.Popen[bytes], address: str) -> None:
        self.process = process
        self.address = address


def _stop_process(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        if process.stdin is not None:
            process.stdin.close()
    try:
        process.wait(timeout=LOCAL_CLUSTER_STOP_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def stop_local_cluster(batch_id: str) -> str | None:
    """Shut down the local cluster started for ``batch_id`` (if any); returns its address."""
    global _connected
    with _lock:
        cluster = _local.pop(batch_id, None)
        if cluster is None:
            return None
        import ray

        if _connected == cluster.address and ray.is_initialized():
            ray.shutdown()
            _connected = None
        _stop_process(cluster.process)
        return cluster.address


def local_cluster_address(batch_id: str) -> str | None:
    """The address of the local cluster this process runs for ``batch_id``, if any."""
    with _lock:
        cluster = _local.get(batch_id)
        return None if cluster is None else cluster.address


def ensure_cluster(settings: RaySettings, batch_id: str, *, start: bool) -> str | None:
    """Connect to the batch's cluster and return its address.

    With ``local_cluster`` the cluster is started when ``start`` is true (a rollout is about
    to run) and otherwise only joined if this process already runs it (None when it does not).
    Raises :class:`ClusterUnavailable`.
    """
    if settings.address is not None:
        connect(settings.address)
        return settings.address
    assert settings.local_cluster is not None
    address = local_cluster_address(batch_id)
    if address is None and start:
        address = start_local_cluster(batch_id, settings.local_cluster, settings.desktop_resource)
    if address is not None:
        connect(address)
    return address
