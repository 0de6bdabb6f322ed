"""Screen geometry: the desktop a model drives versus the (possibly scaled) screenshot it sees.

A model that receives a screenshot scaled from the 1920x1080 desktop to, say, 1280x720
answers in the pixels of the image it saw. :class:`ScreenGeometry` maps those pixels back
to the desktop exactly once, with one stated rounding rule, so every grammar and provider
agrees on where a click lands. The vendor image limits a scaled size is fitted to are named
constants below, each with its source.

Rounding rule (pixel centres): shown pixel ``x`` covers ``[x, x + 1)`` of the shown image,
whose centre ``x + 0.5`` lies at ``(x + 0.5) * W / w`` on the desktop; the desktop pixel is
the one containing that point, ``floor((x + 0.5) * W / w)``, clamped to ``[0, W - 1]``.
The inverse rule swaps the two sizes. All arithmetic is exact (rational), never float.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from fractions import Fraction

from autocad_bench.errors import MissingExtraError
from autocad_bench.providers.models import DisplaySize

ANTHROPIC_MAX_LONG_EDGE = 1568
"""Anthropic vision: images whose long edge exceeds 1568 px are scaled down server-side.

Source: https://docs.anthropic.com/en/docs/build-with-claude/vision ("Evaluate image size").
"""

ANTHROPIC_MAX_PIXELS = 1_150_000
"""Anthropic vision: images above about 1.15 megapixels are scaled down server-side.

Source: https://docs.anthropic.com/en/docs/build-with-claude/vision (same section).
"""

OPENAI_HIGH_DETAIL_MAX_EDGE = 2048
"""OpenAI ``detail: high``: the image is first fitted inside a 2048 x 2048 square.

Source: https://platform.openai.com/docs/guides/images-vision ("Calculating costs").
"""

OPENAI_HIGH_DETAIL_SHORT_EDGE = 768
"""OpenAI ``detail: high``: then scaled so that its shortest side is 768 px (never up).

Source: https://platform.openai.com/docs/guides/images-vision ("Calculating costs").
"""

QWEN25_VL_FACTOR = 28
"""Qwen2.5-VL (and UI-TARS-1.5) image sides are multiples of 28 (14 px patches, 2x2 merge).

Source: the ``smart_resize`` of the Qwen2.5-VL image processor (transformers / qwen-vl-utils).
"""

QWEN3_VL_FACTOR = 32
"""Qwen3-VL image sides are multiples of 32 (16 px patches, 2x2 merge); same source family."""

QWEN_MIN_PIXELS = 4 * 28 * 28
"""Default lower pixel bound of the Qwen2.5-VL processor's ``smart_resize`` (3136)."""

QWEN_MAX_PIXELS = 16384 * 28 * 28
"""Default upper pixel bound of the Qwen2.5-VL processor's ``smart_resize`` (12,845,056)."""

RESAMPLING = "LANCZOS"
"""Pillow resampling filter (``PIL.Image.Resampling`` member) used to scale screenshots.

Lanczos keeps thin CAD lines and small toolbar glyphs sharper than bilinear when shrinking.
"""


@dataclass(frozen=True, slots=True)
class ScreenGeometry:
    """The live desktop size and the size of the screenshot the model is shown.

    ``shown == desktop`` is the identity geometry: every mapping returns its input and
    :func:`scale_png` returns the bytes untouched.
    """

    desktop: DisplaySize
    shown: DisplaySize

    @classmethod
    def identity(cls, desktop: DisplaySize) -> ScreenGeometry:
        """The geometry of a model shown the full-resolution desktop."""
        return cls(desktop, desktop)

    @property
    def is_identity(self) -> bool:
        """Whether the model sees the desktop at its own size."""
        return self.shown == self.desktop

    @classmethod
    def fit(
        cls,
        desktop: DisplaySize,
        *,
        max_long_edge: int | None = None,
        max_short_edge: int | None = None,
        max_pixels: int | None = None,
        max_width: int | None = None,
        max_height: int | None = None,
    ) -> ScreenGeometry:
        """The largest shown size with the desktop's aspect ratio within every given limit.

        The long edge is chosen (as large as possible, never above the desktop's) and the
        short edge is the nearest integer to the exact aspect ratio (half rounds up), at least
        1. Limits left ``None`` do not apply; with none binding, the geometry is the identity.
        Raises ``ValueError`` for a limit below 1.
        """
        limits = (max_long_edge, max_short_edge, max_pixels, max_width, max_height)
        if any(limit is not None and limit < 1 for limit in limits):
            raise ValueError(f"image size limits must be at least 1, got {limits}")
        landscape = desktop.width >= desktop.height
        long_side = desktop.width if landscape else desktop.height
        short_side = desktop.height if landscape else desktop.width

        def size(long_edge: int) -> DisplaySize:
            short_edge = max(1, _round_half_up(Fraction(long_edge * short_side, long_side)))
            if landscape:
                return DisplaySize(width=long_edge, height=short_edge)
            return DisplaySize(width=short_edge, height=long_edge)

        def within(candidate: DisplaySize) -> bool:
            long_edge = max(candidate.width, candidate.height)
            short_edge = min(candidate.width, candidate.height)
            return (
                (max_long_edge is None or long_edge <= max_long_edge)
                and (max_short_edge is None or short_edge <= max_short_edge)
                and (max_pixels is None or candidate.width * candidate.height <= max_pixels)
                and (max_width is None or candidate.width <= max_width)
                and (max_height is None or candidate.height <= max_height)
            )

        # Binary search on the long edge: ``within(size(n))`` is monotone in n because both
        # edges grow (weakly) with n.
        low, high = 1, long_side
        if within(size(high)):
            return cls(desktop, desktop)
        while low < high:
            middle = (low + high + 1) // 2
            if within(size(middle)):
                low = middle
            else:
                high = middle - 1
        return cls(desktop, size(low))

    @classmethod
    def smart_resize(
        cls,
        desktop: DisplaySize,
        *,
        factor: int = QWEN25_VL_FACTOR,
        min_pixels: int = QWEN_MIN_PIXELS,
        max_pixels: int = QWEN_MAX_PIXELS,
    ) -> ScreenGeometry:
        """The frame a Qwen-VL-family model answers in after its server resized the image.

        vLLM/SGLang resize every image with the model's own processor (sides rounded to a
        multiple of ``factor``, pixel count kept within bounds), so the model's "resized"
        coordinates refer to that frame even when the full desktop was sent: 1920x1080 with
        factor 28 becomes 1932x1092. Raises ``ValueError`` for an aspect ratio above 200.
        """
        width, height = desktop.width, desktop.height
        if max(width, height) > 200 * min(width, height):
            raise ValueError(f"aspect ratio of {width}x{height} exceeds 200")
        new_w = max(factor, _round_half_even(Fraction(width, factor)) * factor)
        new_h = max(factor, _round_half_even(Fraction(height, factor)) * factor)
        if new_w * new_h > max_pixels:
            beta = math.sqrt(width * height / max_pixels)
            new_w = max(factor, math.floor(width / beta / factor) * factor)
            new_h = max(factor, math.floor(height / beta / factor) * factor)
        elif new_w * new_h < min_pixels:
            beta = math.sqrt(min_pixels / (width * height))
            new_w = math.ceil(width * beta / factor) * factor
            new_h = math.ceil(height * beta / factor) * factor
        return cls(desktop, DisplaySize(width=new_w, height=new_h))

    def to_desktop(self, x: float, y: float) -> tuple[int, int]:
        """The desktop pixel under shown-image pixel ``(x, y)`` (pixel-centre rule, clamped).

        Fractional inputs are allowed (a pixel index plus a fraction). Raises ``ValueError``
        for a non-finite coordinate.
        """
        return (
            _map_axis(x, self.shown.width, self.desktop.width),
            _map_axis(y, self.shown.height, self.desktop.height),
        )

    def to_shown(self, x: float, y: float) -> tuple[int, int]:
        """The shown-image pixel over desktop pixel ``(x, y)``: the inverse rule, clamped."""
        return (
            _map_axis(x, self.desktop.width, self.shown.width),
            _map_axis(y, self.desktop.height, self.shown.height),
        )

    def from_normalized(self, x: float, y: float, scale: int = 1000) -> tuple[int, int]:
        """The desktop pixel at relative position ``(x / scale, y / scale)``.

        ``floor(x * W / scale)`` clamped to ``[0, W - 1]``: 0 is the first pixel, ``scale``
        (the far edge) the last, ``scale / 2`` the centre pixel ``W // 2``. Raises
        ``ValueError`` for a non-finite coordinate or a scale below 1.
        """
        if scale < 1:
            raise ValueError(f"normalization scale must be at least 1, got {scale}")
        return (
            _clamp(math.floor(_exact(x) * self.desktop.width / scale), self.desktop.width),
            _clamp(math.floor(_exact(y) * self.desktop.height / scale), self.desktop.height),
        )


def scale_png(data: bytes, geometry: ScreenGeometry) -> bytes:
    """The PNG ``data`` (a desktop screenshot) scaled to ``geometry.shown`` with Lanczos.

    The identity geometry returns ``data`` itself without decoding it (Pillow not needed).
    Raises :class:`~autocad_bench.errors.MissingExtraError` when Pillow is missing (the
    ``openweight`` and ``anthropic`` distributions bring it), ``ValueError`` when the image
    is not ``geometry.desktop`` sized, and Pillow's own errors for bytes that are not an image.
    """
    if geometry.is_identity:
        return data
    try:
        from PIL import Image
    except ImportError:
        raise MissingExtraError("Pillow (for scaling screenshots to the model's screen size)", "openweight") from None
    with Image.open(io.BytesIO(data)) as image:
        if image.size != (geometry.desktop.width, geometry.desktop.height):
            raise ValueError(
                f"screenshot is {image.size[0]}x{image.size[1]}, expected the desktop size "
                f"{geometry.desktop.width}x{geometry.desktop.height}"
            )
        scaled = image.resize(
            (geometry.shown.width, geometry.shown.height), getattr(Image.Resampling, RESAMPLING)
        )
        buffer = io.BytesIO()
        scaled.save(buffer, format="PNG")
    return buffer.getvalue()


def _exact(value: float) -> Fraction:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"coordinate must be finite, got {value!r}")
    return Fraction(value)


def _map_axis(value: float, source: int, target: int) -> int:
    return _clamp(math.floor((_exact(value) + Fraction(1, 2)) * target / source), target)


def _clamp(value: int, size: int) -> int:
    return min(max(value, 0), size - 1)


def _round_half_up(value: Fraction) -> int:
    return math.floor(value + Fraction(1, 2))


def _round_half_even(value: Fraction) -> int:
    # Python's round() on a Fraction is exact and rounds halves to even, as the reference
    # processor's round() on floats does.
    return round(value)
