"""The built-in ``scripted`` provider: replays action batches from a JSONL file.

Each line of the script is one model turn: the argument object of a ``computer_action``
call (``{"actions": [...]}``). When the script runs out the provider ends the rollout with
a ``done`` action. It needs no credentials, so the whole pipeline (desktop, broker,
traces, evaluation) runs end to end without an API key; replaying a task's reference
solution is how the task suite proves every task solvable.

Options: exactly one of ``script`` (path, relative to the configuration file) or
``scripts`` (a non-empty list of such paths), optional ``latency_s`` (simulated model
latency per turn, for load tests). With ``scripts`` the script depends on the rollout's
trial (see ``trials`` in the batch configuration): trial n replays
``scripts[(n - 1) % len(scripts)]``, so repeated trials of one assignment can exercise
different behaviour. Every listed script is read and checked at admission.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Annotated, ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from autocad_bench.errors import Problem
from autocad_bench.models import JsonObject
from autocad_bench.providers.base import ModelProvider
from autocad_bench.providers.models import (
    Credentials,
    ModelSpec,
    ModelTurn,
    Observation,
    SessionRequest,
    TokenUsage,
)
from autocad_bench.providers.session import ProviderSession


class ScriptedOptions(BaseModel):
    """``provider_options`` of the ``scripted`` provider (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    script: str | None = Field(default=None, min_length=1)
    scripts: list[Annotated[str, Field(min_length=1)]] | None = Field(default=None, min_length=1)
    latency_s: float = Field(default=0.0, ge=0, le=600)

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.script is None) == (self.scripts is None):
            raise PydanticCustomError(
                "one_script_source",
                'give exactly one of "script" (one JSONL file) or "scripts" (a list of them; trial n '
                "replays scripts[(n - 1) % len(scripts)])")
        return self

    @property
    def listed(self) -> list[tuple[str, str]]:
        """(option path, script) for every script named: ``("script", p)`` or ``("scripts[i]", p)``."""
        if self.scripts is not None:
            return [(f"scripts[{i}]", script) for i, script in enumerate(self.scripts)]
        assert self.script is not None
        return [("script", self.script)]

    def for_trial(self, trial: int) -> str:
        """The script trial ``trial`` (1-based) replays."""
        if self.scripts is not None:
            return self.scripts[(trial - 1) % len(self.scripts)]
        assert self.script is not None
        return self.script


def _script_path(model: ModelSpec, script: str) -> Path:
    path = Path(script)
    if not path.is_absolute() and model.base_dir is not None:
        path = model.base_dir / path
    return path


def load_script(path: Path) -> list[JsonObject | None]:
    """Read a script: one JSON value per non-empty line (kept raw: the harness validates it)."""
    turns: list[JsonObject | None] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            turns.append(json.loads(line))
        except ValueError as error:
            raise ValueError(f"{path}:{number}: not JSON: {error}") from None
    return turns


class ScriptedProvider(ModelProvider):
    """Replays JSONL scripts of ``computer_action`` arguments; needs no credentials."""

    name: ClassVar[str] = "scripted"
    options_model: ClassVar[type[ScriptedOptions]] = ScriptedOptions

    def check_options(self, model: ModelSpec, options: ScriptedOptions, location: str) -> list[Problem]:
        """Every listed script exists (relative to the configuration file) and is JSONL."""
        problems = []
        for where, script in options.listed:
            path = _script_path(model, script)
            try:
                load_script(path)
            except FileNotFoundError:
                problems.append(Problem(f"{location}.provider_options.{where}", f"script not found: {path}"))
            except (OSError, ValueError) as error:
                problems.append(Problem(f"{location}.provider_options.{where}", str(error)))
        return problems

    def open_session(self, request: SessionRequest, credentials: Credentials) -> ProviderSession:
        options = ScriptedOptions.model_validate(request.model.options)
        path = _script_path(request.model, options.for_trial(request.trial))
        return ScriptedSession(load_script(path), options.latency_s, request.resume_state)


class ScriptedSession(ProviderSession):
    """Returns the script's turns in order; ``position`` is the whole model-visible state."""

    def __init__(self, turns: list[JsonObject | None], latency_s: float,
                 resume_state: JsonObject | None) -> None:
        self._turns = turns
        self._latency_s = latency_s
        position = (resume_state or {}).get("position", 0)
        self._position = position if isinstance(position, int) else 0

    async def next_turn(self, observation: Observation) -> ModelTurn:
        if self._latency_s:
            await asyncio.sleep(self._latency_s)
        index = self._position
        # Past the end of the script the model "says" done, like a model that has finished.
        done: JsonObject = {"actions": [{"type": "done"}]}
        action_input = self._turns[index] if index < len(self._turns) else done
        self._position += 1
        digest = hashlib.sha256(f"{index}".encode()).hexdigest()[:16]
        return ModelTurn(
            tool_use_id=f"scripted-{index}-{digest}",
            action_input=action_input,
            usage=TokenUsage(),
            response_id=f"scripted-{index}",
            stop_reason="tool_use",
        )

    def checkpoint(self) -> JsonObject:
        return {"position": self._position}
