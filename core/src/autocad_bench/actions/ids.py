"""Stable idempotency identities of broker mutations."""

from __future__ import annotations

import hashlib
import json


def action_request_id(attempt_id: str, tool_use_id: str, batch_offset: int) -> str:
    """The request id of one ``POST /actions`` call: SHA-256 hex of a JSON array.

    ``batch_offset`` is the position of the first sent action inside the model's tool call
    (0 when the whole batch goes in one request). Encoding the three values as a JSON
    array keeps the identity unambiguous (``("a-b", "c")`` and ``("a", "b-c")`` differ),
    so a retry of the same call always reproduces the same id and nothing else does.
    Raises ``TypeError``/``ValueError`` for a wrongly typed or negative argument.
    """
    if not isinstance(attempt_id, str) or not isinstance(tool_use_id, str):
        raise TypeError("attempt_id and tool_use_id must be strings")
    if isinstance(batch_offset, bool) or not isinstance(batch_offset, int):
        raise TypeError("batch_offset must be an int")
    if batch_offset < 0:
        raise ValueError("batch_offset must be >= 0")
    # ASCII escapes keep the encoding total: lone surrogates cannot break it.
    encoded = json.dumps([attempt_id, tool_use_id, batch_offset], separators=(",", ":"))
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()
