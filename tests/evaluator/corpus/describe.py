"""Compute facts about the real-world DXF corpus in ``files/``.

Only the standard library and ezdxf are used.  Everything except the
``ezdxf_*`` fields is computed by a raw scan of the bytes, independent of
any DXF library, so the facts can serve as ground truth for other readers.

Usage (from the repository root)::

    uv run python tests/evaluator/corpus/describe.py            # rewrite computed fields in corpus.json
    uv run python tests/evaluator/corpus/describe.py --check    # exit 1 if corpus.json is stale
    uv run python tests/evaluator/corpus/describe.py FILE...    # print facts for arbitrary files

Hand-written fields of corpus.json (file, source_repo, source_path, commit,
licence, licence_url, why, note) are kept; all other fields are recomputed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import struct
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FILES = HERE / "files"
CORPUS_JSON = HERE / "corpus.json"

BINARY_SENTINEL = b"AutoCAD Binary DXF\r\n\x1a\x00"
Tag = tuple[int | None, str]
SKIP_ENTITIES = {"VERTEX", "SEQEND", "ATTRIB"}
MANUAL_FIELDS = (
    "file",
    "source_repo",
    "source_path",
    "commit",
    "licence",
    "licence_url",
    "why",
    "note",
)


# --------------------------------------------------------------------------
# text (ASCII) DXF
# --------------------------------------------------------------------------


def line_ending(data: bytes) -> str:
    crlf = data.count(b"\r\n")
    lf = data.count(b"\n") - crlf
    cr = data.count(b"\r") - crlf
    kinds = [name for name, n in (("crlf", crlf), ("lf", lf), ("cr", cr)) if n]
    if not kinds:
        return "lf"  # single-line file; does not occur in practice
    return kinds[0] if len(kinds) == 1 else "mixed"


def text_tags(data: bytes) -> list[Tag]:
    """Return (group code, value) pairs; the value is decoded as latin-1.

    Line endings are normalised first.  A code line that is not an integer
    yields ``None`` as code (the scan keeps going in pairs).
    """
    text = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").decode("latin-1")
    lines = text.split("\n")
    tags = []
    for i in range(0, len(lines) - 1, 2):
        try:
            code: int | None = int(lines[i].strip())
        except ValueError:
            code = None
        tags.append((code, lines[i + 1].strip()))
    return tags


# --------------------------------------------------------------------------
# binary DXF (decoder written from the DXF reference group code ranges)
# --------------------------------------------------------------------------


def _bin_type(code: int) -> str:
    if 10 <= code <= 59 or 110 <= code <= 149 or 210 <= code <= 239:
        return "d"
    if 460 <= code <= 469 or 1010 <= code <= 1059:
        return "d"
    if 60 <= code <= 79 or 170 <= code <= 179 or 270 <= code <= 289:
        return "h"
    if 370 <= code <= 389 or 400 <= code <= 409 or 1060 <= code <= 1070:
        return "h"
    if 90 <= code <= 99 or 420 <= code <= 429 or 440 <= code <= 459:
        return "i"
    if code == 1071:
        return "i"
    if 160 <= code <= 169:
        return "q"
    if 290 <= code <= 299:
        return "B"
    if 310 <= code <= 319 or code == 1004:
        return "chunk"
    return "s"


def binary_tags(data: bytes) -> tuple[list[Tag], int]:
    """Decode a binary DXF; return the tags and the offset after the last one."""
    # R12 binary DXF uses 1-byte group codes (255 escapes a 2-byte code),
    # later versions use 2-byte group codes: "0 SECTION" is 00 53.. vs 00 00 53..
    r12 = data[22:23] == b"\x00" and data[23:24] != b"\x00"
    pos = 22
    tags: list[Tag] = []
    n = len(data)
    while pos < n:
        if r12:
            code = data[pos]
            pos += 1
            if code == 255:
                code = struct.unpack_from("<H", data, pos)[0]
                pos += 2
        else:
            if pos + 2 > n:
                break
            code = struct.unpack_from("<H", data, pos)[0]
            pos += 2
        kind = _bin_type(code)
        if kind == "s":
            end = data.index(b"\x00", pos)
            value = data[pos:end].decode("latin-1")
            pos = end + 1
        elif kind == "chunk":
            length = data[pos]
            value = data[pos + 1 : pos + 1 + length].hex()
            pos += 1 + length
        else:
            size = struct.calcsize("<" + kind)
            value = str(struct.unpack_from("<" + kind, data, pos)[0])
            pos += size
        tags.append((code, value))
        if code == 0 and value == "EOF":
            break
    return tags, pos


# --------------------------------------------------------------------------
# facts
# --------------------------------------------------------------------------


def header_var(tags: list[Tag], name: str) -> str | None:
    for i, (code, value) in enumerate(tags):
        if code == 9 and value == name:
            if i + 1 < len(tags):
                return tags[i + 1][1]
            return None
        if code == 0 and value == "ENDSEC":
            return None  # end of HEADER section
    return None


def entity_types(tags: list[Tag]) -> dict[str, int]:
    counts: dict[str, int] = {}
    in_entities = False
    for i, (code, value) in enumerate(tags):
        if code != 0:
            continue
        if not in_entities:
            if value == "SECTION" and i + 1 < len(tags) and tags[i + 1] == (2, "ENTITIES"):
                in_entities = True
            continue
        if value == "ENDSEC":
            break
        if value in SKIP_ENTITIES:
            continue
        counts[value] = counts.get(value, 0) + 1
    return dict(sorted(counts.items()))


def ezdxf_facts(path: Path) -> dict[str, Any]:
    import ezdxf
    from ezdxf import recover

    logging.disable(logging.CRITICAL)
    facts: dict[str, Any] = {"ezdxf_version": ezdxf.__version__}  # type: ignore[attr-defined]
    try:
        doc = ezdxf.readfile(str(path))  # type: ignore[attr-defined]
    except Exception as exc:  # any failure is recorded
        facts["ezdxf_readfile"] = "error"
        facts["ezdxf_error"] = f"{type(exc).__name__}: {exc}"[:300]
        try:
            doc, auditor = recover.readfile(str(path))
        except Exception as exc2:
            facts["ezdxf_recover"] = "error"
            facts["ezdxf_recover_error"] = f"{type(exc2).__name__}: {exc2}"[:300]
            return facts
        facts["ezdxf_recover"] = "ok"
        facts["ezdxf_recover_errors"] = len(auditor.errors)
        facts["ezdxf_modelspace_len"] = len(doc.modelspace())
        return facts
    facts["ezdxf_readfile"] = "ok"
    facts["ezdxf_modelspace_len"] = len(doc.modelspace())
    return facts


def describe(path: Path, with_ezdxf: bool = True) -> dict[str, Any]:
    data = path.read_bytes()
    binary = data.startswith(BINARY_SENTINEL)
    if binary:
        tags, end = binary_tags(data)
        ending = "binary"
        ctrl_z = b"\x1a" in data[end:]
    else:
        tags = text_tags(data)
        ending = line_ending(data)
        eof = data.rfind(b"EOF")
        ctrl_z = eof >= 0 and b"\x1a" in data[eof + 3 :]
    comment = next((v for c, v in tags if c == 999), None)
    facts: dict[str, Any] = {
        "sha256": hashlib.sha256(data).hexdigest(),
        "size": len(data),
        "line_ending": ending,
        "ctrl_z": ctrl_z,
        "binary": binary,
        "dxf_version": header_var(tags, "$ACADVER"),
        "codepage": header_var(tags, "$DWGCODEPAGE"),
        "comment_999": comment,
        "non_ascii": any(b > 127 for b in data) if not binary else None,
        "bad_group_codes": sum(1 for c, _ in tags if c is None),
        "entity_types": entity_types(tags),
    }
    if with_ezdxf:
        facts.update(ezdxf_facts(path))
    return facts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--no-ezdxf", action="store_true")
    args = parser.parse_args()

    if args.paths:
        out = {str(p): describe(p, not args.no_ezdxf) for p in args.paths}
        json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
        print()
        return 0

    entries = json.loads(CORPUS_JSON.read_text(encoding="utf-8"))
    new_entries = []
    for entry in entries:
        manual = {k: entry[k] for k in MANUAL_FIELDS if k in entry}
        facts = describe(FILES / entry["file"], not args.no_ezdxf)
        new_entries.append({**manual, **facts})
    listed = {e["file"] for e in entries}
    unlisted = sorted(p.name for p in FILES.iterdir() if p.name not in listed)
    if args.check:
        stale = [a["file"] for a, b in zip(entries, new_entries, strict=True) if a != b]
        if stale or unlisted:
            print("stale entries:", stale, "unlisted files:", unlisted)
            return 1
        print(f"corpus.json is up to date ({len(entries)} files)")
        return 0
    CORPUS_JSON.write_text(
        json.dumps(new_entries, indent=1, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    if unlisted:
        print("warning: files not listed in corpus.json:", unlisted)
    print(f"wrote {CORPUS_JSON} ({len(new_entries)} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
