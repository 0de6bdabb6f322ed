"""The deployment manifest (``manifest.json``): build, write idempotently, load and verify.

``Install-AutocadBenchBroker.ps1`` writes it once per installation through
``autocad-bench-broker manifest write`` (:func:`build_manifest`, :func:`write_manifest`);
``autocad-bench-broker manifest verify`` (:func:`verify_manifest`) re-hashes every listed file
and the installed input driver at each start. Errors are :class:`ReadinessError`, except
:func:`verify_manifest`, which reports its problems instead of raising.
"""

from __future__ import annotations

import hashlib
import json
import sys
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import Field, ValidationError

from autocad_bench.storage import atomic_write_bytes
from autocad_bench_broker.readiness.common import (
    _EXCLUDED_SUFFIXES,
    _LABEL,
    INPUT_DRIVER_DISTRIBUTION,
    MANIFEST_FORMAT,
    ReadinessError,
    Sha256Hex,
    _first_problem,
    _Strict,
)


class FileDigest(_Strict):
    """One deployed file: ``path`` relative to the manifest's ``root``, with ``/`` separators."""

    path: str = Field(min_length=1)
    sha256: Sha256Hex
    size: int = Field(ge=0)


class WheelInfo(_Strict):
    """The broker wheel as deployed (``path`` relative to ``root``)."""

    name: str = Field(min_length=1)
    path: str = Field(min_length=1)
    version: str = Field(min_length=1)
    sha256: Sha256Hex
    size: int = Field(ge=0)


class InputDriverInfo(_Strict):
    """The input driver distribution: version, digest of its installed files, optional archive."""

    name: str = INPUT_DRIVER_DISTRIBUTION
    version: str = Field(min_length=1)
    package_sha256: Sha256Hex
    """:func:`distribution_sha256` of the installed distribution."""
    archive_sha256: Sha256Hex | None = None
    """SHA-256 of the archive it was installed from, when the installer was given it."""


class DeploymentManifest(_Strict):
    """``manifest.json``: what one installation deployed (see the module docstring)."""

    format: Literal["autocad-bench-deployment/1"] = MANIFEST_FORMAT
    deployment_id: str = Field(pattern=r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
    created_at: datetime
    broker_version: str = Field(pattern=_LABEL.pattern)
    """The image contract label (``windows-autocad-2019-v11``) ``/health`` reports."""
    broker_wheel: WheelInfo
    input_driver: InputDriverInfo
    python_version: str
    root: str
    """The installation directory the file paths are relative to."""
    files: tuple[FileDigest, ...]

    def content_key(self) -> dict[str, Any]:
        """Everything but the deployment's identity and time: equal keys mean the same deployment."""
        return self.model_dump(mode="json", exclude={"deployment_id", "created_at"})


def sha256_file(path: Path) -> tuple[str, int]:
    """SHA-256 hex and size of ``path`` (read in chunks)."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _relative(path: Path, root: Path) -> str:
    try:
        return PurePosixPath(*path.resolve().relative_to(root.resolve()).parts).as_posix()
    except ValueError:
        raise ReadinessError(f"{path.name} is outside the installation root") from None


def distribution_files(name: str) -> list[Path]:
    """The installed files of distribution ``name`` (compiled caches left out), sorted."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        raise ReadinessError(f"distribution {name!r} is not installed") from None
    files: list[Path] = []
    for entry in dist.files or ():
        if entry.suffix in _EXCLUDED_SUFFIXES or "__pycache__" in entry.parts:
            continue
        located = Path(str(dist.locate_file(entry)))
        if located.is_file():
            files.append(located.resolve())
    return sorted(set(files))


def distribution_sha256(name: str) -> tuple[str, str]:
    """(version, digest) of an installed distribution.

    The digest input is one line ``<file name as RECORD lists it>\\0<sha256>\\n`` per installed
    file (compiled caches left out), sorted: the same scheme as
    :func:`~autocad_bench_broker.identity.package_sha256`, so it changes exactly when the
    installed code does, wherever the distribution was installed.
    """
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        raise ReadinessError(f"distribution {name!r} is not installed") from None
    lines: list[bytes] = []
    for entry in sorted(dist.files or (), key=lambda item: item.as_posix()):
        if entry.suffix in _EXCLUDED_SUFFIXES or "__pycache__" in entry.parts:
            continue
        located = Path(str(dist.locate_file(entry)))
        if not located.is_file():
            continue
        digest, _ = sha256_file(located)
        lines.append(f"{entry.as_posix()}\0{digest}\n".encode())
    return dist.version, hashlib.sha256(b"".join(lines)).hexdigest()


def build_manifest(
    *,
    root: Path,
    broker_version: str,
    broker_wheel: Path,
    files: Iterable[Path] = (),
    distributions: Iterable[str] = (),
    input_driver: str = INPUT_DRIVER_DISTRIBUTION,
    input_driver_archive: Path | None = None,
    deployment_id: str | None = None,
    now: datetime | None = None,
) -> DeploymentManifest:
    """The manifest of an installation under ``root`` (raises :class:`ReadinessError`).

    ``files`` (paths, relative ones taken under ``root``) and the installed files of every
    distribution in ``distributions`` are listed with their SHA-256; all must lie under
    ``root``. ``broker_wheel`` must lie under ``root`` too (the installer keeps a copy) and is
    always listed. ``deployment_id`` defaults to a fresh random GUID.
    """
    if not _LABEL.fullmatch(broker_version):
        raise ReadinessError("broker_version must be a label like windows-autocad-2019-v11")
    root = root.resolve()
    if not root.is_dir():
        raise ReadinessError("the installation root is not a directory")
    wheel = broker_wheel if broker_wheel.is_absolute() else root / broker_wheel
    if not wheel.is_file() or wheel.suffix != ".whl":
        raise ReadinessError(f"the broker wheel {wheel.name} is not a .whl file")
    wheel_version = _wheel_version(wheel.name)
    paths: set[Path] = {wheel.resolve()}
    for item in files:
        path = item if item.is_absolute() else root / item
        if not path.is_file():
            raise ReadinessError(f"{item} is not a file")
        paths.add(path.resolve())
    for name in distributions:
        paths.update(distribution_files(name))
    digests = []
    for path in sorted(paths, key=lambda p: _relative(p, root)):
        sha, size = sha256_file(path)
        digests.append(FileDigest(path=_relative(path, root), sha256=sha, size=size))
    wheel_sha, wheel_size = sha256_file(wheel)
    driver_version, driver_sha = distribution_sha256(input_driver)
    archive_sha = sha256_file(input_driver_archive)[0] if input_driver_archive is not None else None
    try:
        identity = str(uuid.UUID(deployment_id)) if deployment_id is not None else str(uuid.uuid4())
    except ValueError:
        raise ReadinessError("deployment_id must be a GUID") from None
    return DeploymentManifest(
        deployment_id=identity,
        created_at=(now or datetime.now(UTC)).replace(microsecond=0),
        broker_version=broker_version,
        broker_wheel=WheelInfo(
            name=wheel.name, path=_relative(wheel, root), version=wheel_version, sha256=wheel_sha, size=wheel_size
        ),
        input_driver=InputDriverInfo(
            name=input_driver, version=driver_version, package_sha256=driver_sha, archive_sha256=archive_sha
        ),
        python_version=".".join(str(part) for part in sys.version_info[:3]),
        root=str(root),
        files=tuple(digests),
    )


def _wheel_version(name: str) -> str:
    parts = name[: -len(".whl")].split("-")
    if len(parts) < 5:
        raise ReadinessError(f"{name} is not a wheel file name")
    return parts[1]


def manifest_bytes(manifest: DeploymentManifest) -> bytes:
    """The canonical file content: indented JSON with sorted keys, UTF-8 without BOM, final newline."""
    return (json.dumps(manifest.model_dump(mode="json"), indent=2, sort_keys=True) + "\n").encode()


def write_json_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically and durably (no partial file is ever seen).

    Creates the parent directory; raises ``OSError`` if the file system refuses.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, data)


def load_manifest(path: Path) -> DeploymentManifest:
    """Parse ``manifest.json`` (raises :class:`ReadinessError`)."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise ReadinessError(f"cannot read the manifest {path.name}: {error.strerror or error}") from None
    try:
        return DeploymentManifest.model_validate_json(raw)
    except ValidationError as error:
        raise ReadinessError(f"the manifest {path.name} is invalid: {_first_problem(error)}") from None


@dataclass(frozen=True)
class ManifestWrite:
    """What :func:`write_manifest` did."""

    manifest: DeploymentManifest
    sha256: str
    unchanged: bool


def write_manifest(path: Path, manifest: DeploymentManifest, *, keep_unchanged: bool = True) -> ManifestWrite:
    """Write ``manifest`` to ``path``; idempotent.

    With ``keep_unchanged`` (the installer's default), an existing valid manifest whose
    content (everything but ``deployment_id`` and ``created_at``) equals the new one is left
    byte for byte as it is, so re-running the installer on an unchanged image keeps its
    deployment id and manifest checksum. Otherwise the new manifest replaces it atomically.
    """
    if keep_unchanged and path.is_file():
        try:
            existing = load_manifest(path)
        except ReadinessError:
            existing = None
        if existing is not None and existing.content_key() == manifest.content_key():
            return ManifestWrite(existing, sha256_file(path)[0], unchanged=True)
    data = manifest_bytes(manifest)
    write_json_atomic(path, data)
    return ManifestWrite(manifest, hashlib.sha256(data).hexdigest(), unchanged=False)


class ManifestCheck(_Strict):
    """What ``autocad-bench-broker manifest verify`` prints."""

    ok: bool
    manifest_sha256: Sha256Hex | None = None
    deployment_id: str | None = None
    broker_version: str | None = None
    broker_sha256: Sha256Hex | None = None
    input_driver_version: str | None = None
    files_checked: int = 0
    problems: tuple[str, ...] = ()


def verify_manifest(path: Path, *, root: Path | None = None, check_distributions: bool = True) -> ManifestCheck:
    """Re-hash every file ``path`` lists and compare the installed input driver; never raises.

    ``root`` overrides the manifest's own ``root`` (tests, relocated installations). With
    ``check_distributions`` the input driver installed in *this* interpreter must have the
    manifest's version and file digest (the installer runs this in the broker's venv).
    """
    try:
        manifest = load_manifest(path)
        digest = sha256_file(path)[0]
    except (ReadinessError, OSError) as error:
        return ManifestCheck(ok=False, problems=(str(error),))
    base = root if root is not None else Path(manifest.root)
    problems: list[str] = []
    for entry in manifest.files:
        target = base.joinpath(*PurePosixPath(entry.path).parts)
        try:
            sha, size = sha256_file(target)
        except OSError:
            problems.append(f"{entry.path}: missing")
            continue
        if (sha, size) != (entry.sha256, entry.size):
            problems.append(f"{entry.path}: content differs from the manifest")
    if manifest.broker_wheel.path not in {entry.path for entry in manifest.files}:
        problems.append("the broker wheel is not among the listed files")
    if check_distributions:
        try:
            version, package = distribution_sha256(manifest.input_driver.name)
        except ReadinessError as error:
            problems.append(str(error))
        else:
            if version != manifest.input_driver.version:
                problems.append(
                    f"{manifest.input_driver.name} {version} is installed, the manifest says "
                    f"{manifest.input_driver.version}"
                )
            elif package != manifest.input_driver.package_sha256:
                problems.append(f"the installed {manifest.input_driver.name} files differ from the manifest")
    return ManifestCheck(
        ok=not problems,
        manifest_sha256=digest,
        deployment_id=manifest.deployment_id,
        broker_version=manifest.broker_version,
        broker_sha256=manifest.broker_wheel.sha256,
        input_driver_version=manifest.input_driver.version,
        files_checked=len(manifest.files),
        problems=tuple(problems),
    )
