"""``python broken_wrapper.py FLAW SPEC -- CHILD...``: the example pool's wrapper with one planted flaw.

Each flaw breaks exactly one rule of the backend contract (see ``broken_pool.py``); the
unflawed parts reuse the example backend's own lease code.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from autocad_bench.evaluation import evaluate_rollout
from autocad_bench.infrastructure import BROKER_TOKEN_ENV, BROKER_URL_ENV, RolloutLaunchRequest
from autocad_bench.infrastructure.wrapper import run_child_process, run_terminable
from example_autocad_backend.plugin import PoolSettings, _lease_path, lease_worker


def _env(settings: PoolSettings, url: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != settings.token_env}
    env.update({BROKER_URL_ENV: url, BROKER_TOKEN_ENV: os.environ.get(settings.token_env, "")})
    return env


def main(argv: list[str]) -> int:
    flaw, spec = argv[0], json.loads(argv[1])
    child = argv[argv.index("--") + 1:]
    settings = PoolSettings.model_validate(spec["settings"])
    batch_id, rollout_id = spec["batch_id"], spec["rollout_id"]

    if flaw == "no-release":
        # Takes the lease and never gives it back.
        Path(settings.lease_dir).mkdir(parents=True, exist_ok=True)
        _lease_path(settings, 0).write_text(json.dumps({"batch_id": batch_id, "rollout_id": rollout_id,
                                                        "pid": os.getpid()}))
        return run_terminable(lambda: run_child_process(child, _env(settings, settings.workers[0]), 5.0))

    if flaw == "original-wrapper":
        # The example as first shipped: no SIGTERM handling, the pool token passed to the child.
        with lease_worker(settings, batch_id, rollout_id) as url:
            env = dict(os.environ)
            env[BROKER_URL_ENV] = url
            env[BROKER_TOKEN_ENV] = os.environ.get(settings.token_env, "")
            return subprocess.run(child, env=env, check=False).returncode

    if flaw == "ignores-sigterm":
        # Ignores the stop and keeps its child out of the process group the stop reaches.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with lease_worker(settings, batch_id, rollout_id) as url:
            return subprocess.Popen(child, env=_env(settings, url), start_new_session=True).wait()

    if flaw == "recovery-any-worker":
        # Resuming, ignores the worker it is to reconnect and takes a desktop nobody holds.
        def elsewhere() -> int:
            with lease_worker(settings, batch_id, f"{rollout_id} (resumed)") as url:
                return run_child_process(child, _env(settings, url), 5.0)

        return run_terminable(elsewhere)

    if flaw == "recovery-never-runs-child":
        # Reconnects to the right worker, then reports the resume child's exit code without running it.
        def no_child() -> int:
            with lease_worker(settings, batch_id, rollout_id, spec.get("worker")):
                time.sleep(0.2)
                return 9

        return run_terminable(no_child)

    if flaw in ("skips-evaluation", "ignores-evaluation-failure"):
        # The example's wrapper, but it never evaluates, or evaluates and keeps the child's 0.
        request = RolloutLaunchRequest.model_validate(spec["request"])

        def unevaluated() -> int:
            with lease_worker(settings, batch_id, rollout_id) as url:
                code = run_child_process(child, _env(settings, url), 5.0)
            if flaw == "ignores-evaluation-failure":
                evaluate_rollout(request, os.environ)
            return code

        return run_terminable(unevaluated)

    def body() -> int:
        with lease_worker(settings, batch_id, rollout_id) as url:
            env = _env(settings, url)
            if flaw == "helper-outlives":
                subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True,
                                 stdin=subprocess.DEVNULL)
            if flaw == "exit-zero":
                run_child_process(child, env, 5.0)
                return 0
            if flaw == "never-runs-child":
                time.sleep(0.2)
                return 7
            if flaw == "unreachable-url":
                env[BROKER_URL_ENV] = "http://127.0.0.1:9"
            if flaw == "leaks-credential":
                env[settings.token_env] = os.environ.get(settings.token_env, "")
            if flaw == "runs-child-twice":
                run_child_process(child, env, 5.0)
            if flaw == "mangles-argv":
                return subprocess.run(" ".join(child), shell=True, env=env, check=False).returncode
            return run_child_process(child, env, 5.0)

    return run_terminable(body)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
