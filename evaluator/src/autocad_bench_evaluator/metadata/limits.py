"""Bounds on reading one drawing and the errors of reading: :class:`ReadLimits`,
:class:`CannotReadDrawing` (the evaluator cannot read a DWG here) and :class:`BadNumber` (an
entity holds a number that is not finite or out of range)."""

from __future__ import annotations

from pydantic import Field

from autocad_bench.models import StrictModel


class ReadLimits(StrictModel):
    """Bounds on reading one drawing, enforced as the file is read, not after.

    ``max_bytes`` is checked with ``stat`` before the file is opened. ``max_tags`` (group-code
    tags) and ``max_entities`` (records in the file, and entity records extracted, exploded
    block contents included) are counted while ezdxf consumes the tag stream and while
    entities are extracted, so a file is stopped as soon as it crosses one; both are
    deterministic. ``max_text_chars`` and ``max_spline_points`` bound the work ezdxf does on
    one entity (its text and spline routines grow faster than linearly): a larger entity is
    skipped as unreadable before ezdxf touches it. ``max_seconds`` is the wall-clock safety
    net, checked every 4,096 tags and at every entity. docs/drawing-input.md gives the time
    and memory these defaults bound. ``max_memory_bytes`` applies where the read runs isolated
    (:mod:`~autocad_bench_evaluator.isolated_read`, the evaluation path): the child's address
    space may grow by that much.
    """

    max_bytes: int = Field(default=32 * 1024 * 1024, ge=1)
    max_tags: int = Field(default=300_000, ge=1)
    max_entities: int = Field(default=50_000, ge=1)
    max_seconds: float = Field(default=10.0, gt=0)
    max_text_chars: int = Field(default=16_384, ge=1)
    max_spline_points: int = Field(default=1_000, ge=4)
    max_curve_points: int = Field(default=512, ge=8)
    max_block_depth: int = Field(default=8, ge=1)
    max_memory_bytes: int = Field(default=1024 * 1024 * 1024, ge=16 * 1024 * 1024)


class CannotReadDrawing(Exception):
    """The evaluator cannot read this drawing here (a failure of the evaluator, not the model).

    Raised for a DWG without adapter metadata or converter, a failing converter, or adapter
    metadata that does not belong to the DWG. The message starts with "cannot read DWG here".
    """


class BadNumber(ValueError):
    """A number in the drawing is not finite or out of range: the entity holding it is
    unreadable (skipped and counted), never scored."""
