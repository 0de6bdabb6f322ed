"""The resume checkpoint on disk: ``resume-checkpoint.json`` plus a write-ahead journal.

The pilot must make its checkpoint durable before every batch it sends. Replacing
``resume-checkpoint.json`` each time (a new file, an fsync, a rename, an fsync of the
directory) is the single most expensive step of a turn, so within the model loop each
checkpoint is instead appended as one line to ``resume-journal.jsonl`` and made durable
with one ``fdatasync``. The file itself is rewritten (atomically and durably) when the
pilot leaves the loop, at the handoff, and after every :data:`COMPACT_EVERY` journal
lines; the journal is then emptied, and removed when the pilot closes the store.

Every write carries a higher ``revision``: a reader takes the record with the highest
revision among the file and the journal's lines, so a crash at any point (between the
rewrite and the emptying, or in the middle of an append, whose torn last line is skipped)
leaves the newest durable checkpoint in force. Use :func:`load_checkpoint`, never the file
alone, to read a checkpoint that may belong to a running or interrupted pilot.
"""

from __future__ import annotations

import contextlib
import os

from autocad_bench.harness.layout import RolloutPaths
from autocad_bench.harness.records import ResumeCheckpoint
from autocad_bench.storage import atomic_write_model, fsync_directory, read_jsonl

COMPACT_EVERY = 64
"""Journal lines after which ``resume-checkpoint.json`` is rewritten and the journal emptied."""

_datasync = getattr(os, "fdatasync", os.fsync)
"""``fdatasync`` where the platform has it: the data and the file size, not the times."""


def load_checkpoint(paths: RolloutPaths) -> ResumeCheckpoint | None:
    """The newest durable checkpoint of the rollout, or ``None`` if it never wrote one.

    Raises ``ValueError`` (pydantic's ``ValidationError``) for a damaged file or for a
    damaged journal line other than a torn last one, and ``OSError`` if a file cannot be read.
    """
    return _read(paths)[0]


def _read(paths: RolloutPaths) -> tuple[ResumeCheckpoint | None, int]:
    """The newest checkpoint and the number of journal lines read."""
    newest: ResumeCheckpoint | None = None
    if paths.checkpoint.exists():
        newest = ResumeCheckpoint.model_validate_json(paths.checkpoint.read_bytes())
    lines = 0
    for record in read_jsonl(paths.checkpoint_journal):
        lines += 1
        candidate = ResumeCheckpoint.model_validate(record)
        if newest is None or candidate.revision > newest.revision:
            newest = candidate
    return newest, lines


class CheckpointStore:
    """Writes one rollout's checkpoints (one writer per rollout directory at a time)."""

    def __init__(self, paths: RolloutPaths) -> None:
        self.paths = paths
        self.revision = 0
        """Revision of the newest checkpoint written or loaded."""
        self._fd: int | None = None
        self._lines = 0

    def load(self) -> ResumeCheckpoint | None:
        """:func:`load_checkpoint`, and continue the revisions and the journal from there."""
        checkpoint, self._lines = _read(self.paths)
        if checkpoint is not None:
            self.revision = checkpoint.revision
        return checkpoint

    @property
    def journalled(self) -> bool:
        """Whether the journal holds lines, i.e. ``resume-checkpoint.json`` may be behind."""
        return self._lines > 0

    def write(self, checkpoint: ResumeCheckpoint, *, compact: bool) -> ResumeCheckpoint:
        """Make ``checkpoint`` durable under the next revision and return it with that revision.

        ``compact`` rewrites ``resume-checkpoint.json`` and empties the journal; otherwise
        the checkpoint is appended to the journal (which also compacts every
        :data:`COMPACT_EVERY` lines). Raises ``OSError`` if the disk refuses the write.
        """
        self.revision = max(self.revision, checkpoint.revision) + 1
        checkpoint = checkpoint.model_copy(update={"revision": self.revision})
        if compact or self._lines >= COMPACT_EVERY:
            atomic_write_model(self.paths.checkpoint, checkpoint)
            # Only now is the journal redundant: every line has a lower revision.
            self._empty_journal()
        else:
            self._append(checkpoint.model_dump_json().encode("utf-8") + b"\n")
        return checkpoint

    def close(self) -> None:
        """Close the journal and remove it if it holds nothing (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            if self.paths.checkpoint_journal.stat().st_size == 0:
                self.paths.checkpoint_journal.unlink()

    def _append(self, line: bytes) -> None:
        if self._fd is None:
            created = not self.paths.checkpoint_journal.exists()
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
            self._fd = os.open(self.paths.checkpoint_journal, flags, 0o600)
            if created:
                # The new name must survive a crash too, once.
                fsync_directory(self.paths.root)
        view = memoryview(line)
        while view:
            view = view[os.write(self._fd, view):]
        _datasync(self._fd)
        self._lines += 1

    def _empty_journal(self) -> None:
        self._lines = 0
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
        elif self.paths.checkpoint_journal.exists():
            with open(self.paths.checkpoint_journal, "r+b") as journal:
                journal.truncate(0)
