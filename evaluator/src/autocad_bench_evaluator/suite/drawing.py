"""Deterministic DXF documents for templates and gold drawings.

Every drawing the suite writes comes from :func:`new_document` and is saved with
:func:`save_deterministic`, so regenerating a template or a gold drawing gives the same bytes
on every run and machine: ezdxf's fixed-metadata mode pins the creation/update time stamps
and GUIDs, handles are allocated in construction order, and ACIS bodies get a fixed header
date (:func:`fixed_sat`).

The initial view of a drawing is its ``*Active`` VPORT. LibreCAD 2.2 (the local stand-in)
interprets that record unusually: with the seeded 1920x1050 window its drawing area is
:data:`LIBRECAD_CANVAS` pixels and it shows ``height`` drawing units vertically with the
**upper right** corner of the canvas at ``2 * center`` (measured, see
:meth:`View.librecad_screen`). AutoCAD centres the view on ``center``. :class:`View` is chosen
so that both show the work area.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ezdxf import units as dxf_units
from ezdxf._options import options as ezdxf_options
from ezdxf.document import Drawing
from ezdxf.filemanagement import new as new_drawing

DXF_VERSION = "R2007"
"""LibreCAD saves DXF R2007 (AC1021); templates and gold drawings use the same version."""

FIXED_SAT_DATE = "Sun Nov 29 12:00:00 2026"
"""The creation date written into every ACIS header (``ctime`` format, 24 characters)."""


@dataclass(frozen=True, slots=True)
class Canvas:
    """The drawing area of LibreCAD's main window in screen pixels (inclusive bounds)."""

    left: int
    top: int
    right: int
    bottom: int

    @property
    def width(self) -> int:
        return self.right - self.left + 1

    @property
    def height(self) -> int:
        return self.bottom - self.top + 1


LIBRECAD_CANVAS = Canvas(left=42, top=96, right=1593, bottom=930)
"""Measured on LibreCAD 2.2 with the broker's seeded layout at 1920x1080 (window 1920x1050)."""


@dataclass(frozen=True, slots=True)
class View:
    """The initial model-space view of a template: ``center`` and visible ``height`` (mm)."""

    center: tuple[float, float]
    height: float

    @classmethod
    def from_lower_left(cls, lower_left: tuple[float, float], height: float, canvas: Canvas = LIBRECAD_CANVAS) -> View:
        """The view whose LibreCAD canvas starts at ``lower_left`` and shows ``height`` mm."""
        scale = canvas.height / height
        upper_right = (lower_left[0] + canvas.width / scale, lower_left[1] + height)
        return cls(center=(upper_right[0] / 2.0, upper_right[1] / 2.0), height=height)

    def librecad_scale(self, canvas: Canvas = LIBRECAD_CANVAS) -> float:
        """Screen pixels per drawing unit in LibreCAD."""
        return canvas.height / self.height

    def librecad_screen(self, x: float, y: float, canvas: Canvas = LIBRECAD_CANVAS) -> tuple[int, int]:
        """The screen pixel where LibreCAD shows the drawing point ``(x, y)`` right after loading."""
        scale = self.librecad_scale(canvas)
        right = canvas.right + 0.5
        sx = right - (2.0 * self.center[0] - x) * scale
        sy = canvas.top + (2.0 * self.center[1] - y) * scale
        return round(sx), round(sy)

    def librecad_visible(self, canvas: Canvas = LIBRECAD_CANVAS) -> tuple[tuple[float, float], tuple[float, float]]:
        """Lower-left and upper-right drawing coordinates of LibreCAD's initial canvas."""
        scale = self.librecad_scale(canvas)
        upper_right = (2.0 * self.center[0], 2.0 * self.center[1])
        return (upper_right[0] - canvas.width / scale, upper_right[1] - self.height), upper_right


STANDARD_VIEW = View.from_lower_left((-25.0, -25.0), 250.0)
"""The view of most templates: about x -25..440, y -25..225 mm in LibreCAD."""


def new_document(view: View | None = None) -> Drawing:
    """An empty millimetre drawing (DXF R2007) whose active viewport shows ``view``."""
    with _fixed_metadata():  # ezdxf stamps its creation marker while building the document
        doc = new_drawing(DXF_VERSION, setup=False, units=dxf_units.MM)
    header = doc.header
    header["$MEASUREMENT"] = 1  # metric
    header["$LUNITS"] = 2  # decimal
    header["$LUPREC"] = 4
    header["$AUNITS"] = 0  # decimal degrees
    header["$AUPREC"] = 2
    header["$LIMMIN"] = (0.0, 0.0)
    header["$LIMMAX"] = (420.0, 297.0)
    header["$DIMTXT"] = 3.5
    header["$DIMASZ"] = 2.5
    if view is not None:
        doc.set_modelspace_vport(height=view.height, center=view.center)
    return doc


@contextmanager
def _fixed_metadata() -> Iterator[None]:
    previous = ezdxf_options.write_fixed_meta_data_for_testing
    ezdxf_options.write_fixed_meta_data_for_testing = True
    try:
        yield
    finally:
        ezdxf_options.write_fixed_meta_data_for_testing = previous


def _sort_classes(doc: Drawing) -> int:
    """Put the CLASSES section in name order; returns the number of classes.

    ezdxf registers a CLASS for every entity type in use by iterating a set, so without this
    the section order would follow the per-process string hash seed.
    """
    doc.classes.add_required_classes(doc.dxfversion)
    ordered = sorted(doc.classes.classes.items())
    doc.classes.classes.clear()
    doc.classes.classes.update(ordered)
    return len(ordered)


def document_bytes(doc: Drawing) -> bytes:
    """The DXF text of ``doc`` with fixed metadata (ASCII, ``\\n`` line ends)."""
    with _fixed_metadata():
        while True:
            count = _sort_classes(doc)
            stream = io.StringIO()
            doc.write(stream)
            if len(doc.classes.classes) == count:  # writing registered no new class
                return stream.getvalue().encode("utf-8")


def save_deterministic(doc: Drawing, path: Path) -> Path:
    """Write ``doc`` to ``path`` byte-for-byte reproducibly; returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = document_bytes(doc)
    if not path.is_file() or path.read_bytes() != data:
        path.write_bytes(data)
    return path


_SAT_DATE = re.compile(r"@24 [A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9]\d \d\d:\d\d:\d\d \d{4}")


def fixed_sat(lines: Sequence[str]) -> list[str]:
    """ACIS SAT text with its header creation date replaced by :data:`FIXED_SAT_DATE`."""
    result = list(lines)
    for index, line in enumerate(result[:3]):
        result[index] = _SAT_DATE.sub(f"@24 {FIXED_SAT_DATE}", line)
    return result


def add_solid_from_mesh(doc: Drawing, mesh: Any, layer: str = "0") -> Any:
    """Add a 3DSOLID whose ACIS body is the closed polyhedral ``mesh`` (a ezdxf MeshBuilder)."""
    from ezdxf.acis.entities import export_sat
    from ezdxf.acis.mesh import body_from_mesh

    solid = doc.modelspace().add_3dsolid(dxfattribs={"layer": layer})
    solid.sat = fixed_sat(export_sat([body_from_mesh(mesh)]))
    return solid
