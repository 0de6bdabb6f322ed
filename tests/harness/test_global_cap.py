"""Two controllers sharing a state directory never run more rollouts together than the cap."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from datetime import datetime
from pathlib import Path

from tests.harness.brokers import fake_brokers
from tests.harness.test_batch_execute import batch_config


def test_two_controllers_respect_one_global_cap(tmp_path: Path) -> None:
    script = tmp_path / "slow.jsonl"
    script.write_text('{"actions": [{"type": "move", "x": 5, "y": 5}]}\n' * 3)
    with fake_brokers(4, token="global-cap-broker-token-123") as brokers:
        processes, outs = [], []
        for name, pair in (("a", brokers[:2]), ("b", brokers[2:])):
            config = batch_config(pair, tmp_path / f"leases-{name}", "shared")
            for rollout in config["rollouts"]:
                rollout["rollout_id"] = f"{name}-{rollout['rollout_id']}"
                rollout["provider_options"] = {"script": str(script), "latency_s": 0.3}
            path = tmp_path / f"{name}.json"
            path.write_text(json.dumps(config))
            out = tmp_path / f"out-{name}"
            outs.append(out)
            env = {**os.environ, "EXAMPLE_POOL_TOKEN": brokers[0].token, "CI": "1",
                   "AUTOCAD_BENCH_MAX_ACTIVE_ROLLOUTS": "1", "AUTOCAD_BENCH_STATE_DIR": str(tmp_path / "state")}
            processes.append(subprocess.Popen(
                ["autocad-bench-batch", "--config", str(path), "--execute", "--output-dir", str(out)],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        for process in processes:
            _, err = process.communicate(timeout=300)
            assert process.returncode == 0, err[-2000:]
    spans = []
    for out in outs:
        for result in (out / "rollouts").glob("*/result.json"):
            data = json.loads(result.read_text())
            spans.append((datetime.fromisoformat(data["started_at"]), datetime.fromisoformat(data["finished_at"])))
    spans.sort()
    assert len(spans) == 4
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end <= start, f"two rollouts ran at once under a cap of 1: {spans}"
