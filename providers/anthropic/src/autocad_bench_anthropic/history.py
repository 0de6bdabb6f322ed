"""The Messages history of one rollout: messages in checkpoint form and as sent, with their sizes.

Every message exists in two forms:

* the **reference form** (``Entry.ref``) is plain JSON in which an image is
  ``{"type": "image", "source": {"type": "artifact", "path", "sha256", "media_type"}}``, a
  checksummed reference to a file of the rollout directory. It is what ``checkpoint()``
  stores, so the checkpoint stays small and contains no image bytes;
* the **wire form** (``Entry.wire``) is the same message with each artifact source replaced
  by a base64 source, rendered once and cached together with its serialized size.

The request size is then the size of the request skeleton plus the cached sizes of the
messages, without serializing megabytes of base64 on every turn. :data:`ENCODER` encodes
exactly like the SDK's request encoder (compact separators, UTF-8, no ASCII escaping).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from autocad_bench.models import ArtifactRef
from autocad_bench.providers.models import ProviderErrorKind, ProviderRequestError

Json = dict[str, Any]

ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
"""Encodes like ``anthropic._utils._json.openapi_dumps`` (checked by the tests)."""

ARTIFACT_SOURCE = "artifact"


def canonical(value: Any) -> Any:
    """``value`` with every object's keys in sorted order.

    Messages are kept in this order so that a history rebuilt from a checkpoint (which may
    have passed through ``json.dumps(..., sort_keys=True)``) serializes to identical bytes.
    """
    if isinstance(value, dict):
        return {k: canonical(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    return value


def encoded_size(value: Any) -> int:
    """Bytes of ``value`` as the SDK serializes it."""
    return len(ENCODER.encode(value).encode("utf-8"))


class ArtifactIntegrityError(ProviderRequestError):
    """An image file is missing or does not match its recorded sha256 (nothing was sent)."""

    def __init__(self, message: str) -> None:
        super().__init__(ProviderErrorKind.FATAL, message)


class ImageStore:
    """Base64 of checksum-verified image files of one rollout directory, encoded once each."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._b64: dict[str, str] = {}
        self.encodings = 0

    def b64(self, path: str, sha256: str) -> str:
        """Base64 of ``root/path``; raises :class:`ArtifactIntegrityError` if its sha256 differs."""
        cached = self._b64.get(sha256)
        if cached is not None:
            return cached
        file = (self.root / path).resolve()
        root = self.root.resolve()
        if root != file and root not in file.parents:
            raise ArtifactIntegrityError(f"image {path!r} is outside the rollout directory")
        try:
            data = file.read_bytes()
        except OSError as error:
            raise ArtifactIntegrityError(f"image {path!r} cannot be read: {error.strerror or error}") from None
        digest = hashlib.sha256(data).hexdigest()
        if digest != sha256:
            raise ArtifactIntegrityError(
                f"image {path!r} does not match its recorded sha256 checksum "
                f"(expected {sha256[:12]}..., file has {digest[:12]}...); nothing was sent"
            )
        encoded = base64.b64encode(self.prepare(data)).decode("ascii")
        self._b64[sha256] = encoded
        self.encodings += 1
        return encoded

    def prepare(self, data: bytes) -> bytes:
        """The bytes to send for a verified image (as read, here; a subclass may scale them)."""
        return data

    def retain(self, sha256s: Iterable[str]) -> None:
        """Forget the encodings of images no longer referenced."""
        keep = set(sha256s)
        for digest in [d for d in self._b64 if d not in keep]:
            del self._b64[digest]


# --- blocks in reference form -------------------------------------------------------------


def text_block(text: str) -> Json:
    """A text content block."""
    return {"type": "text", "text": text}


def image_block(ref: ArtifactRef, *, cache_control: Json | None = None) -> Json:
    """An image block in reference form (the artifact's path and checksum, encoded only when
    sent), with ``cache_control`` when given.
    """
    block: Json = {
        "type": "image",
        "source": {"type": ARTIFACT_SOURCE, "path": ref.path, "sha256": ref.sha256, "media_type": ref.media_type},
    }
    if cache_control is not None:
        block["cache_control"] = dict(cache_control)
    return block


def is_artifact_image(block: Any) -> bool:
    """Whether ``block`` is an image block in reference form (see :func:`image_block`)."""
    return (
        isinstance(block, dict)
        and block.get("type") == "image"
        and isinstance(block.get("source"), dict)
        and block["source"].get("type") == ARTIFACT_SOURCE
    )


def _render_block(block: Json, store: ImageStore) -> Json:
    if is_artifact_image(block):
        source = block["source"]
        # Replacing the value keeps the key order of the reference form.
        return {**block, "source": {"type": "base64", "media_type": source["media_type"],
                                    "data": store.b64(source["path"], source["sha256"])}}
    if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
        return {**block, "content": [_render_block(inner, store) for inner in block["content"]]}
    return block


def render_message(message: Json, store: ImageStore) -> Json:
    """The wire form of a reference-form message."""
    content = message.get("content")
    if not isinstance(content, list):
        return message
    return {**message, "content": [_render_block(block, store) for block in content]}


def iter_images(message: Json) -> Iterator[Json]:
    """Every artifact image block of a message, tool results included."""
    content = message.get("content")
    if not isinstance(content, list):
        return
    for block in content:
        if is_artifact_image(block):
            yield block
        elif isinstance(block, dict) and block.get("type") == "tool_result" and isinstance(block.get("content"), list):
            yield from (inner for inner in block["content"] if is_artifact_image(inner))


# --- entries --------------------------------------------------------------------------------


class Entry:
    """One message: reference form (keys sorted), and once rendered its wire form and size."""

    __slots__ = ("_size", "_wire", "ref")

    def __init__(self, ref: Json) -> None:
        self.ref: Json = canonical(ref)
        self._wire: Json | None = None
        self._size = -1

    @classmethod
    def of(cls, ref: Json, store: ImageStore) -> Entry:
        entry = cls(ref)
        entry.render(store)
        return entry

    def render(self, store: ImageStore) -> Json:
        if self._wire is None:
            wire = render_message(self.ref, store)
            self._size = encoded_size(wire)
            self._wire = wire
        return self._wire

    def size(self, store: ImageStore) -> int:
        self.render(store)
        return self._size

    @property
    def role(self) -> str:
        return str(self.ref.get("role"))

    def has_compaction(self) -> bool:
        content = self.ref.get("content")
        return isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "compaction" for b in content
        )

    def image_shas(self) -> list[str]:
        return [str(block["source"]["sha256"]) for block in iter_images(self.ref)]


def messages_size(entries: list[Entry], store: ImageStore) -> int:
    """Serialized bytes the list contributes inside ``"messages":[...]``."""
    return sum(e.size(store) for e in entries) + max(0, len(entries) - 1)


# --- rewrites -------------------------------------------------------------------------------


def screenshot_placeholder(path: str) -> Json:
    """The text block that replaces an earlier screenshot removed to keep a request small."""
    return text_block(f"[Earlier screenshot removed to keep the request small: {path}]")


def _strip_block(block: Json, keep: tuple[str, str]) -> tuple[Json, int]:
    if is_artifact_image(block):
        source = block["source"]
        if (source["path"], source["sha256"]) == keep:
            return block, 0
        return screenshot_placeholder(str(source["path"])), 1
    if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
        removed = 0
        inner_blocks = []
        for inner in block["content"]:
            new, count = _strip_block(inner, keep)
            inner_blocks.append(new)
            removed += count
        return ({**block, "content": inner_blocks}, removed) if removed else (block, 0)
    return block, 0


def strip_screenshots(entry: Entry, reference: ArtifactRef, store: ImageStore) -> tuple[Entry, int]:
    """``entry`` with every image except the fixed reference replaced by a short text."""
    content = entry.ref.get("content")
    if not isinstance(content, list):
        return entry, 0
    keep = (reference.path, reference.sha256)
    removed = 0
    blocks = []
    for block in content:
        new, count = _strip_block(block, keep)
        blocks.append(new)
        removed += count
    if not removed:
        return entry, 0
    return Entry.of({**entry.ref, "content": blocks}, store), removed


def complete_pairs(entries: list[Entry]) -> list[int]:
    """Indices ``i`` where ``entries[i]`` (assistant tool use) and ``entries[i+1]`` (its result) form a pair."""
    return [
        i for i in range(1, len(entries) - 1)
        if entries[i].role == "assistant" and entries[i + 1].role == "user"
    ]


def drop_oldest_pairs(entries: list[Entry], count: int) -> tuple[list[Entry], int]:
    """Remove up to ``count`` oldest complete tool-use/tool-result pairs.

    The first message (task) is kept, and so is any assistant message that carries a server
    compaction block (with the result that answers it): the compaction replaces what came
    before it and must stay.
    """
    droppable = [i for i in complete_pairs(entries) if not entries[i].has_compaction()]
    chosen = set(droppable[:count])
    if not chosen:
        return entries, 0
    kept = [e for i, e in enumerate(entries) if i not in chosen and i - 1 not in chosen]
    return kept, len(chosen)
