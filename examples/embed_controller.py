"""Embedding autocad-bench: register a backend in-process, then plan (or run) a batch with it.

An application that already manages its desktops can hand them to the controller without
publishing a distribution: define a backend, call ``register_infrastructure_plugin()``,
select it by name in the configuration, and call the public API (``plan_batch`` and
``run_batch``). This file needs nothing beside it: the batch names the packaged smoke
suite and replays each task's own reference solution.

    python embed_controller.py BROKER_URL TOKEN_ENV_NAME            # print the plan report
    python embed_controller.py BROKER_URL TOKEN_ENV_NAME OUTPUT_DIR # run it, print the scores
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from pydantic import BaseModel, ConfigDict

from autocad_bench import (
    BatchNotAdmitted,
    InfrastructurePlugin,
    UserError,
    plan_batch,
    register_infrastructure_plugin,
    run_batch,
)
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


SMOKE_TASKS = ("prim-rectangle", "prim-circle-concentric", "part-plate-four-holes")


def configuration(broker_url: str, token_env: str) -> dict[str, object]:
    """The batch: the packaged smoke suite's reference solutions on the application's desktop."""
    return {
        "expected_rollouts": len(SMOKE_TASKS),
        "task_suite": "smoke",
        "infrastructure": {"backend": "my-app-desktop", "broker_version": "windows-autocad-2019-v11",
                           "settings": {"broker_url": broker_url, "token_env": token_env}},
        "rollouts": [
            {"rollout_id": f"embedded-{task}", "task_id": task, "provider": "scripted", "model": "replay",
             "provider_options": {"task_script": "solution.librecad.jsonl"}}
            for task in SMOKE_TASKS
        ],
    }


def main(broker_url: str, token_env: str, output_dir: str | None = None) -> int:
    register_infrastructure_plugin(SingleDesktop())
    config = configuration(broker_url, token_env)
    try:
        if output_dir is None:
            report = plan_batch(config)
            print(json.dumps(report.model_dump(mode="json"), indent=2))
            return 0 if report.passed else 1
        outcome = run_batch(config, output_dir)
    except BatchNotAdmitted as refused:
        print(json.dumps(refused.report.model_dump(mode="json"), indent=2))
        return 1
    except UserError as error:  # a configuration mistake: say where, no traceback
        for problem in error.problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    print(json.dumps({"batch_id": outcome.batch_id, "scores": outcome.scores,
                      "statuses": {r.rollout_id: r.status for r in outcome.results}}, indent=2))
    return outcome.exit_code


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
