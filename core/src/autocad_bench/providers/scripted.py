"""The built-in ``scripted`` provider: replays action batches from a JSONL file.

Each line of the script is one model turn: the argument object of a ``computer_action``
call (``{"actions": [...]}``). When the script runs out the provider ends the rollout with
a ``done`` action. It needs no credentials, so the whole pipeline (desktop, broker,
traces, evaluation) runs end to end without an API key; replaying a task's reference
solution is how the task suite proves every task solvable.

Options: exactly one of ``script`` (path, relative to the configuration file),
``scripts`` (a non-empty list of such paths) or ``task_script`` (a file name inside the
folder of the task the rollout runs, such as ``"solution.librecad.jsonl"``, the reference
solution every LibreCAD task ships: one configuration entry can then replay each task's own
solution, with no path into the installed package), and optional ``latency_s`` (simulated
model latency per turn, for load tests). With ``scripts`` the script depends on the
rollout's trial (see ``trials`` in the batch configuration): trial n replays
``scripts[(n - 1) % len(scripts)]``, so repeated trials of one assignment can exercise
different behaviour. Every script a batch will replay is read and checked at admission.
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
    task_script: str | None = Field(
        default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="a file name in the rollout's task folder, e.g. solution.librecad.jsonl")
    latency_s: float = Field(default=0.0, ge=0, le=600)

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if sum(source is not None for source in (self.script, self.scripts, self.task_script)) != 1:
            raise PydanticCustomError(
                "one_script_source",
                'give exactly one of "script" (one JSONL file), "scripts" (a list of them; trial n '
                'replays scripts[(n - 1) % len(scripts)]) or "task_script" (a file in the task\'s folder, '
                'e.g. "solution.librecad.jsonl")')
        return self

    @property
    def listed(self) -> list[tuple[str, str]]:
        """(option path, script) for every script named by path: ``("script", p)`` or
        ``("scripts[i]", p)``; empty for ``task_script``, which depends on the task."""
        if self.scripts is not None:
            return [(f"scripts[{i}]", script) for i, script in enumerate(self.scripts)]
        if self.script is not None:
            return [("script", self.script)]
        return []

    def for_trial(self, trial: int) -> str:
        """The script (by path) trial ``trial`` (1-based) replays."""
        if self.scripts is not None:
            return self.scripts[(trial - 1) % len(self.scripts)]
        assert self.script is not None
        return self.script


def _script_path(model: ModelSpec, script: str) -> Path:
    path = Path(script)
    if not path.is_absolute() and model.base_dir is not None:
        path = model.base_dir / path
    return path


def _task_script_path(model: ModelSpec, name: str) -> Path | None:
    """``name`` inside the rollout's task folder; ``None`` when the batch has no task directory."""
    return model.task_dir / name if model.task_dir is not None else None


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
        listed = [(where, _script_path(model, script)) for where, script in options.listed]
        if options.task_script is not None:
            in_task = _task_script_path(model, options.task_script)
            if in_task is None:
                problems.append(Problem(f"{location}.provider_options.task_script",
                                        "task_script needs the batch's task directory (set task_suite or tasks_dir)"))
            else:
                listed.append(("task_script", in_task))
        for where, path in listed:
            try:
                load_script(path)
            except FileNotFoundError:
                problems.append(Problem(f"{location}.provider_options.{where}", f"script not found: {path}"))
            except (OSError, ValueError) as error:
                problems.append(Problem(f"{location}.provider_options.{where}", str(error)))
        return problems

    def open_session(self, request: SessionRequest, credentials: Credentials) -> ProviderSession:
        options = ScriptedOptions.model_validate(request.model.options)
        if options.task_script is not None:
            in_task = _task_script_path(request.model, options.task_script)
            if in_task is None:
                raise ValueError("task_script needs the rollout's task folder, and this rollout has none")
            path = in_task
        else:
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
