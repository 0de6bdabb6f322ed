"""The progress display at scale: events update it in place, with the numbers the batch has.

A state change costs the display the same however large the batch is (it never re-reads
the whole batch for one), and what it shows is what the dashboard's reader reads from the
same files: counts, per-rollout turns, actions, cost and score.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from autocad_bench.dashboard.reader import RunsRoot
from autocad_bench.events import RolloutStateEvent
from autocad_bench.progress import BatchProgress, counts_text
from tests.dashboard.builders import batch_state, entry, rollout_dir, write_batch
from tests.dashboard.test_progress import console

ROLLOUTS = 60
PATH = [("queued", "starting"), ("starting", "running"), ("running", "done")]


def event(rollout: str, previous: str, state: str) -> RolloutStateEvent:
    return RolloutStateEvent(batch_id="b", rollout_id=rollout, previous=previous, state=state,  # type: ignore[arg-type]
                             at=datetime.now(UTC))


class Batch:
    """A batch on disk and the controller's view of it (the ``entries`` the display may use)."""

    def __init__(self, tmp: Path) -> None:
        self.entries = {f"r{i:03d}": entry(f"r{i:03d}", "queued", model=f"m-{i % 3}") for i in range(ROLLOUTS)}
        self.dir = write_batch(tmp / "b", batch_state(list(self.entries.values())))

    def change(self, rollout: str, state: str, **extra: Any) -> None:
        self.entries[rollout] = {**self.entries[rollout], "state": state, **extra}
        (self.dir / "batch-state.json").write_text(json.dumps(batch_state(list(self.entries.values()))))
        if state == "running":
            rollout_dir(self.dir, rollout, turns=int(rollout[1:]) % 4 + 1)


def outcome(i: int) -> dict[str, Any]:
    if i % 5 == 0:
        return {"state": "failed", "failure_class": "transport_exhausted", "turns": 1, "actions": 4}
    return {"state": "done", "turns": i % 4 + 1, "actions": 4 * (i % 4 + 1), "token_cost_usd": 0.01 * i,
            "score": (i % 10) / 10, "passed": i % 2 == 0}


def drive(batch: Batch, progress: BatchProgress, upto: int | None = None) -> None:
    for i, rollout in enumerate(list(batch.entries)[:upto]):
        for previous, state in PATH:
            extra = outcome(i) if state == "done" else {}
            final = extra.pop("state", state)
            batch.change(rollout, final, **extra)
            progress.rollout_state_changed(event(rollout, previous, final))


def test_plain_lines_carry_the_counts_and_outcomes_the_reader_reads(tmp_path: Path) -> None:
    batch = Batch(tmp_path)
    out, buffer = console()
    progress = BatchProgress(batch.dir, console=out, mode="plain", entries=lambda rid: batch.entries[rid])
    root = RunsRoot(batch.dir)
    for i, rollout in enumerate(batch.entries):
        for previous, state in PATH:
            extra = outcome(i) if state == "done" else {}
            final = extra.pop("state", state)
            batch.change(rollout, final, **extra)
            progress.rollout_state_changed(event(rollout, previous, final))
            line = buffer.getvalue().splitlines()[-1]
            info = root.read_batch(root.root, rows=True)  # what the display used to re-read per change
            assert line.endswith(f"[{counts_text(info.counts)}]"), line
            if final in ("done", "failed"):
                row = next(r for r in info.rollouts if r.rollout_id == rollout)
                assert f"turns={row.turns} actions={row.actions}" in line
                if row.failure_class:
                    assert f"failure={row.failure_class}" in line
                else:
                    assert f"cost=${row.cost_usd:.4f}" in line and f"score={row.score:.3f}" in line


def visible(text: str) -> list[str]:
    """The table rows of a rendered display, without the moving header time and elapsed column."""
    lines = [re.sub(r"\s+", " ", line).strip() for line in text.splitlines()]
    return [re.sub(r" \d+(\.\d+)?s | \d+m\d+s ", " ", line) for line in lines if line and not line.startswith("batch ")]


@pytest.mark.parametrize("upto", [0, 7, 23, ROLLOUTS])
def test_live_display_driven_by_events_matches_one_read_of_the_files(tmp_path: Path, upto: int) -> None:
    batch = Batch(tmp_path)
    events_out, events_buffer = console(terminal=True)

    class Host:  # a host means events flow: the display then never polls per render
        pass

    progress = BatchProgress(batch.dir, console=events_out, mode="live", host=Host(),
                             entries=lambda rid: batch.entries[rid])
    drive(batch, progress, upto)
    events_out.print(progress.render())
    files_out, files_buffer = console(terminal=True)
    from_files = BatchProgress(batch.dir, console=files_out, mode="live")  # no host: reads the files
    files_out.print(from_files.render())
    assert visible(events_buffer.getvalue()) == visible(files_buffer.getvalue())
    header = next(line for line in events_buffer.getvalue().splitlines() if line.startswith("batch "))
    info = RunsRoot(batch.dir).read_batch(batch.dir.resolve(), rows=False)
    for state, count in info.counts.items():
        assert f"{state} {count} " in header


def test_a_state_change_never_reads_the_whole_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    batch = Batch(tmp_path)
    reads: list[int] = []
    original = RunsRoot.read_batch

    def counting(self: RunsRoot, path: Path, *, rows: bool) -> Any:
        reads.append(1)
        return original(self, path, rows=rows)

    monkeypatch.setattr(RunsRoot, "read_batch", counting)
    for mode in ("plain", "live"):
        reads.clear()
        out, _ = console(terminal=mode == "live")

        class Host:
            pass

        progress = BatchProgress(batch.dir, console=out, mode=mode, host=Host(),  # type: ignore[arg-type]
                                 entries=lambda rid: batch.entries[rid])
        drive(batch, progress, 20)
        assert len(reads) <= 1, f"{mode}: {len(reads)} whole-batch reads for 60 state changes"
        progress.render()
        assert len(reads) <= 1, f"{mode}: rendering re-read the whole batch"
        for rollout in batch.entries:
            batch.entries[rollout] = {**batch.entries[rollout], "state": "queued"}
