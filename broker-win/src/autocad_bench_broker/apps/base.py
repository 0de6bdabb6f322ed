"""The application adapter interface and the evidence it returns.

An :class:`ApplicationAdapter` owns one CAD program instance for one rollout. The broker
server drives it through four steps:

1. ``launch(template, attempt_path)``: restore the task template to the controller-owned
   attempt path and start the program on it (clean process boundary first);
2. ``verify_ready()``: collect the handoff evidence (process, window, dialogs, stable first
   frame); the model gets the desktop only when ``evidence.ok``;
3. ``checkpoint()``: the trusted save of the drawing to the attempt path, retried and
   accepted only when a stable, signature-valid file exists;
4. ``kill()``: end the program's whole process tree within a bound and prove it is gone.

:meth:`ApplicationAdapter.handoff` combines kill, launch and verify into the bounded "two
complete launches" reset of the sandbox contract.

Results are frozen pydantic models, so the server can put them on the wire as they are.
Operations that run after the model may have touched the desktop (``checkpoint``, ``kill``)
report failure in their result instead of raising.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, computed_field, model_validator

from autocad_bench.models import StrictModel
from autocad_bench_broker.drivers.capture import Frame
from autocad_bench_broker.errors import AppError


class ResultModel(StrictModel):
    """A strict, frozen result whose computed fields (``ok``, ``gone``) are serialized for
    readers and ignored when the JSON is parsed back, so results round-trip exactly."""

    @model_validator(mode="before")
    @classmethod
    def _ignore_computed_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            computed = cls.model_computed_fields
            return {key: value for key, value in data.items() if key not in computed}
        return data


class WindowGeometry(StrictModel):
    """Position and size of a window in screen pixels."""

    x: int
    y: int
    width: int
    height: int


class HandoffEvidence(ResultModel):
    """Everything ``verify_ready`` observed; ``ok`` is true exactly when ``failures`` is empty.

    ``stale_pids`` are other instances of the application that belong to this desktop;
    ``dialogs`` lists the titles of every visible dialog, ``unknown_dialogs`` those the
    adapter does not recognise. ``initial_frame_sha256`` is the SHA-256 of the raw RGB
    pixels of the stable first frame (the PNG digest is computed when it is encoded).
    """

    app: str
    pid: int | None
    process_alive: bool
    stale_pids: tuple[int, ...] = ()
    window_id: int | None = None
    window_title: str | None = None
    window_geometry: WindowGeometry | None = None
    display_size: tuple[int, int]
    maximized: bool = False
    foreground: bool = False
    document_loaded: bool = False
    dialogs: tuple[str, ...] = ()
    unknown_dialogs: tuple[str, ...] = ()
    initial_frame_stable: bool = False
    initial_frame_sha256: str | None = None
    elapsed_s: float = 0.0
    failures: tuple[str, ...] = ()

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        return not self.failures


@dataclass(frozen=True, slots=True)
class ReadyResult:
    """``verify_ready`` output: the evidence plus the stable first frame (None if none)."""

    evidence: HandoffEvidence
    frame: Frame | None

    @property
    def ok(self) -> bool:
        return self.evidence.ok


class HandoffResult(ResultModel):
    """Outcome of :meth:`ApplicationAdapter.handoff`: every launch attempt's evidence."""

    attempts: tuple[HandoffEvidence, ...]
    launch_errors: tuple[str, ...] = ()

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        return bool(self.attempts) and self.attempts[-1].ok


class SaveAttempt(ResultModel):
    """One try of a checkpoint save and why it failed (``error`` None when it succeeded)."""

    number: int
    method: str
    error: str | None = None
    dialogs_closed: tuple[str, ...] = ()
    elapsed_s: float


class CheckpointResult(ResultModel):
    """The trusted save: ``ok`` only when a stable, signature-valid drawing is at ``path``.

    ``signature`` is the format marker that was checked (``"AC1021"`` for an R2007 DWG,
    ``"DXF AC1021"`` for an ASCII DXF of that version); ``sha256``/``size_bytes`` describe
    the accepted file.
    """

    ok: bool
    path: str
    size_bytes: int | None = None
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    signature: str | None = None
    attempts: tuple[SaveAttempt, ...] = ()
    error: str | None = None
    elapsed_s: float = 0.0


class KillResult(ResultModel):
    """What ``kill`` did and whether any process of the application survived."""

    pid: int | None
    signal_sent: Literal["none", "SIGTERM", "SIGKILL", "force"]
    """Strongest step needed: POSIX signals on Linux, ``force`` (TerminateProcess) on Windows."""
    remaining_pids: tuple[int, ...] = ()
    elapsed_s: float = 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def gone(self) -> bool:
        return not self.remaining_pids


class ApplicationAdapter(ABC):
    """One CAD program instance of one rollout (see the module docstring for the lifecycle).

    Implementations are not thread-safe: the server calls one method at a time.
    """

    name: str = "application"

    @property
    @abstractmethod
    def pid(self) -> int | None:
        """PID of the running program, None before launch and after kill."""

    @property
    @abstractmethod
    def attempt_path(self) -> Path | None:
        """The controller-owned drawing path of the current launch."""

    @abstractmethod
    def launch(self, template: Path, attempt_path: Path) -> None:
        """Restore ``template`` to ``attempt_path`` and start the program on it.

        Kills stale instances of this desktop first. Raises :class:`AppLaunchError` if the
        template is unreadable, the program cannot start or its window does not appear in
        time (the half-started process is killed before raising).
        """

    @abstractmethod
    def verify_ready(self) -> ReadyResult:
        """Poll (bounded) until the handoff conditions hold; return the evidence either way."""

    @abstractmethod
    def checkpoint(self) -> CheckpointResult:
        """Save the drawing to the attempt path through the trusted path; never raises."""

    @abstractmethod
    def kill(self) -> KillResult:
        """End the program's process tree within a bound; never raises."""

    def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release the adapter's own resources (connections); does not stop the program."""

    def handoff(
        self,
        template: Path,
        attempt_path: Path,
        *,
        launches: int = 2,
        on_attempt: Callable[[int, HandoffEvidence | None], None] | None = None,
    ) -> tuple[HandoffResult, ReadyResult | None]:
        """Kill, restore and launch, verify; repeat up to ``launches`` complete times.

        Returns the per-attempt evidence and the successful :class:`ReadyResult` (None when
        every launch failed, in which case the program has been killed). ``on_attempt`` is
        called after each attempt (with None when the launch itself raised).
        """
        if launches < 1:
            raise ValueError("launches must be at least 1")
        evidence: list[HandoffEvidence] = []
        errors: list[str] = []
        for number in range(1, launches + 1):
            self.kill()
            try:
                self.launch(template, attempt_path)
            except AppError as exc:
                errors.append(f"launch {number}: {exc}")
                if on_attempt is not None:
                    on_attempt(number, None)
                continue
            ready = self.verify_ready()
            evidence.append(ready.evidence)
            if on_attempt is not None:
                on_attempt(number, ready.evidence)
            if ready.ok:
                return HandoffResult(attempts=tuple(evidence), launch_errors=tuple(errors)), ready
        self.kill()
        return HandoffResult(attempts=tuple(evidence), launch_errors=tuple(errors)), None


def monotonic_elapsed(started: float) -> float:
    """Seconds since ``started`` (a ``time.monotonic()`` value), rounded to milliseconds."""
    return round(time.monotonic() - started, 3)
