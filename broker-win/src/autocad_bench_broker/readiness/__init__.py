"""Deployment manifest, pointer prewarm and current-boot readiness record of a Windows image.

``docs/windows-image.md`` describes the deployment; this package is its testable Python half.
The PowerShell scripts in ``autocad_bench_broker/windows/`` (copied out with
``autocad-bench-broker windows-scripts DIR``) call it through the broker's CLI:

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

The package has one module per job; everything is re-exported here, so
``autocad_bench_broker.readiness.<name>`` keeps working:

- :mod:`~autocad_bench_broker.readiness.common`: formats, image paths, limits, :class:`ReadinessError`;
- :mod:`~autocad_bench_broker.readiness.manifest`: the deployment manifest;
- :mod:`~autocad_bench_broker.readiness.probes`: desktop, pointer and boot probes of this machine;
- :mod:`~autocad_bench_broker.readiness.prewarm`: the pointer prewarm;
- :mod:`~autocad_bench_broker.readiness.record`: the readiness record and its current-boot check.
"""

from __future__ import annotations

from autocad_bench_broker.readiness.common import (
    BOOT_TOLERANCE_S,
    BROKER_DISTRIBUTION,
    DEFAULT_DATA_ROOT,
    INPUT_DRIVER_DISTRIBUTION,
    MANIFEST_FORMAT,
    MANIFEST_PATH,
    PREWARM_FORMAT,
    READINESS_FORMAT,
    READINESS_PATH,
    REQUIRED_DESKTOP,
    REQUIRED_WINDOW_STATION,
    Point,
    ReadinessError,
    Sha256Hex,
)
from autocad_bench_broker.readiness.manifest import (
    DeploymentManifest,
    FileDigest,
    InputDriverInfo,
    ManifestCheck,
    ManifestWrite,
    WheelInfo,
    build_manifest,
    distribution_files,
    distribution_sha256,
    load_manifest,
    manifest_bytes,
    sha256_file,
    verify_manifest,
    write_json_atomic,
    write_manifest,
)
from autocad_bench_broker.readiness.prewarm import (
    PrewarmResult,
    prewarm,
    prewarm_target,
)
from autocad_bench_broker.readiness.probes import (
    BootInfo,
    DesktopInfo,
    PointerReader,
    current_boot,
    desktop_info,
    pointer_reader,
)
from autocad_bench_broker.readiness.record import (
    ReadinessRecord,
    health_fields,
    load_readiness,
    parse_readiness,
    readiness_problems,
    readiness_report,
)

__all__ = [
    "BOOT_TOLERANCE_S",
    "BROKER_DISTRIBUTION",
    "DEFAULT_DATA_ROOT",
    "INPUT_DRIVER_DISTRIBUTION",
    "MANIFEST_FORMAT",
    "MANIFEST_PATH",
    "PREWARM_FORMAT",
    "READINESS_FORMAT",
    "READINESS_PATH",
    "REQUIRED_DESKTOP",
    "REQUIRED_WINDOW_STATION",
    "BootInfo",
    "DeploymentManifest",
    "DesktopInfo",
    "FileDigest",
    "InputDriverInfo",
    "ManifestCheck",
    "ManifestWrite",
    "Point",
    "PointerReader",
    "PrewarmResult",
    "ReadinessError",
    "ReadinessRecord",
    "Sha256Hex",
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
