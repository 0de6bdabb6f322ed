"""The append-only Responses history of one rollout, with each item serialized once.

Items are kept in *checkpoint form*: plain JSON where every image part is
``{"type": "input_image", "artifact": {path, sha256, ...}, "detail": ...}``. The *wire
form* replaces ``artifact`` by a ``data:`` URL read from the checksum-verified file. Each
item is converted and JSON-encoded exactly once, when it is appended (or rehydrated on
resume), so building a request costs one join of cached bytes however long the rollout
is, and no historical screenshot is ever base64-encoded twice.
"""

from __future__ import annotations

import json
from typing import Any

from autocad_bench.models import ArtifactRef
from autocad_bench.providers.support.images import DataUrlCache

OMITTED_SCREENSHOT = "(screenshot omitted to reduce the request size)"


def dumps(value: Any) -> bytes:
    """Compact, canonical JSON bytes (sorted keys, UTF-8, no NaN).

    Keys are sorted so that an item restored from a checkpoint (which the harness stores
    with sorted keys) encodes to exactly the bytes it had when it was first sent.
    """
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False, sort_keys=True).encode()


def image_part(ref: ArtifactRef, detail: str) -> dict[str, Any]:
    """A checkpoint-form image part."""
    return {"type": "input_image", "artifact": ref.model_dump(mode="json"), "detail": detail}


def text_part(text: str) -> dict[str, Any]:
    """A checkpoint-form ``input_text`` part."""
    return {"type": "input_text", "text": text}


def user_message(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """A user message item with ``parts`` as its content."""
    return {"type": "message", "role": "user", "content": parts}


def to_wire(item: dict[str, Any], images: DataUrlCache) -> dict[str, Any]:
    """The wire form of a checkpoint-form item (images read, verified and encoded)."""
    content = item.get("content")
    if not isinstance(content, list) or not any(
        isinstance(p, dict) and p.get("type") == "input_image" and "artifact" in p for p in content
    ):
        return item
    parts: list[Any] = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "input_image" and "artifact" in part:
            ref = ArtifactRef.model_validate(part["artifact"])
            parts.append({"type": "input_image", "image_url": images.url(ref), "detail": part.get("detail", "auto")})
        else:
            parts.append(part)
    return {**item, "content": parts}


def has_images(item: dict[str, Any]) -> bool:
    """Whether ``item`` has an ``input_image`` part (a candidate when screenshots are omitted)."""
    content = item.get("content")
    return isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") == "input_image" for p in content
    )


def without_images(item: dict[str, Any]) -> dict[str, Any]:
    """``item`` with each image part replaced by a short text part."""
    content = item["content"]
    parts = [text_part(OMITTED_SCREENSHOT) if isinstance(p, dict) and p.get("type") == "input_image" else p
             for p in content]
    return {**item, "content": parts}


class AppendOnlyLog:
    """Checkpoint-form items and their cached wire bytes, in lock-step.

    :attr:`segments` is the same bytes grouped per append, each group already joined with
    its separating commas: ``b"".join(segments)`` is the body of the JSON ``input`` array, and
    a request can stream the segments without copying the history into one buffer.
    """

    def __init__(self, images: DataUrlCache) -> None:
        self._images = images
        self.items: list[dict[str, Any]] = []
        self.encoded: list[bytes] = []
        self.segments: list[bytes] = []
        self.size = 0

    def __len__(self) -> int:
        return len(self.items)

    def encode(self, item: dict[str, Any]) -> bytes:
        """The wire bytes of a checkpoint-form item (reads and verifies its images)."""
        return dumps(to_wire(item, self._images))

    def extend(self, items: list[dict[str, Any]], encoded: list[bytes]) -> None:
        """Append items whose bytes were already computed (e.g. the tail of a sent request)."""
        if len(items) != len(encoded):
            raise ValueError("items and encodings differ in length")
        if not items:
            return
        segment = self.segment(encoded)
        self.items.extend(items)
        self.encoded.extend(encoded)
        self.segments.append(segment)
        self.size += len(segment)

    def segment(self, encoded: list[bytes]) -> bytes:
        """``encoded`` joined as it continues the ``input`` array after the current items."""
        joined = b",".join(encoded)
        return b"," + joined if self.items else joined

    def _resegment(self) -> None:
        self.segments = [self.encoded[0], *(b"," + e for e in self.encoded[1:])] if self.encoded else []
        self.size = sum(len(s) for s in self.segments)

    def restore(self, items: list[dict[str, Any]]) -> None:
        """Replace the log by ``items`` from a checkpoint, rehydrating every image from its file."""
        encoded = [self.encode(item) for item in items]
        self.items = list(items)
        self.encoded = encoded
        self._resegment()

    def elide_oldest_screenshots(self, keep_first: int = 1) -> bool:
        """Replace the images of the older half of the image-bearing items after ``keep_first``.

        The first item (task, reference, first desktop) stays intact. Returns whether
        anything changed.
        """
        candidates = [i for i, item in enumerate(self.items) if i >= keep_first and has_images(item)]
        # Keep the newest screenshot: it is what the model last saw.
        candidates = candidates[:-1]
        if not candidates:
            return False
        for i in candidates[: max(1, len(candidates) // 2)]:
            self.items[i] = without_images(self.items[i])
            self.encoded[i] = self.encode(self.items[i])
        self._resegment()
        return True
