"""The resume checkpoint file plus its write-ahead journal: the newest durable write wins."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autocad_bench.harness.checkpoints import COMPACT_EVERY, CheckpointStore, load_checkpoint
from autocad_bench.harness.layout import RolloutPaths
from autocad_bench.harness.records import ResumeCheckpoint


def _cp(turn: int) -> ResumeCheckpoint:
    return ResumeCheckpoint(rollout_id="r", attempt_id="a", turn_index=turn, feedback=f"turn {turn}")


def test_journal_lines_win_over_an_older_file_and_compaction_rewrites_the_file(tmp_path: Path) -> None:
    paths = RolloutPaths(tmp_path)
    store = CheckpointStore(paths)
    store.write(_cp(0), compact=True)
    for turn in range(1, 4):
        store.write(_cp(turn), compact=False)
    newest = store.write(_cp(4), compact=False)
    assert load_checkpoint(paths) == newest
    assert ResumeCheckpoint.model_validate_json(paths.checkpoint.read_bytes()).turn_index == 0
    final = store.write(_cp(5), compact=True)
    assert paths.checkpoint_journal.stat().st_size == 0
    assert ResumeCheckpoint.model_validate_json(paths.checkpoint.read_bytes()) == final == load_checkpoint(paths)
    store.close()
    assert not paths.checkpoint_journal.exists()


def test_the_journal_is_compacted_every_so_many_lines(tmp_path: Path) -> None:
    paths = RolloutPaths(tmp_path)
    store = CheckpointStore(paths)
    for turn in range(COMPACT_EVERY * 2 + 3):
        store.write(_cp(turn), compact=False)
    lines = paths.checkpoint_journal.read_bytes().count(b"\n")
    assert 0 < lines <= COMPACT_EVERY
    assert load_checkpoint(paths).turn_index == COMPACT_EVERY * 2 + 2  # type: ignore[union-attr]
    assert ResumeCheckpoint.model_validate_json(paths.checkpoint.read_bytes()).turn_index >= COMPACT_EVERY


def test_a_crash_between_rewrite_and_emptying_keeps_the_newest(tmp_path: Path) -> None:
    paths = RolloutPaths(tmp_path)
    store = CheckpointStore(paths)
    store.write(_cp(1), compact=False)
    store.write(_cp(2), compact=False)
    journal = paths.checkpoint_journal.read_bytes()
    newest = store.write(_cp(3), compact=True)
    paths.checkpoint_journal.write_bytes(journal)  # the emptying never reached the disk
    assert load_checkpoint(paths) == newest


def test_a_resumed_store_continues_the_revisions(tmp_path: Path) -> None:
    paths = RolloutPaths(tmp_path)
    first = CheckpointStore(paths)
    first.write(_cp(0), compact=True)
    last = first.write(_cp(1), compact=False)
    second = CheckpointStore(paths)
    assert second.load() == last and second.journalled
    assert second.write(_cp(2), compact=False).revision == last.revision + 1
    assert load_checkpoint(paths).turn_index == 2  # type: ignore[union-attr]


def test_a_damaged_line_before_the_last_is_an_error(tmp_path: Path) -> None:
    paths = RolloutPaths(tmp_path)
    store = CheckpointStore(paths)
    store.write(_cp(1), compact=False)
    store.write(_cp(2), compact=False)
    lines = paths.checkpoint_journal.read_bytes().split(b"\n")
    paths.checkpoint_journal.write_bytes(lines[0][:20] + b"\n" + lines[1] + b"\n")
    with pytest.raises(ValueError):
        load_checkpoint(paths)


@settings(max_examples=200, deadline=None)
@given(
    plan=st.lists(st.booleans(), min_size=1, max_size=COMPACT_EVERY + 20),
    tear=st.one_of(st.none(), st.floats(0.0, 0.999)),
)
def test_after_a_crash_the_newest_complete_write_is_found(plan: list[bool], tear: float | None) -> None:
    """Any mix of journal appends and rewrites, then a crash that may tear the last append."""
    with tempfile.TemporaryDirectory() as name:
        paths = RolloutPaths(Path(name))
        store = CheckpointStore(paths)
        written = [store.write(_cp(turn), compact=compact) for turn, compact in enumerate(plan)]
        expected = written[-1]
        journal = paths.checkpoint_journal
        if tear is not None and not plan[-1] and journal.exists() and journal.stat().st_size:
            data = journal.read_bytes()
            start = data.rstrip(b"\n").rfind(b"\n") + 1
            cut = start + int((len(data) - 1 - start) * tear)
            journal.write_bytes(data[:cut])  # the last line was being written
            expected = written[-2] if len(written) > 1 else None
            if expected is None:
                assert load_checkpoint(paths) is None
                return
        assert load_checkpoint(paths) == expected
