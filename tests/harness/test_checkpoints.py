"""The resume checkpoint file plus its write-ahead journal: the newest durable write wins."""

from __future__ import annotations

import json
import os
import stat
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


# Exact rules of the store (issue 23): revisions, the compaction point, what close and load leave.


def _journal_revisions(paths: RolloutPaths) -> list[int]:
    return [json.loads(line)["revision"] for line in paths.checkpoint_journal.read_bytes().splitlines()]


def _file_revision(paths: RolloutPaths) -> int:
    return ResumeCheckpoint.model_validate_json(paths.checkpoint.read_bytes()).revision


def _with_revision(turn: int, revision: int) -> ResumeCheckpoint:
    return _cp(turn).model_copy(update={"revision": revision})


def test_a_fresh_store_numbers_its_writes_from_one(tmp_path: Path) -> None:
    paths = RolloutPaths(tmp_path)
    store = CheckpointStore(paths)
    assert store.revision == 0 and store.journalled is False
    assert store.load() is None and load_checkpoint(paths) is None
    assert store.revision == 0 and store.journalled is False
    written = [store.write(_cp(turn), compact=False) for turn in range(3)]
    assert [w.revision for w in written] == [1, 2, 3] and store.revision == 3
    assert store.journalled is True and not paths.checkpoint.exists()
    assert _journal_revisions(paths) == [1, 2, 3]
    assert load_checkpoint(paths) == written[-1]
    # A checkpoint that already carries a higher revision continues from it.
    assert store.write(_with_revision(3, 10), compact=False).revision == 11


def test_the_journal_holds_64_lines_and_the_next_write_compacts(tmp_path: Path) -> None:
    # docs/harness.md: the file is rewritten "every 64 journal lines".
    paths = RolloutPaths(tmp_path)
    store = CheckpointStore(paths)
    for cycle in range(2):
        base = cycle * 65
        for turn in range(64):
            store.write(_cp(base + turn), compact=False)
        assert _journal_revisions(paths) == list(range(base + 1, base + 65)) and store.journalled is True
        assert _file_revision(paths) == base if cycle else not paths.checkpoint.exists()
        compacted = store.write(_cp(base + 64), compact=False)
        assert compacted.revision == base + 65 and _file_revision(paths) == base + 65
        assert paths.checkpoint_journal.stat().st_size == 0 and store.journalled is False
        assert load_checkpoint(paths) == compacted


def test_a_resumed_store_counts_the_journal_lines_it_found(tmp_path: Path) -> None:
    paths = RolloutPaths(tmp_path)
    first = CheckpointStore(paths)
    for turn in range(63):
        first.write(_cp(turn), compact=False)
    first.close()  # a journal with lines is kept
    assert _journal_revisions(paths) == list(range(1, 64))
    second = CheckpointStore(paths)
    assert second.load() == load_checkpoint(paths) and second.revision == 63 and second.journalled is True
    second.write(_cp(63), compact=False)  # the 64th line: appended after the others, not over them
    assert _journal_revisions(paths) == list(range(1, 65)) and not paths.checkpoint.exists()
    second.write(_cp(64), compact=False)
    assert _file_revision(paths) == 65 and paths.checkpoint_journal.stat().st_size == 0


def test_a_journal_longer_than_64_lines_is_compacted_at_the_next_write(tmp_path: Path) -> None:
    paths = RolloutPaths(tmp_path)
    lines = [_with_revision(turn, turn + 1).model_dump_json() for turn in range(70)]
    paths.checkpoint_journal.write_text("\n".join(lines) + "\n")
    store = CheckpointStore(paths)
    assert store.load().revision == 70 and store.journalled is True  # type: ignore[union-attr]
    written = store.write(_cp(70), compact=False)
    assert written.revision == 71 and _file_revision(paths) == 71
    assert paths.checkpoint_journal.stat().st_size == 0


def test_a_resumed_store_that_compacts_first_empties_the_journal(tmp_path: Path) -> None:
    paths = RolloutPaths(tmp_path)
    first = CheckpointStore(paths)
    for turn in range(3):
        first.write(_cp(turn), compact=False)
    first.close()
    second = CheckpointStore(paths)
    second.load()
    assert second.write(_cp(3), compact=True).revision == 4
    assert paths.checkpoint_journal.stat().st_size == 0 and second.journalled is False
    assert load_checkpoint(paths).revision == 4  # type: ignore[union-attr]
    second.close()
    assert not paths.checkpoint_journal.exists()


def test_close_removes_only_an_empty_journal_and_may_be_repeated(tmp_path: Path) -> None:
    only_file = RolloutPaths(tmp_path / "a")
    only_file.root.mkdir()
    store = CheckpointStore(only_file)
    store.write(_cp(0), compact=True)  # never opened a journal
    store.close()
    store.close()
    assert not only_file.checkpoint_journal.exists() and load_checkpoint(only_file).revision == 1  # type: ignore[union-attr]
    with_lines = RolloutPaths(tmp_path / "b")
    with_lines.root.mkdir()
    store = CheckpointStore(with_lines)
    store.write(_cp(0), compact=True)
    store.write(_cp(1), compact=False)
    store.close()
    store.close()
    assert _journal_revisions(with_lines) == [2] and load_checkpoint(with_lines).revision == 2  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("file", "journal", "expected"),
    [
        (None, [], None),
        ((0, 5), [(1, 3), (2, 4)], 0),  # a crash between the rewrite and the emptying
        ((0, 1), [(1, 2), (2, 3)], 2),
        (None, [(0, 4), (1, 2), (2, 3)], 0),  # the highest, not the last
        ((0, 2), [(1, 2), (2, 1)], 0),  # a tie keeps the record read first: the file
        (None, [(0, 7), (1, 7)], 0),  # ... or the earlier line
    ],
)
def test_the_highest_revision_wins_and_a_tie_keeps_the_first_read(
    tmp_path: Path, file: tuple[int, int] | None, journal: list[tuple[int, int]], expected: int | None
) -> None:
    paths = RolloutPaths(tmp_path)
    if file is not None:
        paths.checkpoint.write_text(_with_revision(*file).model_dump_json())
    if journal:
        paths.checkpoint_journal.write_text("".join(_with_revision(*line).model_dump_json() + "\n" for line in journal))
    found = load_checkpoint(paths)
    assert (found.turn_index if found is not None else None) == expected


def test_the_journal_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    paths = RolloutPaths(tmp_path)
    previous = os.umask(0)
    try:
        CheckpointStore(paths).write(_cp(0), compact=False)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(paths.checkpoint_journal.stat().st_mode) == 0o600


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
