"""What a worker instance carries: its tags and its user data (TTL timer and broker token).

User data is the launch-time contract with the operator's image:

* a shutdown timer (``shutdown.exe /s /t <ttl>``) started at first boot; launched with
  ``InstanceInitiatedShutdownBehavior=terminate``, the shutdown *terminates* the instance,
  so a worker whose controller died (and whose reconciler never ran) still ends at its TTL
  without any API call;
* the rollout's configuration JSON (:class:`WorkerConfig`) written to
  ``C:\\ProgramData\\AutoCADBench\\rollout.json``; the broker's scheduled task reads the
  per-rollout bearer token from it.

The token is generated per clone by the wrapper and never written to local state: a
recovering wrapper reads it back with ``DescribeInstanceAttribute`` (see :func:`config_from_user_data`).
"""

from __future__ import annotations

import base64
import json
import re
import secrets
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

BATCH_TAG = "BatchId"
ROLLOUT_TAG = "RolloutId"
ATTEMPT_TAG = "AutoCADBenchAttempt"
ROLE_TAG = "AutoCADBenchRole"
ROLE_WORKER = "worker"
ROLE_GATE = "gate"
CONFIG_PATH = r"C:\ProgramData\AutoCADBench\rollout.json"
_CONFIG_BLOCK = re.compile(r"@'\r?\n(?P<json>\{.*?\})\r?\n'@", re.DOTALL)


class WorkerConfig(BaseModel):
    """The JSON handed to the image in user data."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: str = "autocad-bench-worker/1"
    batch_id: str
    rollout_id: str
    attempt_id: str
    clone: int = Field(ge=1)
    broker_version: str
    broker_port: int
    broker_token: str = Field(min_length=32, repr=False)
    expires_at: str


def new_token() -> str:
    """A fresh random broker bearer token (one per clone; never written to local state)."""
    return secrets.token_urlsafe(32)


def tags(batch_id: str, rollout_id: str, attempt_id: str, clone: int, role: str = ROLE_WORKER) -> list[dict[str, str]]:
    """The EC2 tags of a worker (or gate) instance: batch, rollout, attempt and clone, role and a
    Name (cut to the 255-character limit); the reconciler finds instances by them.
    """
    return [
        {"Key": BATCH_TAG, "Value": batch_id},
        {"Key": ROLLOUT_TAG, "Value": rollout_id},
        {"Key": ATTEMPT_TAG, "Value": f"{attempt_id}#{clone}"},
        {"Key": ROLE_TAG, "Value": role},
        {"Key": "Name", "Value": f"autocad-bench {rollout_id}"[:255]},
    ]


def user_data(config: WorkerConfig, ttl_minutes: int) -> str:
    """The PowerShell user data: TTL shutdown timer first, then the rollout configuration."""
    ttl_s = ttl_minutes * 60
    body = config.model_dump_json()
    return "\n".join([
        "<powershell>",
        "# autocad-bench worker bootstrap (generated per clone)",
        f'shutdown.exe /s /t {ttl_s} /f /d p:0:0 /c "autocad-bench TTL {ttl_minutes} min"',
        "New-Item -ItemType Directory -Force -Path 'C:\\ProgramData\\AutoCADBench' | Out-Null",
        "$config = @'",
        body,
        "'@",
        f"Set-Content -Path '{CONFIG_PATH}' -Value $config -Encoding UTF8",
        "</powershell>",
        "<persist>false</persist>",
        "",
    ])


def expires_at(ttl_minutes: int) -> str:
    """The ISO UTC time ``ttl_minutes`` from now (the worker's TTL, carried in its user data)."""
    return (datetime.now(UTC) + timedelta(minutes=ttl_minutes)).isoformat(timespec="seconds")


def config_from_user_data(raw: str) -> WorkerConfig | None:
    """The :class:`WorkerConfig` in user data (plain or base64, as EC2 returns it), or None."""
    text = raw
    if "<powershell>" not in text:
        try:
            text = base64.b64decode(raw).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return None
    match = _CONFIG_BLOCK.search(text)
    if match is None:
        return None
    try:
        return WorkerConfig.model_validate(json.loads(match.group("json")))
    except ValueError:
        return None
