"""Deployment manifest, pointer prewarm and current-boot readiness record of a Windows image.

``docs/windows-image.md`` describes the deployment; this module is its testable Python half.
The PowerShell scripts in ``broker-win/windows/`` call it through the broker's CLI:

- :class:`DeploymentManifest` (``C:\\ProgramData\\AutoCADBench\\manifest.json``) is written
  once per installation by ``Install-AutocadBenchBroker.ps1`` through
  ``autocad-bench-broker manifest write`` (:func:`build_manifest`, :func:`write_manifest`).
  It names the deployment (a GUID), the broker wheel and its SHA-256 (the "broker binary
  checksum" of the sandbox contract), the input driver (PyAutoGUI) version and a digest of its
  installed files, the image's contract label (``broker_version``) and every deployed file
  with its SHA-256. The broker's ``/health`` reports the SHA-256 of the manifest's bytes
  (``manifest_sha256``); ``autocad-bench-broker manifest verify`` (:func:`verify_manifest`)
  re-hashes everything it lists at each start.
- :class:`PrewarmResult` is what ``autocad-bench-broker prewarm`` prints (:func:`prewarm`): one
  real pointer move to a target and back through the broker's own
  :class:`~autocad_bench_broker.drivers.input.InputDriver`, each position read back
  independently of the driver (``GetCursorPos`` on Windows, ``XQueryPointer`` on X11), plus the
  window station and desktop the process injects into (Windows: must be ``WinSta0\\Default``,
  and ``Default`` must be the input desktop, i.e. not the lock or UAC screen).
- :class:`ReadinessRecord` (``C:\\ProgramData\\AutoCADBench\\state\\ready.json``) is written by
  ``Start-AutocadBenchBroker.ps1`` at every boot once the broker answers ``/health``. It is a
  superset of what the ``aws`` and ``local-hyperv`` backends read (their models ignore the
  extra fields). :func:`load_readiness` parses it and refuses a record of another boot;
  :func:`readiness_report` is what the AWS image's ``readiness.ps1`` prints.

Nothing here needs Windows except the small ``ctypes`` probes, which are only called there.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from autocad_bench.models import IDENTIFIER_RE
from autocad_bench.storage import atomic_write_bytes
from autocad_bench_broker.drivers.input import InputDriver
from autocad_bench_broker.errors import BrokerError
from autocad_bench_broker.identity import IdentityError, display_number
from autocad_bench_broker.identity import boot_id as current_boot_id

MANIFEST_FORMAT: Final = "autocad-bench-deployment/1"
READINESS_FORMAT: Final = "autocad-bench-readiness/1"
PREWARM_FORMAT: Final = "autocad-bench-prewarm/1"

DEFAULT_DATA_ROOT = r"C:\ProgramData\AutoCADBench"
MANIFEST_PATH = DEFAULT_DATA_ROOT + r"\manifest.json"
READINESS_PATH = DEFAULT_DATA_ROOT + r"\state\ready.json"
"""Where the image keeps its manifest and readiness record (the ``local-hyperv`` backend reads
the readiness record at exactly this path; the ``aws`` backend through ``readiness.ps1``)."""

REQUIRED_WINDOW_STATION = "WinSta0"
REQUIRED_DESKTOP = "Default"
BOOT_TOLERANCE_S = 60.0
"""How far two measurements of one boot's start may differ (``LastBootUpTime`` against the
tick count, clock adjustments after boot); a reboot moves it by far more."""

INPUT_DRIVER_DISTRIBUTION = "pyautogui"
BROKER_DISTRIBUTION = "autocad-bench-broker"

Sha256Hex = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
Point = tuple[int, int]
_EXCLUDED_SUFFIXES = frozenset({".pyc", ".pyo"})
_LABEL = IDENTIFIER_RE


class ReadinessError(BrokerError):
    """A manifest or readiness record is missing, malformed, or belongs to another boot."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---------------------------------------------------------------------------------------------
# Deployment manifest


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


# ---------------------------------------------------------------------------------------------
# Pointer prewarm


@dataclass(frozen=True)
class DesktopInfo:
    """Where this process injects input.

    Windows: the window station and thread desktop of the process (must be ``WinSta0`` and
    ``Default``), the current input desktop (``Default`` unless the lock or UAC screen is up,
    None if it cannot be opened), the process's session and the active console session.
    Linux: no window station or desktop; ``session_id`` is the X display number.
    """

    window_station: str | None
    desktop: str | None
    input_desktop: str | None
    session_id: int | None
    console_session_id: int | None
    user: str | None
    windows: bool


class PrewarmResult(_Strict):
    """What ``autocad-bench-broker prewarm`` prints (one JSON object)."""

    format: Literal["autocad-bench-prewarm/1"] = PREWARM_FORMAT
    ok: bool
    problems: tuple[str, ...] = ()
    driver_version: str | None = None
    screen_width: int | None = None
    screen_height: int | None = None
    start: Point | None = None
    target: Point | None = None
    observed: Point | None = None
    """Pointer position read back after the move to ``target``."""
    returned: Point | None = None
    """Pointer position read back after the move back to ``start``."""
    window_station: str | None = None
    desktop: str | None = None
    input_desktop: str | None = None
    session_id: int | None = None
    console_session_id: int | None = None
    user: str | None = None
    at: datetime
    elapsed_ms: float = Field(ge=0)


PointerReader = Callable[[], Point | None]
"""Reads the real pointer position, independently of the input driver (None: unreadable)."""


def prewarm_target(size: tuple[int, int], start: Point | None) -> Point:
    """The desktop centre, or a point 40 px down-right of it when the pointer is already there."""
    width, height = size
    centre = (width // 2, height // 2)
    if start != centre:
        return centre
    return (min(width - 1, centre[0] + 40), min(height - 1, centre[1] + 40))


def prewarm(
    driver: InputDriver,
    read_pointer: PointerReader,
    desktop: DesktopInfo,
    *,
    timeout_s: float = 2.0,
    poll_s: float = 0.02,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[], None] | None = None,
) -> PrewarmResult:
    """Move the real pointer to a target and back through ``driver``; never raises.

    Each position is read back with ``read_pointer`` (polled for at most ``timeout_s``). The
    result is ok when both moves arrived and, on Windows, the process is on
    ``WinSta0\\Default`` and ``Default`` is the input desktop.
    """
    wait = sleep if sleep is not None else (lambda: time.sleep(poll_s))
    started = clock()
    at = datetime.now(UTC)
    problems: list[str] = []
    fields: dict[str, Any] = {
        "window_station": desktop.window_station,
        "desktop": desktop.desktop,
        "input_desktop": desktop.input_desktop,
        "session_id": desktop.session_id,
        "console_session_id": desktop.console_session_id,
        "user": desktop.user,
    }
    if desktop.windows:
        if desktop.window_station != REQUIRED_WINDOW_STATION or desktop.desktop != REQUIRED_DESKTOP:
            problems.append(
                f"input goes to {desktop.window_station}\\{desktop.desktop}, "
                f"not {REQUIRED_WINDOW_STATION}\\{REQUIRED_DESKTOP}"
            )
        if desktop.input_desktop != REQUIRED_DESKTOP:
            problems.append(f"the input desktop is {desktop.input_desktop or 'not accessible'} (locked or secure?)")
        if not desktop.session_id:
            problems.append("the process runs in session 0, not an interactive session")
    try:
        fields["driver_version"] = driver.version
        width, height = driver.screen_size()
        fields.update(screen_width=width, screen_height=height)
        start = read_pointer()
        if start is None:
            problems.append("the pointer position cannot be read before the move")
        fields["start"] = start
        target = prewarm_target((width, height), start)
        fields["target"] = target
        driver.move(*target)
        observed = _await_pointer(read_pointer, target, timeout_s, clock, wait)
        fields["observed"] = observed
        if observed != target:
            problems.append(f"the pointer is at {observed} after the move to {target}")
        home = _clamp(start, (width, height)) if start is not None else target
        driver.move(*home)
        returned = _await_pointer(read_pointer, home, timeout_s, clock, wait)
        fields["returned"] = returned
        if returned != home:
            problems.append(f"the pointer is at {returned} after the move back to {home}")
    except Exception as error:  # the prewarm reports, it never raises
        problems.append(f"{type(error).__name__}: {_one_line(error)}")
    elapsed_ms = round((clock() - started) * 1000.0, 1)
    return PrewarmResult(ok=not problems, problems=tuple(problems), at=at, elapsed_ms=max(0.0, elapsed_ms), **fields)


def _await_pointer(
    read_pointer: PointerReader, expected: Point, timeout_s: float, clock: Callable[[], float], wait: Callable[[], None]
) -> Point | None:
    deadline = clock() + timeout_s
    while True:
        seen = read_pointer()
        if seen == expected or clock() >= deadline:
            return seen
        wait()


def _clamp(point: Point, size: tuple[int, int]) -> Point:
    return (min(max(point[0], 0), size[0] - 1), min(max(point[1], 0), size[1] - 1))


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def desktop_info(display: str | None) -> DesktopInfo:
    """:class:`DesktopInfo` of this process (``display`` is the X display on Linux)."""
    if sys.platform == "win32":
        return _windows_desktop_info()
    session: int | None = None
    if display is not None:
        try:
            session = display_number(display)
        except IdentityError:
            session = None
    return DesktopInfo(None, None, None, session, None, _user(), windows=False)


def _user() -> str | None:
    try:
        return getpass.getuser()
    except Exception:  # no user name in the environment or the password database
        return None


def _windows_desktop_info() -> DesktopInfo:
    if sys.platform == "win32":  # repeated so that mypy checks ctypes.windll only for Windows
        import ctypes
        from ctypes import wintypes

        # Private library objects: the prototypes set here never leak into PyAutoGUI's calls.
        user32 = ctypes.WinDLL("user32", use_last_error=True)
        kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
        user32.GetProcessWindowStation.restype = wintypes.HANDLE
        user32.GetProcessWindowStation.argtypes = []
        user32.GetThreadDesktop.restype = wintypes.HANDLE
        user32.GetThreadDesktop.argtypes = [wintypes.DWORD]
        user32.OpenInputDesktop.restype = wintypes.HANDLE
        user32.OpenInputDesktop.argtypes = [wintypes.DWORD, wintypes.BOOL, wintypes.DWORD]
        user32.CloseDesktop.argtypes = [wintypes.HANDLE]
        user32.GetUserObjectInformationW.restype = wintypes.BOOL
        user32.GetUserObjectInformationW.argtypes = [
            wintypes.HANDLE,
            ctypes.c_int,
            ctypes.c_void_p,
            wintypes.DWORD,
            ctypes.POINTER(wintypes.DWORD),
        ]
        kernel32.GetCurrentThreadId.restype = wintypes.DWORD
        kernel32.WTSGetActiveConsoleSessionId.restype = wintypes.DWORD

        def object_name(handle: int | None) -> str | None:
            if not handle:
                return None
            buffer = ctypes.create_unicode_buffer(256)
            needed = wintypes.DWORD(0)
            uoi_name = 2
            if not user32.GetUserObjectInformationW(
                handle, uoi_name, buffer, ctypes.sizeof(buffer), ctypes.byref(needed)
            ):
                return None
            return str(buffer.value)

        station = object_name(user32.GetProcessWindowStation())
        thread_desktop = object_name(user32.GetThreadDesktop(kernel32.GetCurrentThreadId()))
        desktop_readobjects = 0x0001
        handle = user32.OpenInputDesktop(0, False, desktop_readobjects)
        input_desktop = object_name(handle)
        if handle:
            user32.CloseDesktop(handle)
        session = wintypes.DWORD(0)
        session_id = int(session.value) if kernel32.ProcessIdToSessionId(os.getpid(), ctypes.byref(session)) else None
        console = int(kernel32.WTSGetActiveConsoleSessionId())
        return DesktopInfo(
            station,
            thread_desktop,
            input_desktop,
            session_id,
            None if console == 0xFFFFFFFF else console,
            _user(),
            windows=True,
        )
    raise ReadinessError("not running on Windows")


class _WindowsPointer:
    """``GetCursorPos`` (None when the cursor cannot be read, e.g. on a locked desktop)."""

    def __call__(self) -> Point | None:
        if sys.platform == "win32":
            import ctypes
            from ctypes import wintypes

            point = wintypes.POINT()
            if not ctypes.windll.user32.GetCursorPos(ctypes.byref(point)):
                return None
            return (int(point.x), int(point.y))
        raise ReadinessError("not running on Windows")

    def close(self) -> None:
        return None


class _X11Pointer:
    """``XQueryPointer`` on the root window of ``display`` through a connection of its own."""

    def __init__(self, display: str) -> None:
        from Xlib import display as xdisplay

        from autocad_bench_broker.xenv import xlib_environment

        with xlib_environment(display):
            self._display = xdisplay.Display(display)

    def __call__(self) -> Point | None:
        reply = self._display.screen().root.query_pointer()
        return (int(reply.root_x), int(reply.root_y))

    def close(self) -> None:
        self._display.close()


def pointer_reader(display: str | None) -> _WindowsPointer | _X11Pointer:
    """The platform's independent pointer reader (call ``close()`` when done)."""
    if sys.platform == "win32":
        return _WindowsPointer()
    name = display if display is not None else os.environ.get("DISPLAY")
    if not name:
        raise ReadinessError("no X display to read the pointer from")
    return _X11Pointer(name)


# ---------------------------------------------------------------------------------------------
# Readiness record


class ReadinessRecord(BaseModel):
    """``ready.json``: the current-boot evidence ``Start-AutocadBenchBroker.ps1`` writes.

    Unknown fields are ignored (the record is written by PowerShell and read by several
    consumers); every field listed here is required unless it has a default.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    format: Literal["autocad-bench-readiness/1"]
    rollout_id: str
    batch_id: str | None = None
    attempt_id: str | None = None
    boot_id: str = Field(min_length=1)
    """The broker's own boot id (``/health``)."""
    booted_at: datetime
    """``Win32_OperatingSystem.LastBootUpTime`` when the record was written."""
    startup_id: str = Field(min_length=1)
    """Drawn by the launcher for this start and given to the broker (``--startup-id``)."""
    pid: int = Field(ge=1)
    ready_at: datetime
    interactive_session_id: int = Field(ge=0)
    console_session_id: int | None = None
    console_user: str
    desktop_width: int = Field(ge=1)
    desktop_height: int = Field(ge=1)
    window_station: str | None = None
    desktop: str | None = None
    broker_version: str
    input_driver_version: str
    manifest_sha256: Sha256Hex
    deployment_id: str
    broker_sha256: Sha256Hex
    broker_port: int = Field(ge=1, le=65535)
    prewarm_ok: bool
    prewarm: PrewarmResult | None = None
    manifest_verified: bool = False
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class BootInfo:
    """The current boot as far as it can be determined (None: not checkable here)."""

    boot_id: str | None
    booted_at: datetime | None


def current_boot() -> BootInfo:
    """Boot id (:func:`~autocad_bench_broker.identity.boot_id`) and boot time of this machine.

    Boot time: Windows, now minus ``GetTickCount64``; Linux, ``btime`` of ``/proc/stat``.
    Either part is None when it cannot be read.
    """
    try:
        identity: str | None = current_boot_id()
    except IdentityError:
        identity = None
    return BootInfo(identity, _boot_time())


def _boot_time() -> datetime | None:
    if sys.platform == "win32":
        import ctypes

        ticks_ms = int(ctypes.windll.kernel32.GetTickCount64())
        return datetime.fromtimestamp(time.time() - ticks_ms / 1000.0, UTC)
    try:
        for line in Path("/proc/stat").read_text(encoding="ascii").splitlines():
            if line.startswith("btime "):
                return datetime.fromtimestamp(int(line.split()[1]), UTC)
    except (OSError, ValueError):
        return None
    return None


def readiness_problems(
    record: ReadinessRecord,
    boot: BootInfo,
    *,
    now: datetime | None = None,
    tolerance_s: float = BOOT_TOLERANCE_S,
) -> list[str]:
    """Why ``record`` does not belong to the boot ``boot`` (empty: it does, as far as checkable)."""
    tolerance = timedelta(seconds=tolerance_s)
    now = now or datetime.now(UTC)
    problems = []
    if boot.boot_id is not None and record.boot_id != boot.boot_id:
        problems.append(f"the record belongs to boot {record.boot_id}, this is boot {boot.boot_id}")
    if boot.booted_at is not None and abs(record.booted_at - boot.booted_at) > tolerance:
        problems.append(
            f"the record's boot time {record.booted_at.isoformat()} is not this boot's {boot.booted_at.isoformat()}"
        )
    if record.ready_at < record.booted_at:
        problems.append("the record was written before the boot it names")
    if boot.booted_at is not None and record.ready_at < boot.booted_at - tolerance:
        problems.append("the record was written before this boot")
    if record.ready_at > now + tolerance:
        problems.append("the record's ready_at lies in the future")
    return problems


def parse_readiness(raw: bytes | str) -> ReadinessRecord:
    """Parse a readiness record (a UTF-8 BOM, as Windows PowerShell may write, is accepted)."""
    text = raw.decode("utf-8-sig") if isinstance(raw, bytes) else raw.removeprefix("\ufeff")
    try:
        return ReadinessRecord.model_validate_json(text)
    except ValidationError as error:
        raise ReadinessError(f"the readiness record is invalid: {_first_problem(error)}") from None


def load_readiness(
    path: Path,
    *,
    boot: BootInfo | None = None,
    now: datetime | None = None,
    tolerance_s: float = BOOT_TOLERANCE_S,
) -> ReadinessRecord:
    """Read ``path`` and check it belongs to the current boot; raises :class:`ReadinessError`.

    ``boot`` defaults to :func:`current_boot`; a part of it that is None is not checked
    (pass ``BootInfo(server_boot_id, None)`` to compare with a known boot id only).
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ReadinessError("no readiness record yet") from None
    except OSError as error:
        raise ReadinessError(f"cannot read the readiness record: {error.strerror or error}") from None
    record = parse_readiness(raw)
    problems = readiness_problems(
        record, boot if boot is not None else current_boot(), now=now, tolerance_s=tolerance_s
    )
    if problems:
        raise ReadinessError("; ".join(problems))
    return record


def readiness_report(
    path: Path,
    *,
    status: Path | None = None,
    wait_s: float = 0.0,
    poll_s: float = 1.0,
    boot: BootInfo | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """What the AWS image's ``readiness.ps1`` prints (``ReadinessReport`` of the aws backend).

    Waits at most ``wait_s`` for a record of the current boot. ``readiness`` is that record,
    or else the last parseable record (even of another boot: the controller then names the
    stale boot), or None; ``problems`` says why the record is not (yet) current, followed by
    the launcher's failure from ``status`` (``start-status.json``) when it recorded one.
    """
    boot = boot if boot is not None else current_boot()
    deadline = clock() + wait_s
    while True:
        record: ReadinessRecord | None = None
        try:
            record = parse_readiness(path.read_bytes())
            problems = readiness_problems(record, boot)
        except FileNotFoundError:
            problems = ["no readiness record yet"]
        except (OSError, ReadinessError) as error:
            problems = [str(error)]
        if not problems or clock() >= deadline:
            break
        sleep(min(poll_s, max(0.0, deadline - clock())))
    if problems and status is not None:
        problems.extend(_status_problem(status))
    return {
        "boot_id": boot.boot_id,
        "booted_at": boot.booted_at.isoformat() if boot.booted_at is not None else None,
        "readiness": record.model_dump(mode="json") if record is not None else None,
        "problems": problems,
    }


def _status_problem(path: Path) -> list[str]:
    """The launcher's recorded failure (``start-status.json``), if any."""
    try:
        status = json.loads(path.read_bytes().decode("utf-8-sig"))
    except (OSError, ValueError):
        return []
    if not isinstance(status, dict) or not status.get("error"):
        return []
    return [f"launcher {status.get('phase', 'unknown')}: {status['error']}"]


def _first_problem(error: ValidationError) -> str:
    item = error.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in item["loc"]) or "document"
    return f"{where}: {item['msg']}"


def health_fields(path: Path | None, boot_id: str) -> dict[str, Any]:
    """The optional ``/health`` fields from the readiness record at ``path``.

    Only a record of boot ``boot_id`` (the broker's own) is reported; a missing, malformed or
    stale record gives None for every field.
    """
    empty: dict[str, Any] = {"deployment_id": None, "readiness_startup_id": None, "pointer_prewarm_ok": None}
    if path is None:
        return empty
    try:
        record = load_readiness(path, boot=BootInfo(boot_id, None))
    except ReadinessError:
        return empty
    return {
        "deployment_id": record.deployment_id,
        "readiness_startup_id": record.startup_id,
        "pointer_prewarm_ok": record.prewarm_ok,
    }


__all__ = [
    "BOOT_TOLERANCE_S",
    "MANIFEST_FORMAT",
    "MANIFEST_PATH",
    "PREWARM_FORMAT",
    "READINESS_FORMAT",
    "READINESS_PATH",
    "BootInfo",
    "DeploymentManifest",
    "DesktopInfo",
    "FileDigest",
    "InputDriverInfo",
    "ManifestCheck",
    "ManifestWrite",
    "PrewarmResult",
    "ReadinessError",
    "ReadinessRecord",
    "WheelInfo",
    "build_manifest",
    "current_boot",
    "desktop_info",
    "distribution_files",
    "distribution_sha256",
    "health_fields",
    "load_manifest",
    "load_readiness",
    "manifest_bytes",
    "parse_readiness",
    "pointer_reader",
    "prewarm",
    "prewarm_target",
    "readiness_problems",
    "readiness_report",
    "sha256_file",
    "verify_manifest",
    "write_json_atomic",
    "write_manifest",
]
