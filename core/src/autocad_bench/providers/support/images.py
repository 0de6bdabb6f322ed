"""Checksum-verified images as ``data:`` URLs, encoded once and cached.

The reference image is encoded once per session; each desktop frame once per turn (a
retried request reuses the frame it already encoded). A file whose SHA-256 does not match
its :class:`~autocad_bench.models.ArtifactRef` is refused before anything is sent.
"""

from __future__ import annotations

import base64
import hashlib
from collections import OrderedDict
from pathlib import Path

from autocad_bench.models import ArtifactRef


class ArtifactIntegrityError(ValueError):
    """A referenced image is missing or its sha256 checksum does not match its reference."""


def read_verified(rollout_dir: Path, ref: ArtifactRef) -> bytes:
    """The bytes of ``ref`` (relative to ``rollout_dir``) after checking their sha256."""
    path = rollout_dir / ref.path
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ArtifactIntegrityError(f"image {ref.path} cannot be read: {error}") from None
    actual = hashlib.sha256(data).hexdigest()
    if actual != ref.sha256:
        raise ArtifactIntegrityError(
            f"image {ref.path} failed its sha256 checksum: expected {ref.sha256}, found {actual}"
        )
    return data


class DataUrlCache:
    """``data:`` URLs of verified images, keyed by (path, checksum), least recently used evicted.

    ``pinned`` entries (the reference) are never evicted; at most ``capacity`` other entries
    are kept. The key includes the path so that every referenced file is read and verified
    at least once, even when another file has the same expected checksum.
    """

    def __init__(self, rollout_dir: Path, capacity: int = 2) -> None:
        self.rollout_dir = rollout_dir
        self.capacity = capacity
        self._pinned: dict[tuple[str, str], str] = {}
        self._recent: OrderedDict[tuple[str, str], str] = OrderedDict()
        self.encodings = 0

    def url(self, ref: ArtifactRef, *, pin: bool = False) -> str:
        """The ``data:`` URL of ``ref``, encoding it only if it is not cached."""
        key = (ref.path, ref.sha256)
        cached = self._pinned.get(key)
        if cached is None:
            cached = self._recent.get(key)
            if cached is not None:
                self._recent.move_to_end(key)
        if cached is None:
            data = read_verified(self.rollout_dir, ref)
            cached = f"data:{ref.media_type};base64,{base64.b64encode(data).decode('ascii')}"
            self.encodings += 1
            if pin:
                self._pinned[key] = cached
            else:
                self._recent[key] = cached
                while len(self._recent) > self.capacity:
                    self._recent.popitem(last=False)
        elif pin and key not in self._pinned:
            self._pinned[key] = cached
        return cached
