"""The pinned gold cache: one checksummed directory per (evaluator version, task).

Layout::

    <root>/<evaluator_version>/<task_id>/
        gold.dxf        the gold drawing
        metadata.json   its DrawingMetadata (schema v3, or v4 when 3D extents are scored)
        render.png      its render on the fixed canvas
        scoring.json    the task's ScoringSpec
        manifest.json   GoldManifest: task, version, schema, SHA-256 and size of the four files

:func:`build_entry` writes an entry atomically (a fresh temporary directory renamed into
place), :func:`load_entry` verifies every checksum and schema rule before returning it and
raises :class:`GoldCacheError` naming the missing or tampered file, and
:func:`check_gold_cache` is the admission helper that reports problems instead of raising.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from autocad_bench.models import Identifier
from autocad_bench_evaluator.metadata import (
    DrawingMetadata,
    ReadLimits,
    canonical_json,
    read_drawing,
)
from autocad_bench_evaluator.render import render_png
from autocad_bench_evaluator.spec import (
    GOLD_DXF,
    GOLD_FILES,
    GOLD_METADATA,
    GOLD_RENDER,
    MANIFEST_FILENAME,
    SCORING_FILENAME,
    GoldEntry,
    GoldManifest,
    ScoringSpec,
)

_IDENTIFIER: TypeAdapter[str] = TypeAdapter(Identifier)

MAX_GOLD_ENTITIES_PER_KIND = 1000
"""The most model-space entities of one kind (LINE, CIRCLE, ...) a gold may hold.

Scoring pairs every gold entity with every candidate entity of its kind, under each of about
ten alignment hypotheses, so its time and memory grow with gold x candidate. An agent controls
only the candidate: against a 300-entity gold a 50,000-line drawing scores in about 2 s and
240 MB. A task author controls the gold: 5,000 lines scored against themselves took 25 s and
1.5 GB, 10,000 took minutes and 5.6 GB, 50,000 ran out of 23 GB. The suite's largest gold
holds 12 entities of one kind; this bound keeps every task well inside what one evaluation
may cost, whatever the agent draws."""


class GoldCacheError(Exception):
    """A gold-cache entry is missing, incomplete, tampered with or inconsistent.

    The message names the entry directory and the offending file.
    """


@dataclass(frozen=True)
class GoldCacheEntry:
    """A verified gold-cache entry, loaded."""

    directory: Path
    manifest: GoldManifest
    spec: ScoringSpec
    metadata: DrawingMetadata

    @property
    def task_id(self) -> str:
        return self.manifest.task_id

    @property
    def gold_dxf(self) -> Path:
        return self.directory / GOLD_DXF

    @property
    def render_path(self) -> Path:
        return self.directory / GOLD_RENDER


def entry_dir(root: Path, evaluator_version: str, task_id: str) -> Path:
    """``<root>/<evaluator_version>/<task_id>``; raises :class:`GoldCacheError` for unsafe names."""
    for what, value in (("evaluator version", evaluator_version), ("task id", task_id)):
        try:
            _IDENTIFIER.validate_python(value)
        except ValidationError:
            raise GoldCacheError(f"invalid {what} {value!r}: letters, digits, '.', '_', '-' only") from None
    return Path(root) / evaluator_version / task_id


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def load_entry(root: Path, evaluator_version: str, task_id: str) -> GoldCacheEntry:
    """Load and verify one entry; raises :class:`GoldCacheError` naming the bad file.

    Checks: the manifest parses and names this task and version; it lists exactly the gold
    files; every file exists with the listed size and SHA-256; ``scoring.json`` is a valid
    spec for this task whose schema version equals the manifest's; ``metadata.json`` is valid
    metadata of that schema version; schema v4 whenever the spec scores 3D extents.
    """
    directory = entry_dir(root, evaluator_version, task_id)
    where = f"gold cache entry {directory}"
    if not directory.is_dir():
        raise GoldCacheError(f"{where}: missing (no directory for task {task_id!r} at version {evaluator_version!r})")
    manifest_path = directory / MANIFEST_FILENAME
    if not manifest_path.is_file():
        raise GoldCacheError(f"{where}: missing file {MANIFEST_FILENAME}")
    try:
        manifest = GoldManifest.model_validate_json(manifest_path.read_bytes())
    except ValidationError as error:
        raise GoldCacheError(f"{where}: {MANIFEST_FILENAME} is invalid: {_first_error(error)}") from None
    if manifest.task_id != task_id or manifest.evaluator_version != evaluator_version:
        raise GoldCacheError(
            f"{where}: {MANIFEST_FILENAME} is for task {manifest.task_id!r} version "
            f"{manifest.evaluator_version!r}, expected {task_id!r} {evaluator_version!r}"
        )
    listed = sorted(f.name for f in manifest.files)
    if len(set(listed)) != len(listed):
        raise GoldCacheError(f"{where}: {MANIFEST_FILENAME} lists a file twice")
    for name in GOLD_FILES:
        if name not in listed:
            raise GoldCacheError(f"{where}: {MANIFEST_FILENAME} does not list {name}")
    for name in listed:
        if name not in GOLD_FILES:
            raise GoldCacheError(f"{where}: {MANIFEST_FILENAME} lists unexpected file {name}")
    for record in sorted(manifest.files, key=lambda f: f.name):
        path = directory / record.name
        if not path.is_file():
            raise GoldCacheError(f"{where}: missing file {record.name}")
        size = path.stat().st_size
        if size != record.size:
            raise GoldCacheError(
                f"{where}: {record.name} was modified (size {size} bytes, manifest says {record.size})"
            )
        if _sha256(path) != record.sha256:
            raise GoldCacheError(f"{where}: {record.name} was modified (SHA-256 does not match the manifest)")
    try:
        spec = ScoringSpec.model_validate_json((directory / SCORING_FILENAME).read_bytes())
    except ValidationError as error:
        raise GoldCacheError(f"{where}: {SCORING_FILENAME} is invalid: {_first_error(error)}") from None
    if spec.task_id != task_id:
        raise GoldCacheError(f"{where}: {SCORING_FILENAME} is for task {spec.task_id!r}")
    if spec.schema_version != manifest.schema_version:
        raise GoldCacheError(
            f"{where}: {SCORING_FILENAME} wants schema v{spec.schema_version}, manifest has v{manifest.schema_version}"
        )
    if spec.scores_3d_extents and manifest.schema_version != 4:
        raise GoldCacheError(f"{where}: 3D extents are scored, so schema v4 is required")
    try:
        metadata = DrawingMetadata.model_validate_json((directory / GOLD_METADATA).read_bytes())
    except ValidationError as error:
        raise GoldCacheError(f"{where}: {GOLD_METADATA} is invalid: {_first_error(error)}") from None
    if metadata.schema_version != manifest.schema_version:
        raise GoldCacheError(
            f"{where}: {GOLD_METADATA} is schema v{metadata.schema_version}, manifest has v{manifest.schema_version}"
        )
    if spec.scores_3d_extents and (metadata.physical_3d is None or metadata.physical_3d.status != "measured"):
        raise GoldCacheError(f"{where}: {GOLD_METADATA} has no measured 3D extents but the task scores them")
    return GoldCacheEntry(directory=directory, manifest=manifest, spec=spec, metadata=metadata)


def _first_error(error: ValidationError) -> str:
    first = error.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "$"
    return f"{loc}: {first['msg']}"


def check_gold_cache(root: Path, evaluator_version: str, task_ids: Iterable[str]) -> list[str]:
    """Admission step 5: verify every required entry; one problem string per bad entry."""
    problems: list[str] = []
    root = Path(root)
    if not root.is_dir():
        return [f"gold cache root {root} does not exist"]
    for task_id in dict.fromkeys(task_ids):
        try:
            load_entry(root, evaluator_version, task_id)
        except GoldCacheError as error:
            problems.append(str(error))
        except OSError as error:
            problems.append(f"gold cache entry for {task_id!r}: cannot be read: {error}")
    return problems


def build_entry(
    root: Path,
    evaluator_version: str,
    gold_dxf: Path,
    spec: ScoringSpec,
    *,
    limits: ReadLimits | None = None,
) -> GoldCacheEntry:
    """Write (or replace) the entry for ``spec.task_id`` from a gold DXF; returns it verified.

    The gold is read at ``spec.schema_version``; raises :class:`GoldCacheError` when it is
    not a valid drawing, has no geometry, lacks measured 3D extents that the spec scores, or
    holds more than :data:`MAX_GOLD_ENTITIES_PER_KIND` entities of one kind.
    The entry appears atomically: readers see the old entry or the complete new one.
    """
    target = entry_dir(root, evaluator_version, spec.task_id)
    result = read_drawing(Path(gold_dxf), spec.schema_version, limits=limits)
    if not isinstance(result, DrawingMetadata):
        raise GoldCacheError(f"gold drawing {gold_dxf} for {spec.task_id!r} is invalid: {result.reason}")
    if not result.model.entities:
        raise GoldCacheError(f"gold drawing {gold_dxf} for {spec.task_id!r} has no model-space entities")
    if spec.scores_3d_extents and (result.physical_3d is None or result.physical_3d.status != "measured"):
        raise GoldCacheError(f"gold drawing {gold_dxf} for {spec.task_id!r} has no measured 3D extents")
    kinds = collections.Counter(entity.kind for entity in result.model.entities)
    for kind, count in sorted(kinds.items()):
        if count > MAX_GOLD_ENTITIES_PER_KIND:
            raise GoldCacheError(
                f"gold drawing {gold_dxf} for {spec.task_id!r} has {count} {kind} entities, more than the "
                f"{MAX_GOLD_ENTITIES_PER_KIND} of one kind a gold may hold (scoring time and memory grow with "
                "gold x candidate entities)")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{spec.task_id}.", dir=target.parent))
    try:
        contents = {
            GOLD_DXF: Path(gold_dxf).read_bytes(),
            GOLD_METADATA: result.to_json_bytes(),
            GOLD_RENDER: render_png(result),
            SCORING_FILENAME: canonical_json(spec.model_dump(mode="json")),
        }
        records = []
        for name in GOLD_FILES:
            data = contents[name]
            (staging / name).write_bytes(data)
            records.append(GoldEntry(name=name, sha256=hashlib.sha256(data).hexdigest(), size=len(data)))
        manifest = GoldManifest(
            task_id=spec.task_id,
            evaluator_version=evaluator_version,
            schema_version=spec.schema_version,
            files=tuple(records),
        )
        (staging / MANIFEST_FILENAME).write_bytes(canonical_json(manifest.model_dump(mode="json")))
        for name in (*GOLD_FILES, MANIFEST_FILENAME):
            with (staging / name).open("rb") as handle:
                os.fsync(handle.fileno())
        _swap_in(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return load_entry(root, evaluator_version, spec.task_id)


def _swap_in(staging: Path, target: Path) -> None:
    if not target.exists():
        os.replace(staging, target)
        return
    # Directories cannot be swapped in one rename: move the old one aside first.
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
    old.rmdir()
    os.replace(target, old)
    try:
        os.replace(staging, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.replace(old, target)
        raise
    shutil.rmtree(old, ignore_errors=True)


def manifest_json(entry: GoldCacheEntry) -> str:
    """The entry's manifest as compact JSON (for logs and admission reports)."""
    return json.dumps(entry.manifest.model_dump(mode="json"), sort_keys=True)
