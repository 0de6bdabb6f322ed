"""Shared vocabulary of the readiness package: formats, image paths, limits and the error type.

Every other module of :mod:`autocad_bench_broker.readiness` builds on these constants, the
strict model base and :class:`ReadinessError`, the one error they raise for a missing,
malformed or stale manifest or record. Nothing here touches the file system or the desktop.
"""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from autocad_bench.models import IDENTIFIER_RE
from autocad_bench_broker.errors import BrokerError

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


def _first_problem(error: ValidationError) -> str:
    item = error.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in item["loc"]) or "document"
    return f"{where}: {item['msg']}"
