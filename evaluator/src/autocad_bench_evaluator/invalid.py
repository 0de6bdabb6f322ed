"""Why a drawing cannot count as an attempt: the stable failure classes of an invalid drawing.

Every invalid drawing carries one class from :data:`InvalidClass` (stable across releases:
reports, dashboards and comparisons group by it) and a sentence for people. ``failed``
evaluations are not listed here: they are the evaluator's own faults, never the drawing's.
"""

from __future__ import annotations

from typing import Literal

InvalidClass = Literal[
    "no-drawing",
    "empty-file",
    "too-large",
    "not-a-drawing",
    "truncated",
    "malformed",
    "entities-lost",
    "tag-limit",
    "entity-limit",
    "time-limit",
    "memory-limit",
    "nesting-limit",
    "dwg-invalid",
]
"""
- ``no-drawing``: nothing was saved, or the path is missing, not a file or not readable;
- ``empty-file``: zero bytes;
- ``too-large``: over the size limit (checked before reading);
- ``not-a-drawing``: neither a DXF (ASCII or binary) nor a DWG signature;
- ``truncated``: the file ends before its ``EOF`` marker;
- ``malformed``: the DXF structure cannot be parsed, even by ezdxf's recover mode;
- ``entities-lost``: the file declares entities the parser could not load (never a silent 0);
- ``tag-limit`` / ``entity-limit`` / ``time-limit`` / ``memory-limit`` / ``nesting-limit``: a
  reading bound was crossed (see docs/drawing-input.md);
- ``dwg-invalid``: AutoCAD (through the adapter) or the converter reported the DWG unreadable.
"""
