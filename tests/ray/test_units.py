"""The ray backend's pieces that need no cluster: settings, worker ids, the forwarder, re-classification."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from pydantic import ValidationError

from autocad_bench.infrastructure import InfrastructureSpec
from autocad_bench_ray.forwarder import Forwarder
from autocad_bench_ray.lifecycle import mark_lost, parse_worker_id, worker_id
from autocad_bench_ray.plugin import RayPlugin
from autocad_bench_ray.recovery import worker_id_from_log
from autocad_bench_ray.settings import RaySettings

REPO = Path(__file__).resolve().parents[2]


def test_settings_need_exactly_one_cluster_and_reject_unknown_keys() -> None:
    assert RaySettings(address="auto").address == "auto"
    assert RaySettings(local_cluster={"nodes": 2}).local_cluster is not None  # type: ignore[arg-type]
    for bad in ({}, {"address": "auto", "local_cluster": {}}, {"address": "auto", "slots": 3},
                {"address": "auto", "desktop": {"state_dir": "/tmp/x"}},
                {"address": "auto", "node_work_dir": "relative"},
                {"address": "auto", "heartbeat_s": 10, "desktop_ttl_s": 15}):
        with pytest.raises(ValidationError):
            RaySettings.model_validate(bad)
    problems = RayPlugin().validate_spec(
        InfrastructureSpec(backend="ray", broker_version="windows-autocad-2019-v11", settings={"adress": "auto"}),
        "cfg.json:$.infrastructure")
    assert problems and all(p.location.startswith("cfg.json:$.infrastructure") for p in problems)


def test_namespaces_are_per_batch_and_worker_ids_round_trip() -> None:
    settings = RaySettings(address="auto")
    first, second = settings.namespace("batch/one"), settings.namespace("batch-one")
    assert first != second and first.startswith("autocad-bench-")
    worker = worker_id(first, "plate")
    assert parse_worker_id(worker) == (first, "plate")
    assert worker_id_from_log(f"2026 ray: worker {worker}: desktop actor placed on node abc") == worker
    assert worker_id_from_log("local-xvfb-0123456789abcdef") is None
    with pytest.raises(ValueError):
        parse_worker_id("local-xvfb-0123456789abcdef")


def test_the_forwarder_copies_both_ways_to_a_loopback_listener() -> None:
    server = socket.create_server(("127.0.0.1", 0))

    def echo() -> None:
        connection, _ = server.accept()
        with connection:
            connection.sendall(connection.recv(1024).upper())

    threading.Thread(target=echo, daemon=True).start()
    forwarder = Forwarder("127.0.0.1", server.getsockname())
    try:
        with socket.create_connection(("127.0.0.1", forwarder.port), timeout=5) as client:
            client.sendall(b"health")
            assert client.recv(1024) == b"HEALTH"
    finally:
        forwarder.close()
        server.close()


def _result(path: Path, status: str, failure_class: str | None) -> None:
    template = json.loads((REPO / "tests" / "ray" / "result-template.json").read_text())
    template.update(status=status, failure_class=failure_class, failure_detail="broker unreachable")
    path.mkdir(parents=True, exist_ok=True)
    (path / "result.json").write_text(json.dumps(template))


def test_a_lost_node_reclassifies_only_a_failed_result(tmp_path: Path) -> None:
    _result(tmp_path / "failed", "failed", "transport_exhausted")
    assert mark_lost(tmp_path / "failed", "node abc lost desktop x mid-rollout")
    data = json.loads((tmp_path / "failed" / "result.json").read_text())
    assert data["failure_class"] == "infrastructure_lost"
    assert "node abc" in data["failure_detail"] and "transport_exhausted" in data["failure_detail"]
    _result(tmp_path / "done", "completed", None)
    assert not mark_lost(tmp_path / "done", "node abc lost")
    assert json.loads((tmp_path / "done" / "result.json").read_text())["failure_class"] is None
    assert not mark_lost(tmp_path / "missing", "node abc lost")


def test_importing_the_plugin_does_not_import_ray() -> None:
    code = "import sys, autocad_bench_ray.plugin; print('ray' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"
