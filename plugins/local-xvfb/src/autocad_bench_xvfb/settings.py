"""``infrastructure.settings`` of the local-xvfb backend, and where its files live.

Every field has a default, so ``"settings": {}`` is a complete configuration on a machine
with the Debian packages installed. The timeouts are the backend's rows of the retry
matrix (``docs/local-xvfb.md`` lists them); each has an upper bound so no configuration
can make a wait unbounded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

STATE_DIR_ENV = "AUTOCAD_BENCH_STATE_DIR"
"""The core's per-user state directory variable; worker records go to ``<it>/local-xvfb``."""

DEFAULT_STATE_DIR = Path("~/.local/state/autocad-bench")

Tool = Literal["xvfb", "librecad", "xdotool"]
"""The system programs the backend needs."""

DESKTOP_WIDTH = 1920
DESKTOP_HEIGHT = 1080
DESKTOP_DEPTH = 24


class LocalXvfbSettings(BaseModel):
    """``infrastructure.settings`` of ``local-xvfb`` (unknown keys are rejected)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    app: Literal["librecad"] = Field(default="librecad", description="the CAD application the broker drives")
    xvfb_path: str | None = Field(default=None, min_length=1,
                                  description="Xvfb executable (name on PATH or absolute path); default Xvfb")
    librecad_path: str | None = Field(default=None, min_length=1,
                                      description="librecad executable; default librecad on PATH")
    xdotool_path: str | None = Field(default=None, min_length=1,
                                     description="xdotool executable; default xdotool on PATH")
    state_dir: str | None = Field(
        default=None, min_length=1,
        description="absolute directory for durable worker records; default "
        "$AUTOCAD_BENCH_STATE_DIR/local-xvfb or ~/.local/state/autocad-bench/local-xvfb",
    )
    runtime_dir: str | None = Field(
        default=None, min_length=1,
        description="absolute directory for per-rollout private runtime directories; default "
        "<batch output>/runtime",
    )
    xvfb_timeout_s: float = Field(default=10.0, gt=0, le=60, description="Xvfb must report its display within this")
    launch_timeout_s: float = Field(default=30.0, gt=0, le=300,
                                    description="the broker must write its ready file within this")
    handoff_timeout_s: float = Field(default=10.0, gt=0, le=120,
                                     description="authenticated /health must identify the broker within this")
    launch_attempts: int = Field(default=2, ge=1, le=3,
                                 description="fresh desktops tried before the rollout fails (before any model call)")
    broker_shutdown_s: float = Field(default=10.0, gt=0, le=60,
                                     description="SIGTERM grace of the broker (it stops the application itself)")
    settle_s: float = Field(default=3.0, gt=0, le=30,
                            description="after the kills, every process of the rollout must be gone within this")
    cpus_per_rollout: float = Field(default=0.5, gt=0, le=64, description="CPU share one rollout needs (capacity)")
    memory_per_rollout_mb: int = Field(default=512, ge=64, le=65536,
                                       description="memory one rollout needs (capacity)")

    @field_validator("state_dir", "runtime_dir")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not Path(value).expanduser().is_absolute():
            raise ValueError("must be an absolute path (or start with ~)")
        return value

    @field_validator("xvfb_path", "librecad_path", "xdotool_path")
    @classmethod
    def _executable(cls, value: str | None) -> str | None:
        if value is not None and os.sep in value and not Path(value).expanduser().is_absolute():
            raise ValueError("must be a command name on PATH or an absolute path")
        return value

    # --- resolved values ----------------------------------------------------------------------

    def executable(self, tool: Tool) -> str:
        """The configured command for ``tool`` (``~`` expanded), or its Debian name."""
        configured = {"xvfb": self.xvfb_path, "librecad": self.librecad_path, "xdotool": self.xdotool_path}[tool]
        default = {"xvfb": "Xvfb", "librecad": "librecad", "xdotool": "xdotool"}[tool]
        return str(Path(configured).expanduser()) if configured and os.sep in configured else configured or default

    def resolved_state_dir(self, environ: Mapping[str, str] | None = None) -> Path:
        """Where worker records live (absolute; not created here)."""
        if self.state_dir is not None:
            return Path(self.state_dir).expanduser()
        env = os.environ if environ is None else environ
        base = Path(env[STATE_DIR_ENV]) if env.get(STATE_DIR_ENV) else DEFAULT_STATE_DIR
        return (base.expanduser() / "local-xvfb").absolute()

    def runtime_root(self, rollout_output_dir: Path) -> Path:
        """The runtime area beside the rollout directories (``<batch>/runtime``).

        Kept out of ``rollouts/`` so a leftover is never mistaken for a rollout; every
        rollout gets its own fresh directory inside it.
        """
        if self.runtime_dir is not None:
            return Path(self.runtime_dir).expanduser()
        output = rollout_output_dir.absolute()
        if output.parent.name == "rollouts":
            return output.parent.parent / "runtime"
        return output.parent / "runtime"
