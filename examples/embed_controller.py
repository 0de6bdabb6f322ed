"""Embedding autocad-bench: register a backend in-process, then plan a batch with it.

An application that already manages its desktops can hand them to the controller without
publishing a distribution: define a backend, call ``register_infrastructure_plugin()``,
and select it by name in the batch configuration.

    python examples/embed_controller.py BROKER_URL TOKEN_ENV_NAME

prints the plan report for a two-rollout scripted batch on that one desktop.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from autocad_bench import InfrastructurePlugin, register_infrastructure_plugin
from autocad_bench.admission import AdmissionOptions, admit
from autocad_bench.config import effective_budgets, parse_config_text
from autocad_bench.config.loading import LoadedConfig
from autocad_bench.infrastructure import (
    BROKER_TOKEN_ENV,
    BROKER_URL_ENV,
    CheckResult,
    PreflightReport,
    PreflightRequest,
    ReapReport,
    ReapRequest,
    RolloutCommand,
    RolloutLaunchRequest,
    SharedChild,
)
from autocad_bench.plugins import PluginHost

HERE = Path(__file__).resolve().parent


class SingleDesktopSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    broker_url: str
    token_env: str


class SingleDesktop(InfrastructurePlugin):
    """One desktop the application owns; rollouts take turns on it (max_concurrency 1)."""

    name = "my-app-desktop"
    settings_model = SingleDesktopSettings

    def preflight(self, request: PreflightRequest) -> PreflightReport:
        settings: SingleDesktopSettings = self.parse_settings(request.spec)
        present = bool(os.environ.get(settings.token_env))
        return PreflightReport(
            checks=(CheckResult(name="token", passed=present,
                                reason=f"{settings.token_env} {'is' if present else 'is not'} set"),),
            admitted_wave=1,
        )

    def build_rollout_command(self, request: RolloutLaunchRequest) -> RolloutCommand:
        settings: SingleDesktopSettings = self.parse_settings(request.spec)
        return RolloutCommand(argv=request.child_command,
                              environment={BROKER_URL_ENV: settings.broker_url},
                              environment_names=(*request.child_environment_names,))

    def run_shared(self, request: RolloutLaunchRequest, child: SharedChild) -> int:
        settings: SingleDesktopSettings = self.parse_settings(request.spec)
        return asyncio.run(child.run({BROKER_URL_ENV: settings.broker_url,
                                      BROKER_TOKEN_ENV: os.environ.get(settings.token_env, "")}))

    def reap_batch(self, request: ReapRequest) -> ReapReport:
        return ReapReport()  # the application owns the desktop's lifetime


def main(broker_url: str, token_env: str) -> int:
    register_infrastructure_plugin(SingleDesktop())
    config = {
        "expected_rollouts": 2,
        "infrastructure": {"backend": "my-app-desktop", "broker_version": "windows-autocad-2019-v11",
                           "settings": {"broker_url": broker_url, "token_env": token_env}},
        "evaluation": {"enabled": False},
        "rollouts": [
            {"rollout_id": f"embedded-{i}", "task_id": f"task-{i}", "provider": "scripted",
             "model": "replay", "provider_options": {"script": str(HERE / "scripts" / "line-and-circle.jsonl")}}
            for i in (1, 2)
        ],
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "embedded.json"
        loaded = LoadedConfig(parse_config_text(json.dumps(config), str(path)), path, str(path))
        environ = dict(os.environ)
        budgets = effective_budgets(loaded.config.budgets, environ=environ)
        admission = admit(loaded, PluginHost(environ=environ), environ, budgets, AdmissionOptions())
    print(json.dumps(admission.report.model_dump(mode="json"), indent=2))
    return 0 if admission.report.passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
