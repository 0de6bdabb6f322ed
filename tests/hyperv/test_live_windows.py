"""Live test on a real Hyper-V pool (marker ``windows``; deselected by default, never counted here).

Run on a machine that reaches a prepared pool (``docs/hyperv.md``)::

    AUTOCAD_BENCH_HYPERV_LIVE_CONFIG=pool.json pytest -m windows tests/hyperv/test_live_windows.py

``pool.json`` is a batch configuration whose ``infrastructure`` is ``local-hyperv``, with the
credentials its settings name in the environment. The test leases one VM for a real rollout
(authenticated health, exact task lease and reset, release on the real broker), then checks on
the host that every VM of the pool is free or quarantined, off, and that reaping is idempotent.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from autocad_bench.infrastructure import AssignmentView, InfrastructureSpec, PreflightRequest, ReapRequest
from autocad_bench_hyperv.marks import parse_mark
from autocad_bench_hyperv.plugin import HyperVPlugin
from autocad_bench_hyperv.settings import hyperv_settings
from tests.hyperv.conftest import RecordingChild, launch_request, log_text

pytestmark = pytest.mark.windows
CONFIG_ENV = "AUTOCAD_BENCH_HYPERV_LIVE_CONFIG"


@pytest.fixture
def live_spec() -> InfrastructureSpec:
    path = os.environ.get(CONFIG_ENV)
    if not path:
        pytest.skip(f"{CONFIG_ENV} names no batch configuration of a real Hyper-V pool")
    spec = InfrastructureSpec.model_validate(json.loads(Path(path).read_text())["infrastructure"])
    assert spec.backend == "local-hyperv"
    return spec


@pytest.fixture(autouse=True)
def _production_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AUTOCAD_BENCH_HYPERV_TIME_SCALE", raising=False)


def test_a_real_rollout_leaves_the_pool_clean(live_spec: InfrastructureSpec, tmp_path: Path) -> None:
    plugin = HyperVPlugin()
    assert plugin.validate_spec(live_spec, "$") == []
    batch_id = f"live-{uuid.uuid4().hex[:8]}"
    report = plugin.preflight(PreflightRequest(batch_id=batch_id, spec=live_spec, max_concurrency=1, assignments=(
        AssignmentView(rollout_id="live-1", task_id="line-and-circle", provider="scripted", model="m"),)))
    assert report.passed, [c for c in report.checks if not c.passed]
    request = launch_request(tmp_path, live_spec, rollout_id="live-1", batch_id=batch_id)
    child = RecordingChild(hold_s=2.0)
    assert plugin.run_shared(request, child) == 0, log_text(request)
    assert len(child.runs) == 1
    settings = hyperv_settings(live_spec)
    pool = plugin.pool(settings)
    try:
        for vm in pool.view().vms:
            assert vm.info is not None and vm.mark is not None, vm.worker_id
            assert vm.mark.state in ("free", "quarantined") and vm.info.state == "Off", (vm.worker_id, vm.info)
            assert vm.mark.batch_id != batch_id or vm.mark.state == "quarantined"
    finally:
        pool.close()
    reap = plugin.reap_batch(ReapRequest(batch_id=batch_id, spec=live_spec))
    assert reap.cleaned == () and reap.errors == ()
    usage = json.loads((request.output_dir / "infrastructure.json").read_text())
    assert usage["workers"][-1]["outcome"] == "completed"
    assert parse_mark('{"autocad_bench":1,"state":"free","broker_version":"x"}') is not None
