"""DWG readers: DWG files are never parsed here; a :class:`DwgReader` supplies their metadata,
either from the JSON the broker's AutoCAD adapter exported next to the DWG on the Windows host
(:class:`AdapterMetadataReader`, :class:`DwgAdapterExport`) or through a configured external
converter to DXF (:class:`ConverterDwgReader`, e.g. the ODA File Converter), tried in order by
:class:`ChainedDwgReader` (:func:`default_dwg_reader`)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, Protocol

from pydantic import Field, ValidationError, model_validator

from autocad_bench.models import StrictModel
from autocad_bench_evaluator.metadata.drawing import DrawingMetadata, InvalidDrawing, ReadResult
from autocad_bench_evaluator.metadata.entities import MAX_COORDINATE
from autocad_bench_evaluator.metadata.limits import CannotReadDrawing, ReadLimits
from autocad_bench_evaluator.spec import SchemaVersion

ADAPTER_METADATA_SUFFIX = ".metadata.json"
"""The AutoCAD adapter writes ``attempt.dwg.metadata.json`` next to ``attempt.dwg``."""
ADAPTER_FORMAT = "autocad-bench-dwg-metadata"


class DwgReader(Protocol):
    """Supplies metadata for a DWG file, which this process never parses itself.

    ``read`` returns metadata (at ``schema_version``), an :class:`InvalidDrawing` when the
    source says the DWG is invalid, or raises :class:`CannotReadDrawing`.
    """

    def read(self, path: Path, sha256: str, schema_version: SchemaVersion, limits: ReadLimits) -> ReadResult: ...


class DwgAdapterExport(StrictModel):
    """The JSON the broker's AutoCAD adapter writes next to a DWG on the Windows host.

    ``dwg_sha256`` binds it to the exact DWG bytes; ``valid: false`` with ``reason`` reports a
    DWG that AutoCAD itself could not open.
    """

    format: Literal["autocad-bench-dwg-metadata"] = "autocad-bench-dwg-metadata"
    dwg_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    exporter: str = ""
    valid: bool = True
    reason: str = ""
    metadata: DrawingMetadata | None = None

    @model_validator(mode="after")
    def _metadata_when_valid(self) -> DwgAdapterExport:
        if self.valid and self.metadata is None:
            raise ValueError("a valid export needs metadata")
        return self


class AdapterMetadataReader:
    """Reads ``<dwg>.metadata.json`` exported by the AutoCAD adapter (see :class:`DwgAdapterExport`)."""

    def read(self, path: Path, sha256: str, schema_version: SchemaVersion, limits: ReadLimits) -> ReadResult:
        """Validate and return the exported metadata; raises :class:`CannotReadDrawing` when
        the file is missing, malformed, belongs to other DWG bytes or lacks 3D data for v4."""
        export_path = adapter_metadata_path(path)
        if not export_path.is_file():
            raise CannotReadDrawing(f"cannot read DWG here: no AutoCAD adapter metadata at {export_path}")
        if export_path.stat().st_size > limits.max_bytes:
            raise CannotReadDrawing(f"cannot read DWG here: adapter metadata {export_path} is too large")
        try:
            export = DwgAdapterExport.model_validate_json(export_path.read_bytes())
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise CannotReadDrawing(
                f"cannot read DWG here: adapter metadata {export_path} is invalid at {where}: {first['msg']}"
            ) from None
        if export.dwg_sha256 != sha256:
            raise CannotReadDrawing(
                f"cannot read DWG here: adapter metadata {export_path} describes other DWG bytes "
                f"(sha256 {export.dwg_sha256[:12]}..., file is {sha256[:12]}...)"
            )
        if not export.valid:
            return InvalidDrawing(
                failure_class="dwg-invalid", reason=f"AutoCAD could not open the DWG: {export.reason}", sha256=sha256
            )
        metadata = export.metadata
        assert metadata is not None  # guaranteed by the validator
        try:
            encoded = metadata.to_json_bytes()
        except ValueError:
            raise CannotReadDrawing(
                f"cannot read DWG here: adapter metadata {export_path} holds non-finite numbers"
            ) from None
        beyond = _first_number_beyond(json.loads(encoded), MAX_COORDINATE)
        if beyond is not None:
            # The DXF readers drop an entity holding such a number; a whole export that does is
            # refused here, so no scorer arithmetic (sums of squares, areas) can overflow.
            where, number = beyond
            raise CannotReadDrawing(
                f"cannot read DWG here: adapter metadata {export_path} holds {number!r} at metadata.{where}, "
                f"beyond the readers' bound of {MAX_COORDINATE:g}"
            )
        if metadata.schema_version < schema_version:
            raise CannotReadDrawing(
                f"cannot read DWG here: adapter metadata is schema v{metadata.schema_version}, "
                f"the task needs v{schema_version}"
            )
        return metadata


_DERIVED_PRODUCTS = frozenset({"volume", "area"})
"""Measures of bodies (a volume grows with the cube of its coordinates): finite whenever the
coordinates are bounded, and not bounded themselves, as on the DXF path."""


def _first_number_beyond(value: object, bound: float) -> tuple[str, float] | None:
    """The JSON path and value of the first number in ``value`` (in document order) whose
    magnitude exceeds ``bound``, outside the keys of :data:`_DERIVED_PRODUCTS`. Iterative, so
    nesting as deep as the export holds cannot exhaust the interpreter's stack."""
    stack: list[tuple[str, object]] = [("", value)]
    while stack:
        where, item = stack.pop()
        children: list[tuple[str, object]]
        if isinstance(item, dict):
            children = [(f"{where}.{k}" if where else str(k), v) for k, v in item.items()
                        if k not in _DERIVED_PRODUCTS]
        elif isinstance(item, list):
            children = [(f"{where}[{i}]", v) for i, v in enumerate(item)]
        else:
            if isinstance(item, int | float) and not isinstance(item, bool) and abs(item) > bound:
                return where, float(item)
            continue
        stack.extend(reversed(children))
    return None


def adapter_metadata_path(dwg: Path) -> Path:
    """Where the AutoCAD adapter's export for ``dwg`` lives."""
    return dwg.with_name(dwg.name + ADAPTER_METADATA_SUFFIX)


_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.IGNORECASE)


class ConverterDwgReader:
    """Converts a DWG to DXF with an external command, then reads the DXF here.

    ``command`` is an argument list (or a shell-like string, split with :func:`shlex.split`)
    whose items may contain ``{input}``, ``{input_dir}``, ``{output_dir}``, ``{output}`` and
    ``{stem}``. The DWG is copied alone into a fresh input directory, so directory-based tools
    such as ``ODAFileConverter {input_dir} {output_dir} ACAD2018 DXF 0 1 *.DWG`` work. The
    command runs without secret-looking environment variables and is killed after
    ``timeout_s``. A failing command raises :class:`CannotReadDrawing`.
    """

    def __init__(self, command: Sequence[str] | str, *, timeout_s: float = 120.0, isolated: bool = True) -> None:
        self.command: tuple[str, ...] = tuple(shlex.split(command) if isinstance(command, str) else command)
        if not self.command:
            raise ValueError("empty converter command")
        self.timeout_s = timeout_s
        self.isolated = isolated

    def read(self, path: Path, sha256: str, schema_version: SchemaVersion, limits: ReadLimits) -> ReadResult:
        """Run the converter and read its DXF; see the class docstring for failures."""
        with tempfile.TemporaryDirectory(prefix="acb-dwg-") as tmp:
            in_dir, out_dir = Path(tmp, "in"), Path(tmp, "out")
            in_dir.mkdir()
            out_dir.mkdir()
            source = in_dir / (path.stem + ".dwg")
            shutil.copyfile(path, source)
            output = out_dir / (path.stem + ".dxf")
            fields = {
                "input": str(source),
                "input_dir": str(in_dir),
                "output_dir": str(out_dir),
                "output": str(output),
                "stem": path.stem,
            }
            argv = [part.format(**fields) for part in self.command]
            env = {k: v for k, v in os.environ.items() if not _SECRET_NAME.search(k)}
            try:
                done = subprocess.run(
                    argv, capture_output=True, timeout=self.timeout_s, env=env, check=False, stdin=subprocess.DEVNULL
                )
            except FileNotFoundError:
                raise CannotReadDrawing(f"cannot read DWG here: converter {argv[0]!r} not found") from None
            except subprocess.TimeoutExpired:
                raise CannotReadDrawing(
                    f"cannot read DWG here: converter {argv[0]!r} timed out after {self.timeout_s:g} s"
                ) from None
            if done.returncode != 0:
                tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
                raise CannotReadDrawing(
                    f"cannot read DWG here: converter {argv[0]!r} exited {done.returncode}: {tail[0][:200]}"
                )
            produced = output if output.is_file() else _find_dxf(out_dir)
            if produced is None:
                raise CannotReadDrawing(f"cannot read DWG here: converter {argv[0]!r} produced no DXF")
            if self.isolated:  # the converter's output is as untrusted as the DWG it came from
                from autocad_bench_evaluator.isolated_read import read_dxf_isolated as read
            else:
                from autocad_bench_evaluator.dxf_reader import read_dxf as read
            result = read(produced, schema_version, limits, source_format="dwg-converted")
            if isinstance(result, DrawingMetadata):
                return result.model_copy(
                    update={"source": result.source.model_copy(update={"sha256": sha256, "size": path.stat().st_size})}
                )
            return InvalidDrawing(
                failure_class=result.failure_class,
                reason=f"the DWG converted to DXF is not a valid drawing: {result.reason}",
                detail=result.detail,
                sha256=sha256,
            )


def _find_dxf(directory: Path) -> Path | None:
    found = sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix.lower() == ".dxf")
    return found[0] if found else None


class ChainedDwgReader:
    """Tries several readers in order; the first that does not raise wins.

    Raises :class:`CannotReadDrawing` listing every reader's reason when all fail.
    """

    def __init__(self, readers: Sequence[DwgReader]) -> None:
        self.readers = tuple(readers)

    def read(self, path: Path, sha256: str, schema_version: SchemaVersion, limits: ReadLimits) -> ReadResult:
        """See the class docstring."""
        reasons: list[str] = []
        for reader in self.readers:
            try:
                return reader.read(path, sha256, schema_version, limits)
            except CannotReadDrawing as error:
                reasons.append(str(error).removeprefix("cannot read DWG here: "))
        raise CannotReadDrawing("cannot read DWG here: " + "; ".join(reasons or ["no DWG reader configured"]))


def default_dwg_reader(converter: Sequence[str] | str | None = None) -> DwgReader:
    """Adapter metadata next to the DWG first, then ``converter`` when one is configured."""
    readers: list[DwgReader] = [AdapterMetadataReader()]
    if converter:
        readers.append(ConverterDwgReader(converter))
    return ChainedDwgReader(readers)
