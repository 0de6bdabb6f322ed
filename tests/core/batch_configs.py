"""Builders of batch configuration files for tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "scripts" / "line-and-circle.jsonl"


def pool_config(workers: list[str], lease_dir: Path, **overrides: Any) -> dict[str, Any]:
    """A valid two-rollout config on the example-pool backend with the scripted provider."""
    config: dict[str, Any] = {
        "name": "test-batch",
        "expected_rollouts": 2,
        "max_concurrency": 2,
        "infrastructure": {
            "backend": "example-pool",
            "broker_version": "windows-autocad-2019-v11",
            "settings": {"workers": workers, "token_env": "EXAMPLE_POOL_TOKEN",
                         "lease_dir": str(lease_dir)},
        },
        "evaluation": {"enabled": False},
        "rollouts": [
            {"rollout_id": "r1", "task_id": "t1", "provider": "scripted", "model": "replay",
             "provider_options": {"script": str(SCRIPT)}},
            {"rollout_id": "r2", "task_id": "t2", "provider": "scripted", "model": "replay",
             "provider_options": {"script": str(SCRIPT)}},
        ],
    }
    config.update(overrides)
    return config


def write(tmp: Path, config: Any, name: str = "batch.json") -> Path:
    path = tmp / name
    path.write_text(json.dumps(config) if not isinstance(config, str) else config)
    return path
