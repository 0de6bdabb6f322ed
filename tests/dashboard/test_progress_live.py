"""The progress display stays live while a model request is retried (issue 17, also-fix items):
a running rollout's elapsed time keeps moving between two run-state writes, and retries
(shared mode: pilots in this process) show up in the display instead of as bare stderr lines."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from pathlib import Path

import stamina
import stamina.instrumentation as instrumentation

from autocad_bench.models import ArtifactRef, JsonObject
from autocad_bench.progress import RETRY_LOGGER, BatchProgress
from autocad_bench.providers.models import (
    ModelTurn,
    Observation,
    ProviderErrorKind,
    ProviderRequestError,
)
from autocad_bench.providers.session import ProviderSession
from autocad_bench.retry import ModelCaller
from autocad_bench.retry.reporting import log_retry
from tests.dashboard.builders import batch_state, entry, rollout_dir, run_state, write_batch
from tests.dashboard.test_progress import console

DEAD = "openai connection failed: ConnectError at http://127.0.0.1:9/v1 (from provider_options.base_url)"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def row_of(progress: BatchProgress, rollout: str) -> str:
    out, buffer = console(terminal=True)
    out.print(progress.render())
    return next(line for line in buffer.getvalue().splitlines() if line.startswith(rollout))


def write_run_state(batch: Path, rollout: str, elapsed: float, stamp: int) -> None:
    path = batch / "rollouts" / rollout / "run-state.json"
    path.write_text(json.dumps(run_state(turns=2, actions=8, elapsed=elapsed)))
    os.utime(path, ns=(stamp, stamp))  # a new mtime, as a real rewrite has


def test_elapsed_keeps_moving_while_run_state_stands_still(tmp_path: Path) -> None:
    batch = write_batch(tmp_path / "b", batch_state([entry("r0", "running"),
                                                     entry("r1", "done", score=0.5, passed=True)]))
    rollout_dir(batch, "r0", turns=2)
    rollout_dir(batch, "r1", turns=2)
    write_run_state(batch, "r1", 1.0, 1)
    clock = Clock()
    progress = BatchProgress(batch, mode="live", console=console(terminal=True)[0], clock=clock)
    assert " 1.0s " in row_of(progress, "r0")
    clock.now += 95.0  # a minute and a half of retries: the pilot wrote nothing
    assert " 1m36s " in row_of(progress, "r0")
    assert "elapsed=1m36s" in heartbeat(progress)
    write_run_state(batch, "r0", 100.0, 2)  # the next turn's write takes over
    assert " 1m40s " in row_of(progress, "r0")
    clock.now += 2.0
    assert " 1m42s " in row_of(progress, "r0")
    assert " 1.0s " in row_of(progress, "r1"), "a finished rollout's time does not move"


def heartbeat(progress: BatchProgress) -> str:
    out, buffer = console()
    progress.console = out
    info = progress.snapshot()
    assert info is not None
    progress._heartbeat(info)
    return buffer.getvalue()


def details(attempt: int, wait: float) -> instrumentation.RetryDetails:
    return instrumentation.RetryDetails(
        name="autocad_bench.model_request.transient", args=(), kwargs={}, retry_num=attempt - 1,
        wait_for=wait, waited_so_far=3.0, caused_by=ProviderRequestError(ProviderErrorKind.TRANSIENT, DEAD))


def test_retries_logged_on_any_thread_show_in_the_live_display(tmp_path: Path) -> None:
    batch = write_batch(tmp_path / "b", batch_state([entry("r0", "running")]))
    rollout_dir(batch, "r0", turns=1)
    clock = Clock()
    out, _ = console(terminal=True)
    progress = BatchProgress(batch, mode="live", console=out, clock=clock, interval_s=60)
    with progress:
        def retry_twice() -> None:
            for attempt in (2, 3):
                log_retry(details(attempt, 2.0 * attempt))

        worker = threading.Thread(target=retry_twice)
        worker.start()
        worker.join()
        clock.now += 1.5
        screen, buffer = console(terminal=True)
        screen.print(progress.render())
    text = " ".join(buffer.getvalue().split())  # the status line wraps at the console's width
    assert "retries 2" in text
    assert f"retrying: model request (transient) {DEAD} (attempt 3, next in 6.0s) [1.5s ago]" in text
    assert progress.retries not in logging.getLogger(RETRY_LOGGER).handlers, "detached when the display ends"


def test_the_display_ignores_retries_while_it_is_off(tmp_path: Path) -> None:
    progress = BatchProgress(tmp_path, mode="off", console=console()[0])
    with progress:
        log_retry(details(2, 1.0))
    assert progress.retries.count == 0


class FlakySession(ProviderSession):
    """Refuses the connection twice, then answers."""

    def __init__(self) -> None:
        self.calls = 0

    async def next_turn(self, observation: Observation) -> ModelTurn:
        self.calls += 1
        if self.calls <= 2:
            raise ProviderRequestError(ProviderErrorKind.TRANSIENT, DEAD)
        return ModelTurn(tool_use_id="c", action_input={"actions": [{"type": "wait", "ms": 10}]})

    def shrink(self) -> bool:
        return False

    def checkpoint(self) -> JsonObject:
        return {}


def test_a_shared_mode_model_retry_reaches_the_display(tmp_path: Path) -> None:
    """ModelCaller -> stamina's retry hook -> the retry logger -> the display's status line."""
    observation = Observation(turn_index=0, frame=ArtifactRef(path="f.png", sha256="0" * 64),
                              remaining_actions=10)
    before = instrumentation.get_on_retry_hooks()
    instrumentation.set_on_retry_hooks([log_retry])
    try:
        progress = BatchProgress(tmp_path, mode="live", console=console(terminal=True)[0], interval_s=60)
        with progress, stamina.set_testing(True):
            result = asyncio.run(ModelCaller().request_turn(FlakySession(), observation))
            count, latest = progress.retries.latest()
    finally:
        instrumentation.set_on_retry_hooks(list(before))
    assert len(result.retries) == 2 and count == 2
    assert latest is not None and latest[1].startswith(f"retrying: model request (transient) {DEAD} (attempt 3")
