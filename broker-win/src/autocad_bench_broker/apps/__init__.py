"""Application adapters: launch, verify, checkpoint and kill the CAD program of a rollout.

:class:`ApplicationAdapter` is the interface; :class:`LibreCADAdapter` (Linux/Xvfb stand-in)
and :class:`AutoCADAdapter` (Windows, COM) implement it. Importing this package loads no
platform library: python-xlib and pywin32 are imported when an adapter first needs them.
"""

from autocad_bench_broker.apps.autocad import AutoCADAdapter, AutoCADConfig
from autocad_bench_broker.apps.base import (
    ApplicationAdapter,
    CheckpointResult,
    HandoffEvidence,
    HandoffResult,
    KillResult,
    ReadyResult,
    SaveAttempt,
    WindowGeometry,
)
from autocad_bench_broker.apps.librecad import LibreCADAdapter, LibreCADConfig

__all__ = [
    "ApplicationAdapter",
    "AutoCADAdapter",
    "AutoCADConfig",
    "CheckpointResult",
    "HandoffEvidence",
    "HandoffResult",
    "KillResult",
    "LibreCADAdapter",
    "LibreCADConfig",
    "ReadyResult",
    "SaveAttempt",
    "WindowGeometry",
]
