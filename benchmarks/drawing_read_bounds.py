"""Time and peak memory of reading pathological DXF files, each in a fresh process.

    uv run python benchmarks/drawing_read_bounds.py [--repeat N] [--cases a,b,...] [--keep]
        [--max-tags N] [--max-entities N] [--max-text-chars N] [--max-spline-points N]
        [--child-timeout S]

The claim tested: ``read_drawing`` scores or rejects any input under the size cap within about
``ReadLimits.max_seconds`` and in bounded memory. Its bounds: tag, record and entity counts
enforced while ezdxf parses and while entities are extracted; per-entity bounds checked before
ezdxf works on an entity (``max_text_chars`` on one TEXT, ATTRIB or MTEXT value or dimension
text, ``max_spline_points`` on one SPLINE or hatch spline edge; a larger entity is skipped as
unreadable); and a wall-clock deadline checked every 4,096 tags of the parse and at every entity
of the extraction. The deadline cannot interrupt ezdxf between two checks, so what is measured
is how far past ``max_seconds`` a read runs and how much memory it takes. The read is the
in-process one (``read_drawing`` without ``isolated``): the reader's own bounds, without the
isolated read's address-space cap and wall-clock kill that back them up on the evaluation path.
Three groups of inputs are built in a temporary directory:

* cases: a shipped gold drawing and the largest real-world corpus file as baselines; bare
  POINTs filling the size cap; files just under the tag, record and entity caps; one LWPOLYLINE
  as long as the tag cap allows; nested block references; one TEXT or MTEXT value filling the
  size cap (far over ``max_text_chars``: parsed, then skipped); CRLF line ends; a sparse file
  over the size cap; a strict-parse failure that makes the reader parse a second time in
  ezdxf's recover mode; comment lines, which never reach the tag count.
* sweeps: one entity whose cost in ezdxf grows with its size, faster than linearly for some (a
  TEXT value, MTEXT ``\\C1;`` inline commands, SPLINE fit points, SPLINE control points, one
  HATCH spline edge of fit or of control points), at a quarter, half and exactly its per-entity
  cap, the largest single entity the reader lets ezdxf work on, and at cap + 1, which must be
  skipped as unreadable.
* floods: as many entities, each exactly at its per-entity cap, as fit under the size, tag and
  entity caps (whichever binds first). Their total cost is the count times the cost of one, and
  only the deadline bounds it: each must end valid, or ``time-limit`` at about ``max_seconds``.
  The count times the sweep's cost of one entity at the cap is shown next to the measured time.
  Two floods put their spline edges, each at the cap, into one boundary path of one HATCH: the
  per-entity bound applies to each edge, not to their number, and the deadline is checked only
  between boundary paths, so these test whether one entity can outrun the deadline.

Each input is read in a fresh child process: the child imports the evaluator, reads a small$
warm-up drawing (so ezdxf's lazy imports are not charged to the first case), then times
``read_drawing`` and reports its peak RSS (``VmHWM``) before and after the read, the outcome,
what was extracted or skipped as unreadable and, through wrappers around the reader's private
``_load`` and ``_recover`` steps, how the time splits into normalising the bytes, ezdxf's parse
and the extraction, and whether the recover pass ran. A child still running after
``--child-timeout`` seconds (default three times ``max_seconds``) is killed and reported as such.
Every input is read ``--repeat`` times; medians are printed, with the time ratio against the
gold baseline of the same run, and at the end every read that took longer than ``max_seconds``
plus 1 s or peaked above 600 MiB RSS. Times are wall-clock: on a small or shared machine other
jobs add noise, so a read a few tenths of a second past the deadline is within it.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from _common import table  # type: ignore[import-not-found]  # noqa: E402

GOLD_CACHE = REPO / "evaluator" / "src" / "autocad_bench_evaluator" / "gold-cache"
GOLD_TASK = "part-flange-bolt-circle"
CORPUS = REPO / "tests" / "evaluator" / "corpus" / "files"
MIB = 1024 * 1024
FILL_MIB = 31.5
"""Size the size-cap cases fill (the cap is ``ReadLimits.max_bytes``, 32 MiB)."""
MARGIN = 16
"""Tags (or records) left free below a cap by the inputs meant to stay just under it."""
SIZE_MARGIN = 64 * 1024
"""Bytes the floods leave free below the size cap."""
SLACK_SECONDS = 1.0
"""A read longer than ``max_seconds`` plus this is listed as over the time bound."""
RSS_BUDGET_MIB = 600.0
"""A read whose child peaks above this RSS is listed as over the memory budget."""


# --- building the inputs ----------------------------------------------------------------


@dataclass(frozen=True)
class Caps:
    """The limits the inputs are sized against (those the child reads with)."""

    max_bytes: int
    max_tags: int
    max_entities: int
    max_seconds: float
    max_text_chars: int
    max_spline_points: int
    max_block_depth: int


@dataclass(frozen=True)
class Case:
    name: str
    what: str
    build: Callable[[Path, Caps], Path]
    over_size_cap: bool = False


@dataclass(frozen=True)
class Sweep:
    """One entity at sizes up to its per-entity cap and one past it."""

    name: str
    what: str
    kind: str
    """The DXF type of the entity (as ``ReadingReport.unreadable`` counts it)."""
    unit: str
    cap_field: str
    """The ``ReadLimits`` field that bounds the entity's size."""
    build: Callable[[Path, Caps, int], Path]
    minimum: int = 1

    def cap(self, caps: Caps) -> int:
        value: int = getattr(caps, self.cap_field)
        return value

    def sizes(self, caps: Caps) -> list[int]:
        """A quarter, half and all of the cap, and cap + 1 (which must be skipped)."""
        cap = self.cap(caps)
        return sorted({max(self.minimum, size) for size in (cap // 4, cap // 2, cap, cap + 1)})


@dataclass(frozen=True)
class Flood:
    """As many entities at the per-entity cap as fit under the whole-file caps."""

    name: str
    what: str
    kind: str
    sweep: str
    """The sweep whose read at the cap gives the cost of one entity."""
    make: Callable[[Caps, int], bytes]
    """The file's bytes with ``n`` such entities."""
    unit: str = "entities"


R12_HEAD = "  0\nSECTION\n  2\nENTITIES\n"
R12_TAIL = "  0\nENDSEC\n  0\nEOF\n"
POINT = "  0\nPOINT\n  8\n0\n 10\n{x}\n 20\n{y}\n 30\n0.0\n"
DENSE_POINT = (
    "  0\nPOINT\n  8\n0\n  6\nBYLAYER\n 62\n1\n 39\n0.0\n 10\n{x}\n 20\n{y}\n 30\n0.0\n"
    "210\n0.0\n220\n0.0\n230\n1.0\n 50\n0.0\n"
)
DENSE_POINT_TAGS = 12
LINE = "  0\nLINE\n  8\n0\n 10\n{x}\n 20\n{y}\n 30\n0.0\n 11\n{y}\n 21\n{x}\n 31\n0.0\n"
TEXT = "  0\nTEXT\n  8\n0\n 10\n0.0\n 20\n0.0\n 30\n0.0\n 40\n2.5\n  1\n"
PLACEHOLDER = "BENCHMARK-PLACEHOLDER-TEXT"
R2000_FRAME = 16_000
"""Bytes an empty R2000 drawing written by ezdxf takes (header, tables, objects), rounded up."""


def _xy(i: int) -> dict[str, str]:
    """Fixed-width coordinates, so every record of a kind has the same length."""
    return {"x": f"{i % 100000:05d}.5", "y": f"{i // 100000:03d}.25"}


def records(template: str, n: int) -> Iterator[str]:
    for base in range(0, n, 20_000):
        yield "".join(template.format(**_xy(i)) for i in range(base, min(n, base + 20_000)))


def write_r12(path: Path, body: Iterable[str], *, newline: str = "\n", endsec: bool = True) -> Path:
    """A minimal R12 DXF: an ENTITIES section and EOF (no header, tables or blocks)."""
    with path.open("w", encoding="ascii", newline=newline) as out:
        out.write(R12_HEAD)
        for chunk in body:
            out.write(chunk)
        out.write(R12_TAIL if endsec else "  0\nEOF\n")
    return path


def fill_count(per_record: int, overhead: int, budget: int) -> int:
    return (budget - overhead) // per_record


def census(data: bytes) -> tuple[int, int]:
    """(tags, records) as the reader's census counts them: 999 comments are not tags."""
    codes = [line.strip() for line in data.split(b"\n")[0::2]]
    tags = sum(1 for code in codes if code and code != b"999")
    return tags, codes.count(b"0")


def count_tags(path: Path) -> tuple[int, int]:
    tags = records_ = 0
    with path.open("rb") as lines:
        for line in lines:
            code = line.strip()
            lines.readline()
            if code and code != b"999":
                tags += 1
                records_ += code == b"0"
    return tags, records_


def ezdxf_bytes(build: Callable[[Any], None]) -> bytes:
    """An R2000 drawing made by ezdxf, ``build`` filling its model space, as file bytes."""
    from ezdxf.filemanagement import new

    doc = new("R2000")
    build(doc)
    stream = io.StringIO()
    doc.write(stream)
    return stream.getvalue().encode("ascii")


def build_gold(work: Path, caps: Caps) -> Path:
    def version_key(path: Path) -> tuple[int, ...]:
        return tuple(int(part) if part.isdigit() else -1 for part in path.name.split("."))

    versions = sorted((p for p in GOLD_CACHE.iterdir() if p.is_dir()), key=version_key)
    for version in reversed(versions):
        gold = version / GOLD_TASK / "gold.dxf"
        if gold.is_file():
            return gold
    return next(GOLD_CACHE.glob("*/*/gold.dxf"))


def build_corpus(work: Path, caps: Caps) -> Path:
    return max((p for p in CORPUS.iterdir() if p.suffix.lower() == ".dxf"), key=lambda p: p.stat().st_size)


def build_points_fill(work: Path, caps: Caps) -> Path:
    n = fill_count(len(POINT.format(**_xy(0))), len(R12_HEAD + R12_TAIL), int(FILL_MIB * MIB))
    return write_r12(work / "points-31mib.dxf", records(POINT, n))


def build_dense_points_fill(work: Path, caps: Caps) -> Path:
    n = fill_count(len(DENSE_POINT.format(**_xy(0))), len(R12_HEAD + R12_TAIL), int(FILL_MIB * MIB))
    return write_r12(work / "points-12-tags-31mib.dxf", records(DENSE_POINT, n))


def points_under_caps(caps: Caps, tags_each: int, records_left: int = 3) -> int:
    """POINTs of ``tags_each`` tags that stay MARGIN under the tag cap (4 tags for SECTION,
    ENTITIES, ENDSEC and EOF) and MARGIN under the record cap (``records_left`` records besides
    the POINTs)."""
    return min((caps.max_tags - MARGIN - 4) // tags_each, caps.max_entities - MARGIN - records_left)


def build_points_tag_cap(work: Path, caps: Caps) -> Path:
    # 12-tag POINTs: with the default caps, 5-tag POINTs would reach max_entities records first
    n = points_under_caps(caps, DENSE_POINT_TAGS)
    return write_r12(work / "points-under-tag-cap.dxf", records(DENSE_POINT, n))


def build_points_tag_cap_crlf(work: Path, caps: Caps) -> Path:
    n = points_under_caps(caps, DENSE_POINT_TAGS)
    return write_r12(work / "points-under-tag-cap-crlf.dxf", records(DENSE_POINT, n), newline="\r\n")


def build_points_record_cap(work: Path, caps: Caps) -> Path:
    return write_r12(work / "points-under-record-cap.dxf", records(POINT, points_under_caps(caps, 5)))


def build_points_no_endsec(work: Path, caps: Caps) -> Path:
    n = points_under_caps(caps, 5, records_left=2)
    return write_r12(work / "points-no-endsec.dxf", records(POINT, n), endsec=False)


def build_lines(work: Path, caps: Caps) -> Path:
    return write_r12(work / "lines-under-caps.dxf", records(LINE, points_under_caps(caps, 8)))


def build_lwpolyline(work: Path, caps: Caps) -> Path:
    # ezdxf's add_lwpolyline slows down badly past ~10,000 vertices, so ezdxf writes a
    # two-vertex LWPOLYLINE and its vertex tags are replaced here.
    two = "\n 90\n2\n 70\n0\n 10\n777001.5\n 20\n0.25\n 10\n777002.5\n 20\n0.25\n"

    def fill(doc: Any) -> None:
        doc.modelspace().add_lwpolyline([(777001.5, 0.25), (777002.5, 0.25)], format="xy")

    frame = ezdxf_bytes(fill).decode("ascii")
    if frame.count(two) != 1:
        raise RuntimeError("ezdxf did not write the LWPOLYLINE as expected")
    frame_tags = census(frame.encode("ascii"))[0] - 4
    n = (caps.max_tags - MARGIN - frame_tags) // 2
    head, tail = frame.split(two)
    path = work / "lwpolyline-under-tag-cap.dxf"
    with path.open("w", encoding="ascii", newline="\n") as out:
        out.write(f"{head}\n 90\n{n}\n 70\n0\n")
        for base in range(0, n, 20_000):
            xy = (_xy(i) for i in range(base, min(n, base + 20_000)))
            out.write("".join(f" 10\n{c['x']}\n 20\n{c['y']}\n" for c in xy))
        out.write(tail)
    return path


def nested_blocks(work: Path, name: str, fan: int, levels: int) -> Path:
    """Block B0 holds ``fan`` LINEs, each B(k) ``fan`` INSERTs of B(k-1) up to B(levels-1);
    model space holds one INSERT of the top block: fan**levels LINEs once exploded."""

    def fill(doc: Any) -> None:
        block = doc.blocks.new("B0")
        for i in range(fan):
            block.add_line((i, 0), (i, 1))
        for level in range(1, levels):
            block = doc.blocks.new(f"B{level}")
            for i in range(fan):
                block.add_blockref(f"B{level - 1}", (i * fan**level, level))
        doc.modelspace().add_blockref(f"B{levels - 1}", (0, 0))

    path = work / f"{name}.dxf"
    path.write_bytes(ezdxf_bytes(fill))
    return path


def build_nested_over(work: Path, caps: Caps) -> Path:
    # The top block's contents sit at depth 1, B0's LINEs at depth max_block_depth: all of it
    # is within the depth limit and explodes to 10**depth LINEs.
    return nested_blocks(work, "nested-blocks-10x8", 10, caps.max_block_depth)


def exploded_records(fan: int, levels: int) -> int:
    """Entity records extraction makes: the model INSERT and every exploded INSERT and LINE,
    plus the block definitions' own entities."""
    return sum(int(fan**k) for k in range(levels + 1)) + levels * fan


def build_nested_under(work: Path, caps: Caps) -> Path:
    levels = 5
    fan = 2
    while exploded_records(fan + 1, levels) <= caps.max_entities - MARGIN:
        fan += 1
    return nested_blocks(work, f"nested-blocks-{fan}x{levels}", fan, levels)


def text_fill(unit: str, overhead: int) -> str:
    """``unit`` repeated to fill the size-cap cases' size, less ``overhead`` bytes."""
    return unit * ((int(FILL_MIB * MIB) - overhead) // len(unit))


def words(size: int) -> str:
    """Exactly ``size`` characters of words, not ending in a space (a reader might strip it)."""
    value = ("lorem ipsum dolor sit amet " * (size // 27 + 1))[:size]
    return value[:-1] + "x" if value.endswith(" ") else value


def build_text(work: Path, caps: Caps, size: int) -> Path:
    return write_r12(work / f"text-{size}.dxf", [TEXT, words(size), "\n"])


def text_full(caps: Caps) -> int:
    return min(caps.max_bytes, int(FILL_MIB * MIB)) - len(R12_HEAD + R12_TAIL + TEXT) - 1


def mtext_file(path: Path, value: str) -> Path:
    """An R2000 drawing with one MTEXT whose text is ``value``, as one group-code 1 line."""

    def fill(doc: Any) -> None:
        doc.modelspace().add_mtext(PLACEHOLDER)

    data = ezdxf_bytes(fill).decode("ascii")
    if data.count(f"\n{PLACEHOLDER}\n") != 1:
        raise RuntimeError("ezdxf did not write the MTEXT placeholder as one line")
    path.write_text(data.replace(PLACEHOLDER, value), encoding="ascii", newline="")
    return path


def build_huge_mtext(work: Path, caps: Caps) -> Path:
    value = text_fill("lorem ipsum dolor sit amet\\P", R2000_FRAME)
    return mtext_file(work / "mtext-31mib.dxf", value)


def build_escaped_mtext(work: Path, caps: Caps) -> Path:
    # The reader resolves the escapes in the whole text before ezdxf parses it (one regular-
    # expression callback each); the MTEXT itself is then far over max_text_chars and skipped.
    return mtext_file(work / "mtext-escapes-31mib.dxf", text_fill("\\U+00E9", R2000_FRAME))


def build_comments(work: Path, caps: Caps) -> Path:
    comment = "999\n" + "c" * 76 + "\n"
    n = fill_count(len(comment), len(R12_HEAD + R12_TAIL) + len(POINT.format(**_xy(0))), int(FILL_MIB * MIB))
    body = [POINT.format(**_xy(0)), *(comment * 10_000 for _ in range(n // 10_000))]
    return write_r12(work / "comments-31mib.dxf", body)


def build_sparse(work: Path, caps: Caps) -> Path:
    path = work / "sparse-200mib.dxf"
    with path.open("wb") as out:
        out.truncate(200 * MIB)
    return path


def mtext_commands(size: int) -> str:
    """Exactly ``size`` characters: ``\\C1;`` colour commands, padded with plain characters."""
    return "\\C1;" * (size // 4) + "x" * (size % 4)


def build_mtext_commands(work: Path, caps: Caps, size: int) -> Path:
    return mtext_file(work / f"mtext-commands-{size}.dxf", mtext_commands(size))


def spline_points(n: int) -> list[tuple[float, float, float]]:
    return [(i, (i * 7) % 13, 0) for i in range(n)]


def add_spline(msp: Any, points: list[tuple[float, float, float]], fit: bool) -> None:
    if fit:
        msp.add_spline(fit_points=points)  # ezdxf writes the fit points only, no control points
    else:
        msp.add_open_spline(points, degree=3)


def spline_bytes(n: int, fit: bool) -> bytes:
    return ezdxf_bytes(lambda doc: add_spline(doc.modelspace(), spline_points(n), fit))


def build_spline(work: Path, caps: Caps, size: int, fit: bool) -> Path:
    path = work / f"spline-{'fit' if fit else 'control'}-{size}.dxf"
    path.write_bytes(spline_bytes(size, fit))
    return path


def hatch_bytes(edges: int, points: int, fit: bool) -> bytes:
    """An R2000 drawing with one HATCH whose one boundary path is ``edges`` spline edges of
    ``points`` fit points (ezdxf writes no control points then) or control points each, end to
    end, closed by a line."""

    def fill(doc: Any) -> None:
        path = doc.modelspace().add_hatch().paths.add_edge_path()
        x = 0
        for _ in range(edges):
            along = [(x + i, (i * 7) % 13) for i in range(points)]
            if fit:
                path.add_spline(fit_points=along, degree=3)
            else:
                path.add_spline(control_points=along, degree=3)
            x += points - 1
        path.add_line((x, 0), (0, 0))

    return ezdxf_bytes(fill)


def build_hatch(work: Path, caps: Caps, size: int, fit: bool) -> Path:
    path = work / f"hatch-{'fit' if fit else 'control'}-edge-{size}.dxf"
    path.write_bytes(hatch_bytes(1, size, fit))
    return path


def mtext_flood(caps: Caps, n: int) -> bytes:
    value = mtext_commands(caps.max_text_chars)

    def fill(doc: Any) -> None:
        msp = doc.modelspace()
        for i in range(n):
            msp.add_mtext(value, dxfattribs={"insert": (i, 0)})

    return ezdxf_bytes(fill)


def spline_flood(caps: Caps, n: int, fit: bool) -> bytes:
    points = spline_points(caps.max_spline_points)

    def fill(doc: Any) -> None:
        msp = doc.modelspace()
        for _ in range(n):
            add_spline(msp, points, fit)

    return ezdxf_bytes(fill)


def text_flood(caps: Caps, n: int) -> bytes:
    one = f"{TEXT}{words(caps.max_text_chars)}\n"
    return (R12_HEAD + one * n + R12_TAIL).encode("ascii")


def flood_count(make: Callable[[int], bytes], caps: Caps) -> tuple[int, str]:
    """The largest count for ``make`` under the size, tag and record caps, and which binds.
    Bytes, tags and records grow linearly with the count; two small probes give the slopes.
    (Each entity is also one extracted entity, fewer than the records.)"""
    low, high = 1, 3
    small, large = make(low), make(high)
    measured = [(len(small), len(large)), *zip(census(small), census(large), strict=True)]
    budgets = {
        "size cap": caps.max_bytes - SIZE_MARGIN,
        "tag cap": caps.max_tags - MARGIN,
        "entity cap": caps.max_entities - MARGIN,
    }
    counts: dict[str, int] = {}
    for (name, budget), (at_low, at_high) in zip(budgets.items(), measured, strict=True):
        per = (at_high - at_low) / (high - low)
        if per > 0:  # the edges of one HATCH add no records
            counts[name] = int((budget - (at_low - low * per)) // per)
    binding = min(counts, key=lambda name: counts[name])
    return counts[binding], binding


CASES: list[Case] = [
    Case("baseline-gold", f"shipped gold drawing ({GOLD_TASK}, newest gold cache)", build_gold),
    Case("corpus-largest", "largest file of the real-world corpus", build_corpus),
    Case("points-31mib", f"bare R12 POINTs filling {FILL_MIB} MiB (over the caps)", build_points_fill),
    Case(
        "points-12-tags-31mib",
        f"POINTs with 12 tags each filling {FILL_MIB} MiB (over the caps)",
        build_dense_points_fill,
    ),
    Case("points-under-tag-cap", "12-tag POINTs just under max_tags", build_points_tag_cap),
    Case("points-under-tag-cap-crlf", "the same with CRLF line ends", build_points_tag_cap_crlf),
    Case("points-under-record-cap", "5-tag POINTs just under max_entities records", build_points_record_cap),
    Case(
        "points-no-endsec", "the same without ENDSEC: strict parse fails, recover parses again", build_points_no_endsec
    ),
    Case("lines-under-caps", "LINEs just under max_tags (and max_entities)", build_lines),
    Case("lwpolyline-under-tag-cap", "one R2000 LWPOLYLINE with as many vertices as max_tags allows", build_lwpolyline),
    Case("nested-blocks-over", "blocks nested to max_block_depth, 10 references each", build_nested_over),
    Case("nested-blocks-under", "5 nested levels, the widest fan-out under max_entities", build_nested_under),
    Case(
        "text-31mib",
        f"one R12 TEXT value of {FILL_MIB} MiB (over max_text_chars)",
        lambda work, caps: build_text(work, caps, text_full(caps)),
    ),
    Case("mtext-31mib", "one MTEXT value of words and \\P paragraph breaks (over max_text_chars)", build_huge_mtext),
    Case("mtext-escapes-31mib", "one MTEXT value of \\U+00E9 escapes (over max_text_chars)", build_escaped_mtext),
    Case("comments-31mib", "one POINT and 999 comment lines (never counted as tags)", build_comments),
    Case("sparse-200mib", "sparse file over the size cap", build_sparse, over_size_cap=True),
]

SWEEPS: list[Sweep] = [
    Sweep("text-value", "one R12 TEXT value of words", "TEXT", "chars", "max_text_chars", build_text),
    Sweep(
        "mtext-commands",
        "one MTEXT value of \\C1; inline commands",
        "MTEXT",
        "chars",
        "max_text_chars",
        build_mtext_commands,
    ),
    Sweep(
        "spline-fit-points",
        "one SPLINE defined by fit points only",
        "SPLINE",
        "points",
        "max_spline_points",
        lambda work, caps, n: build_spline(work, caps, n, True),
        minimum=4,
    ),
    Sweep(
        "spline-control-points",
        "one SPLINE of control points (degree 3)",
        "SPLINE",
        "points",
        "max_spline_points",
        lambda work, caps, n: build_spline(work, caps, n, False),
        minimum=4,
    ),
    Sweep(
        "hatch-fit-edge",
        "one HATCH bounded by one spline edge of fit points only and a line",
        "HATCH",
        "points",
        "max_spline_points",
        lambda work, caps, n: build_hatch(work, caps, n, True),
        minimum=4,
    ),
    Sweep(
        "hatch-control-edge",
        "one HATCH bounded by one spline edge of control points (degree 3) and a line",
        "HATCH",
        "points",
        "max_spline_points",
        lambda work, caps, n: build_hatch(work, caps, n, False),
        minimum=4,
    ),
]

FLOODS: list[Flood] = [
    Flood(
        "flood-mtext-commands", "MTEXTs of \\C1; commands, each max_text_chars", "MTEXT", "mtext-commands", mtext_flood
    ),
    Flood(
        "flood-spline-fit-points",
        "SPLINEs of max_spline_points fit points each",
        "SPLINE",
        "spline-fit-points",
        lambda caps, n: spline_flood(caps, n, True),
    ),
    Flood(
        "flood-spline-control-points",
        "SPLINEs of max_spline_points control points each",
        "SPLINE",
        "spline-control-points",
        lambda caps, n: spline_flood(caps, n, False),
    ),
    Flood("flood-text-value", "R12 TEXTs of words, each max_text_chars", "TEXT", "text-value", text_flood),
    Flood(
        "flood-hatch-fit-edges",
        "spline edges of max_spline_points fit points each, all in one boundary path of one HATCH",
        "HATCH",
        "hatch-fit-edge",
        lambda caps, n: hatch_bytes(n, caps.max_spline_points, True),
        unit="edges, 1 HATCH",
    ),
    Flood(
        "flood-hatch-control-edges",
        "spline edges of max_spline_points control points each, all in one boundary path of one HATCH",
        "HATCH",
        "hatch-control-edge",
        lambda caps, n: hatch_bytes(n, caps.max_spline_points, False),
        unit="edges, 1 HATCH",
    ),
]


def build_warmup(work: Path) -> Path:
    def fill(doc: Any) -> None:
        msp = doc.modelspace()
        block = doc.blocks.new("W")
        block.add_circle((0, 0), 1)
        msp.add_line((0, 0), (1, 1))
        msp.add_lwpolyline([(0, 0), (1, 0), (1, 1)])
        msp.add_text("warm")
        msp.add_mtext("warm\\Pup")
        msp.add_open_spline([(0, 0), (1, 1), (2, 0), (3, 1)])
        msp.add_blockref("W", (5, 5))

    path = work / "warmup.dxf"
    path.write_bytes(ezdxf_bytes(fill))
    return path


# --- the child: one read in a fresh process ---------------------------------------------


def peak_rss_mib() -> float:
    """This process's peak RSS (``VmHWM``). Not ``ru_maxrss``: Linux carries that over from
    the parent across fork and exec, so a child would report the parent's peak."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def child(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    from autocad_bench_evaluator import dxf_reader
    from autocad_bench_evaluator.metadata import DrawingMetadata, ReadLimits, read_drawing

    import_seconds = time.perf_counter() - started
    rss_import = peak_rss_mib()
    read_drawing(Path(args.warmup), 3)
    rss_ready = peak_rss_mib()

    # Instrumentation only: note when ezdxf's load starts and ends and whether the recover
    # pass runs. The wrappers call the reader's own functions unchanged.
    marks: dict[str, float] = {}
    load, recover = dxf_reader._load, dxf_reader._recover

    def timed_load(*a: Any, **k: Any) -> Any:
        marks["load_start"] = time.perf_counter()
        try:
            return load(*a, **k)
        finally:
            marks["load_end"] = time.perf_counter()

    def noted_recover(*a: Any, **k: Any) -> Any:
        marks["recover"] = time.perf_counter()
        return recover(*a, **k)

    setattr(dxf_reader, "_load", timed_load)  # noqa: B010
    setattr(dxf_reader, "_recover", noted_recover)  # noqa: B010

    limits = ReadLimits(
        max_tags=args.max_tags,
        max_entities=args.max_entities,
        max_text_chars=args.max_text_chars,
        max_spline_points=args.max_spline_points,
    )
    start = time.perf_counter()
    result = read_drawing(Path(args.child), 3, limits=limits)
    end = time.perf_counter()
    out: dict[str, Any] = {
        "import_seconds": import_seconds,
        "rss_import": rss_import,
        "rss_before": rss_ready,
        "rss_after": peak_rss_mib(),
        "seconds": end - start,
        "normalise": marks["load_start"] - start if "load_start" in marks else None,
        "parse": marks["load_end"] - marks["load_start"] if "load_end" in marks else None,
        "extract": end - marks["load_end"] if "load_end" in marks else None,
        "recover": "recover" in marks,
    }
    if isinstance(result, DrawingMetadata):
        reading = result.reading
        if reading is None:
            out.update(outcome="valid", reason="no reading report")
        else:
            reason = f"{reading.entities_extracted} of {reading.entities_declared} declared entities extracted"
            if reading.unreadable:
                reason += ", unreadable: " + ", ".join(f"{n} {kind}" for kind, n in reading.unreadable.items())
            out.update(
                outcome="valid",
                reason=reason,
                extracted=reading.entities_extracted,
                declared=reading.entities_declared,
                unreadable=reading.unreadable,
            )
    else:
        out.update(outcome=result.failure_class, reason=result.reason)
    print(json.dumps(out))
    return 0


# --- the parent -------------------------------------------------------------------------


@dataclass
class Row:
    name: str
    what: str
    path: Path
    size: int
    tags: int | None
    records: int | None
    over_size_cap: bool
    runs: list[dict[str, Any]]

    def median(self, key: str) -> float | None:
        values = [r[key] for r in self.runs if r.get(key) is not None]
        return statistics.median(values) if values else None

    def added(self) -> float | None:
        """Median peak RSS the read added on top of the warmed-up child."""
        values = [r["rss_after"] - r["rss_before"] for r in self.runs if r.get("rss_after") is not None]
        return statistics.median(values) if values else None

    @property
    def outcome(self) -> str:
        outcomes = sorted({str(r["outcome"]) for r in self.runs})
        return "/".join(outcomes)

    @property
    def killed(self) -> bool:
        return any(r["outcome"] in ("killed", "child-error") for r in self.runs)

    def fate(self, kind: str) -> str:
        """What became of the one ``kind`` entity of a sweep's file, over all repeats."""
        fates: set[str] = set()
        for run in self.runs:
            if run["outcome"] != "valid":
                fates.add(str(run["outcome"]))
            elif run.get("unreadable", {}).get(kind):
                fates.add("skipped as unreadable")
            elif run.get("extracted"):
                fates.add("read")
            else:
                fates.add("not extracted")
        return "/".join(sorted(fates))


def measure(path: Path, warmup: Path, caps: Caps, timeout: float) -> dict[str, Any]:
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        str(path),
        "--warmup",
        str(warmup),
        "--max-tags",
        str(caps.max_tags),
        "--max-entities",
        str(caps.max_entities),
        "--max-text-chars",
        str(caps.max_text_chars),
        "--max-spline-points",
        str(caps.max_spline_points),
    ]
    started = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        seconds = time.perf_counter() - started
        return {"outcome": "killed", "reason": f"no answer after {seconds:.0f} s (child killed)", "seconds": None}
    if done.returncode != 0 or not done.stdout.strip():
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"outcome": "child-error", "reason": tail[:200], "seconds": None}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run_case(name: str, what: str, path: Path, over: bool, warmup: Path, caps: Caps, args: argparse.Namespace) -> Row:
    size = path.stat().st_size
    tags = records_ = None
    if not over:
        tags, records_ = count_tags(path)
    runs = [measure(path, warmup, caps, args.child_timeout) for _ in range(args.repeat)]
    row = Row(name, what, path, size, tags, records_, over, runs)
    seconds = row.median("seconds")
    shown = f"{seconds:.2f} s" if seconds is not None else "-"
    print(f"  {name:<34} {size / MIB:8.2f} MiB  {row.outcome:<14} {shown}", file=sys.stderr, flush=True)
    return row


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main_table(rows: list[Row], baseline: float | None) -> str:
    header = [
        "case",
        "MiB",
        "tags",
        "records",
        "outcome",
        "s",
        "normalise s",
        "parse s",
        "extract s",
        "recover",
        "peak RSS MiB",
        "added by read MiB",
        "x baseline",
    ]
    out: list[list[object]] = []
    for row in rows:
        seconds = row.median("seconds")
        after = row.median("rss_after")
        ratio = f"{seconds / baseline:.0f}x" if seconds is not None and baseline else "-"
        if row.name == "baseline-gold":
            ratio = "1x"
        out.append(
            [
                row.name,
                f"{row.size / MIB:.2f}",
                "-" if row.tags is None else f"{row.tags:,}",
                "-" if row.records is None else f"{row.records:,}",
                row.outcome,
                fmt(seconds, 3 if seconds is not None and seconds < 1 else 2),
                fmt(row.median("normalise")),
                fmt(row.median("parse")),
                fmt(row.median("extract")),
                "yes" if any(r.get("recover") for r in row.runs) else "",
                fmt(after, 0),
                fmt(row.added(), 0),
                ratio,
            ]
        )
    text: str = table("Reading one drawing in a fresh process (median over repeats)", header, out)
    return text


def growth(points: list[tuple[int, float | None]]) -> float | None:
    """Exponent of a power law through the two largest sizes (the cap's half and the cap)."""
    usable = [(size, value) for size, value in points if value is not None and value > 0]
    if len(usable) < 2:
        return None
    (s1, v1), (s2, v2) = usable[-2], usable[-1]
    return math.log(v2 / v1) / math.log(s2 / s1) if s2 != s1 else None


def sweep_table(sweeps: list[tuple[Sweep, list[tuple[int, Row]]]], caps: Caps) -> str:
    out: list[list[object]] = []
    for sweep, measured in sweeps:
        cap = sweep.cap(caps)
        within = [(size, row) for size, row in measured if size <= cap]
        at_cap = next((row for size, row in measured if size == cap), None)
        past = next((row for size, row in measured if size > cap), None)
        out.append(
            [
                sweep.name,
                f"{sweep.cap_field}={cap:,} {sweep.unit}",
                "; ".join(
                    f"{size:,}: {fmt(row.median('seconds'), 3)} s (extract {fmt(row.median('extract'), 3)}), "
                    f"+{fmt(row.added(), 0)} MiB"
                    for size, row in within
                ),
                fmt(growth([(size, row.median("extract")) for size, row in within])),
                "-" if at_cap is None else at_cap.fate(sweep.kind),
                "-" if past is None else f"{past.fate(sweep.kind)} in {fmt(past.median('seconds'), 3)} s",
            ]
        )
    header = [
        "sweep",
        "per-entity cap",
        "size: median s (extract s), added RSS",
        "extract time exp. (half cap to cap)",
        "at the cap",
        "at cap + 1",
    ]
    title = "One entity up to its per-entity cap (the largest single entity ezdxf works on) and one past it"
    text: str = table(title, header, out)
    return text


def flood_table(floods: list[tuple[Flood, Row, int, str]], per_entity: dict[str, float | None], caps: Caps) -> str:
    out: list[list[object]] = []
    for flood, row, n, binding in floods:
        seconds = row.median("seconds")
        one = per_entity.get(flood.sweep)
        if row.killed:
            verdict = str(row.runs[0]["reason"])
        elif seconds is None:
            verdict = row.outcome
        elif row.outcome == "time-limit":
            verdict = f"stopped at max_seconds {seconds - caps.max_seconds:+.2f} s"
        else:
            verdict = f"{row.outcome} within {seconds:.1f} s" if seconds <= caps.max_seconds else row.outcome
        out.append(
            [
                flood.name,
                f"{n:,} {flood.unit}",
                binding,
                f"{row.size / MIB:.2f}",
                "-" if row.tags is None else f"{row.tags:,}",
                row.outcome,
                fmt(seconds),
                fmt(row.median("parse")),
                fmt(row.median("extract")),
                fmt(row.median("rss_after"), 0),
                fmt(one, 3),
                "-" if one is None else f"{n * one:,.0f} s",
                verdict,
            ]
        )
    header = [
        "flood",
        "count",
        "bound by",
        "MiB",
        "tags",
        "outcome",
        "s",
        "parse s",
        "extract s",
        "peak RSS MiB",
        "one at the cap (sweep): extract s",
        "count x one",
        "verdict",
    ]
    title = f"Many entities, each at its per-entity cap (must end valid, or time-limit at about {caps.max_seconds:g} s)"
    text: str = table(title, header, out)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="reads per case, each in a fresh process (median)")
    parser.add_argument("--cases", help="comma-separated case, sweep or flood names (baseline-gold always runs)")
    parser.add_argument("--keep", action="store_true", help="keep the generated files and print where")
    parser.add_argument("--max-tags", type=int, help="ReadLimits.max_tags for the reads and the inputs' sizes")
    parser.add_argument("--max-entities", type=int, help="ReadLimits.max_entities likewise")
    parser.add_argument("--max-text-chars", type=int, help="ReadLimits.max_text_chars likewise")
    parser.add_argument("--max-spline-points", type=int, help="ReadLimits.max_spline_points likewise")
    parser.add_argument("--child-timeout", type=float, help="seconds before a child is killed (3 x max_seconds)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--warmup", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)

    from importlib.metadata import version

    from autocad_bench_evaluator.metadata import ReadLimits

    defaults = ReadLimits()
    limits = ReadLimits(
        max_tags=args.max_tags or defaults.max_tags,
        max_entities=args.max_entities or defaults.max_entities,
        max_text_chars=args.max_text_chars or defaults.max_text_chars,
        max_spline_points=args.max_spline_points or defaults.max_spline_points,
    )
    caps = Caps(
        max_bytes=limits.max_bytes,
        max_tags=limits.max_tags,
        max_entities=limits.max_entities,
        max_seconds=limits.max_seconds,
        max_text_chars=limits.max_text_chars,
        max_spline_points=limits.max_spline_points,
        max_block_depth=limits.max_block_depth,
    )
    if args.child_timeout is None:
        args.child_timeout = 3 * limits.max_seconds
    names = {c.name for c in CASES} | {s.name for s in SWEEPS} | {f.name for f in FLOODS}
    wanted = set(args.cases.split(",")) if args.cases else names
    if unknown := wanted - names:
        parser.error(f"unknown cases {sorted(unknown)}; known: {', '.join(sorted(names))}")
    wanted.add("baseline-gold")

    work = Path(tempfile.mkdtemp(prefix="acb-read-bounds-"))
    started = time.perf_counter()
    try:
        warmup = build_warmup(work)
        rows: list[Row] = []
        print("reading (case, size, outcome, median time):", file=sys.stderr)
        for case in CASES:
            if case.name in wanted:
                path = case.build(work, caps)
                rows.append(run_case(case.name, case.what, path, case.over_size_cap, warmup, caps, args))
                if not args.keep and path.is_relative_to(work):
                    path.unlink()
        sweeps: list[tuple[Sweep, list[tuple[int, Row]]]] = []
        per_entity: dict[str, float | None] = {}
        for sweep in SWEEPS:
            if sweep.name not in wanted:
                continue
            measured: list[tuple[int, Row]] = []
            for size in sweep.sizes(caps):
                path = sweep.build(work, caps, size)
                row = run_case(f"{sweep.name} {size:,}", sweep.what, path, False, warmup, caps, args)
                measured.append((size, row))
                if size == sweep.cap(caps):
                    per_entity[sweep.name] = row.median("extract")
                if not args.keep:
                    path.unlink()
            rows.extend(row for _, row in measured)
            sweeps.append((sweep, measured))
        floods: list[tuple[Flood, Row, int, str]] = []
        for flood in FLOODS:
            if flood.name not in wanted:
                continue
            n, binding = flood_count(partial(flood.make, caps), caps)
            data = flood.make(caps, n)
            tags, records_ = census(data)
            if len(data) > caps.max_bytes or tags > caps.max_tags or records_ > caps.max_entities:
                raise RuntimeError(f"{flood.name}: {n} entities are over a cap; the count estimate is wrong")
            path = work / f"{flood.name}-{n}.dxf"
            path.write_bytes(data)
            del data
            what = f"{n:,} {flood.what} (as many as fit: {binding} binds)"
            row = run_case(flood.name, what, path, False, warmup, caps, args)
            rows.append(row)
            floods.append((flood, row, n, binding))
            if not args.keep:
                path.unlink()
        baseline_row = rows[0]
        baseline = baseline_row.median("seconds")
        print()
        print(main_table(rows, baseline))
        print()
        for row in rows:
            reasons = sorted({str(r.get("reason", "")) for r in row.runs})
            print(f"  {row.name}: {row.what}; {' / '.join(reasons)}")
        if sweeps:
            print()
            print(sweep_table(sweeps, caps))
        if floods:
            print()
            print(flood_table(floods, per_entity, caps))
        children = [r for row in rows for r in row.runs if "rss_import" in r]
        print()
        print(
            f"ReadLimits in force: max_bytes={limits.max_bytes:,} max_tags={limits.max_tags:,} "
            f"max_entities={limits.max_entities:,} max_seconds={limits.max_seconds:g} "
            f"max_text_chars={limits.max_text_chars:,} max_spline_points={limits.max_spline_points:,} "
            f"max_block_depth={limits.max_block_depth} max_curve_points={limits.max_curve_points}; "
            f"child timeout {args.child_timeout:g} s"
        )
        print(
            f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the end, "
            f"Python {platform.python_version()}, ezdxf {version('ezdxf')}, {platform.system()} {platform.machine()}"
        )
        if children:
            print(
                "child baseline: import of the evaluator "
                f"{statistics.median(r['import_seconds'] for r in children):.2f} s, "
                f"RSS after import {statistics.median(r['rss_import'] for r in children):.0f} MiB, "
                f"after the warm-up read {statistics.median(r['rss_before'] for r in children):.0f} MiB "
                "(the 'added by read' column is on top of this)"
            )
        under = [row for row in rows if not row.over_size_cap and row.median("seconds") is not None]
        if under:
            slowest = max(under, key=lambda row: row.median("seconds") or 0.0)
            biggest = max(under, key=lambda row: row.median("rss_after") or 0.0)
            print(
                f"conclusion: under the size cap the slowest read measured was {slowest.name} at "
                f"{slowest.median('seconds'):.1f} s ({slowest.outcome}), the largest peak RSS {biggest.name} at "
                f"{biggest.median('rss_after'):.0f} MiB ({biggest.outcome})"
            )
        budget = caps.max_seconds + SLACK_SECONDS
        slow = [
            f"{row.name} ({fmt(row.median('seconds'), 1)} s, {row.outcome})"
            for row in rows
            if row.killed or (row.median("seconds") or 0.0) > budget
        ]
        heavy = [
            f"{row.name} ({fmt(row.median('rss_after'), 0)} MiB, {row.outcome})"
            for row in rows
            if (row.median("rss_after") or 0.0) > RSS_BUDGET_MIB
        ]
        print(f"over max_seconds + {SLACK_SECONDS:g} s = {budget:g} s, or killed: {', '.join(slow) or 'none'}")
        print(f"over {RSS_BUDGET_MIB:.0f} MiB peak RSS: {', '.join(heavy) or 'none'}")
        print(f"(benchmark wall time {time.perf_counter() - started:.0f} s)")
    finally:
        if args.keep:
            print(f"generated files kept in {work}")
        else:
            for leftover in work.iterdir():
                leftover.unlink()
            work.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
