"""Running real batches (``autocad-bench-batch --execute``) on the AWS backend against FakeAws."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.aws.conftest import SCRIPT, TASKS, AwsEnv


def aws_config(aws: AwsEnv, *, rollouts: int = 2, mode: str = "shared", latency_s: float = 0.0,
               **infrastructure: Any) -> dict[str, Any]:
    return {
        "name": f"aws-{mode}",
        "expected_rollouts": rollouts,
        "max_concurrency": rollouts,
        "execution_mode": mode,
        "tasks_dir": str(TASKS),
        "infrastructure": aws.spec(**infrastructure).model_dump(mode="json"),
        "evaluation": {"enabled": False},
        "rollouts": [
            {"rollout_id": f"r{i}", "task_id": "line-and-circle", "provider": "scripted", "model": f"replay-{i}",
             "provider_options": {"script": str(SCRIPT), "latency_s": latency_s}}
            for i in range(rollouts)
        ],
    }


def write_config(aws: AwsEnv, config: dict[str, Any], name: str = "batch") -> Path:
    path = aws.tmp / f"{name}.json"
    path.write_text(json.dumps(config))
    return path


def batch_command(config: Path, out: Path) -> list[str]:
    return ["autocad-bench-batch", "--config", str(config), "--execute", "--output-dir", str(out)]


def run_batch(aws: AwsEnv, config: dict[str, Any], name: str = "batch", timeout: float = 240
              ) -> tuple[subprocess.CompletedProcess[str], Path]:
    path = write_config(aws, config, name)
    out = aws.tmp / f"{name}-out"
    result = subprocess.run(batch_command(path, out), capture_output=True, text=True, env=dict(os.environ),
                            timeout=timeout)
    return result, out


def state(out: Path) -> dict[str, Any]:
    return json.loads((out / "batch-state.json").read_text())


def result(out: Path, rollout: str) -> dict[str, Any]:
    return json.loads((out / "rollouts" / rollout / "result.json").read_text())


def log(out: Path, rollout: str) -> str:
    return (out / "logs" / f"{rollout}.log").read_text()
