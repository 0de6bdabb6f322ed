"""On-disk storage of one session: the attempt drawing, captured frames and artifacts.

Layout under the broker's runtime directory (``--workdir``)::

    sessions/<session_id>/attempt/attempt.dxf     the drawing the application edits
    sessions/<session_id>/frames/000000.png       frame 0 (reset), 000001.png ... (batches)
    sessions/<session_id>/artifacts/attempt.dxf   the drawing as of the latest checkpoint

Frames are written once, atomically (:func:`autocad_bench.storage.atomic_write_bytes`), when
they are captured, and served unchanged: every read re-checks the SHA-256 recorded at
capture, so a file damaged on disk is an error (500) instead of a silently different
screenshot. Artifacts are *copies* of the attempt drawing taken at checkpoint time: the
application (or the model pressing Ctrl+S) may rewrite the attempt file later, but the
artifact keeps the bytes whose digest the checkpoint announced.

Names are checked against the protocol's ``Name`` pattern and must resolve to a regular file
directly inside their directory (no separators, no ``..``, no leading dot, no symlink), so a
request can never read outside the session's own directories. All methods block on file
I/O: the server calls them from worker threads.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

from autocad_bench.broker.protocol import ArtifactInfo
from autocad_bench.broker.service import is_plain_name
from autocad_bench.storage import atomic_write_bytes
from autocad_bench_broker.drivers.capture import PngImage
from autocad_bench_broker.errors import BrokerError


class StoreError(BrokerError):
    """A stored file is missing, unreadable, outside its directory or not what was recorded."""


class NotStored(StoreError):
    """No file of that name or sequence exists (a 404, not a fault)."""


def inside(directory: Path, name: str) -> Path:
    """``directory / name`` after proving it is a regular file directly inside ``directory``.

    Raises :class:`StoreError` for a name that is not a plain name and :class:`NotStored`
    when no such regular file exists (symlinks are refused like missing files).
    """
    if not is_plain_name(name):
        raise StoreError("not a plain file name")
    path = directory / name
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        raise NotStored(name) from None
    except OSError as exc:
        raise StoreError(f"cannot stat {name}: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise NotStored(name)
    if path.resolve().parent != directory.resolve():
        raise StoreError("name resolves outside its directory")
    return path


def _write_atomically(directory: Path, name: str, data: bytes) -> Path:
    # Not fsynced: a frame or artifact only has to survive the broker process, not the host.
    # The temporary file's leading dot keeps it outside the servable name space.
    target = directory / name
    atomic_write_bytes(target, data, durable=False)
    return target


def _read_checked(path: Path, expected_sha256: str) -> bytes:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise NotStored(path.name) from None
    except OSError as exc:
        raise StoreError(f"cannot read {path.name}: {exc.strerror}") from None
    if hashlib.sha256(data).hexdigest() != expected_sha256:
        raise StoreError(f"{path.name} changed on disk since it was recorded")
    return data


class SessionFiles:
    """The directories of one session under ``root`` (created by :meth:`create`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.attempt_dir = root / "attempt"
        self.frames_dir = root / "frames"
        self.artifacts_dir = root / "artifacts"

    def create(self) -> None:
        """Create the (empty) directories; raises OSError if the file system refuses."""
        for directory in (self.attempt_dir, self.frames_dir, self.artifacts_dir):
            directory.mkdir(parents=True, exist_ok=True)

    def attempt_path(self, name: str) -> Path:
        """Where the application edits the drawing (``name`` is e.g. ``attempt.dxf``)."""
        return self.attempt_dir / name

    # Frames ---------------------------------------------------------------------------------

    @staticmethod
    def frame_name(sequence: int) -> str:
        return f"{sequence:06d}.png"

    def write_frame(self, sequence: int, png: PngImage) -> Path:
        """Store the PNG of frame ``sequence`` (atomic; the caller guarantees uniqueness)."""
        return _write_atomically(self.frames_dir, self.frame_name(sequence), png.data)

    def read_frame(self, sequence: int, expected_sha256: str) -> bytes:
        """The stored PNG bytes of ``sequence``; :class:`StoreError` if they changed on disk."""
        return _read_checked(self.frames_dir / self.frame_name(sequence), expected_sha256)

    # Artifacts ------------------------------------------------------------------------------

    def store_artifact(self, source: Path, name: str) -> ArtifactInfo:
        """Copy ``source`` to ``artifacts/<name>`` atomically and describe the copy.

        The digest is computed from the bytes written, so it is exactly what will be served.
        Raises :class:`StoreError` if ``name`` is not a plain name or ``source`` is unreadable.
        """
        if not is_plain_name(name):
            raise StoreError("not a plain file name")
        try:
            with open(source, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise StoreError(f"cannot read the saved drawing: {exc.strerror}") from None
        try:
            _write_atomically(self.artifacts_dir, name, data)
        except OSError as exc:
            raise StoreError(f"cannot store the artifact: {exc.strerror}") from None
        return ArtifactInfo(name=name, size=len(data), sha256=hashlib.sha256(data).hexdigest())

    def read_artifact(self, name: str, expected_sha256: str) -> bytes:
        """The bytes of artifact ``name``; raises :class:`NotStored` or :class:`StoreError`."""
        return _read_checked(inside(self.artifacts_dir, name), expected_sha256)

    def remove(self) -> None:
        """Delete the whole session directory (best effort; used by tests and clean-up)."""
        shutil.rmtree(self.root, ignore_errors=True)
