"""The evaluator plugin contract: what core asks of the distribution that scores drawings.

Core never imports an evaluator. The evaluation stage, admission's gold-cache check and
the ``tasks`` command find the evaluator named in the configuration
(``evaluation.evaluator``, default :data:`DEFAULT_EVALUATOR`) through the entry-point
group ``autocad_bench.evaluators`` and call its hooks (see :mod:`autocad_bench.hookspecs`).
The shipped one is ``autocad-bench-evaluator`` (extra ``[evaluator]``).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import click
from pydantic import SecretStr

from autocad_bench.errors import MissingExtraError, PluginError
from autocad_bench.hookspecs import EVALUATOR_HOOKS, hookimpl
from autocad_bench.models import StrictModel
from autocad_bench.plugins.base import PluginBase
from autocad_bench.plugins.host import PluginHandle, PluginHost

DEFAULT_EVALUATOR = "standard"
"""The evaluator a configuration gets when it names none (``autocad-bench-evaluator``)."""


class DrawingEvaluationRequest(StrictModel):
    """One rollout's drawing to score, and where the verdict goes.

    ``candidate`` is the checkpointed drawing (``None`` when the rollout saved none: a valid
    verdict of score 0). ``judge_api_key`` is read from the *backend's* environment by the
    evaluation stage; the model child never had it, and it is never written anywhere.
    """

    candidate: Path | None
    task_id: str
    gold_cache: Path
    evaluator_version: str
    output_dir: Path
    task_prompt: str | None = None
    judge_model: str | None = None
    judge_api_key: SecretStr | None = None


class GoldCacheCheckRequest(StrictModel):
    """The gold-cache entries a batch needs, for admission's read-only check."""

    root: Path
    evaluator_version: str
    task_ids: tuple[str, ...]


class EvaluatorPlugin(PluginBase):
    """Subclass this to publish an evaluator in the ``autocad_bench.evaluators`` group.

    Implement :meth:`evaluate_drawing` and :meth:`check_gold_cache`; override
    :meth:`evaluator_commands` to add CLI subcommands.
    """

    hook_names: ClassVar[tuple[str, ...]] = EVALUATOR_HOOKS

    @hookimpl
    def evaluator_commands(self) -> list[click.Command]:
        """No extra commands by default."""
        return []


def select_evaluator(name: str = DEFAULT_EVALUATOR, host: PluginHost | None = None) -> PluginHandle:
    """The evaluator plugin called ``name``, loaded once per host.

    Raises :class:`~autocad_bench.errors.MissingExtraError` when the default evaluator is
    not installed, :class:`~autocad_bench.errors.PluginError` for any other unknown or
    broken evaluator.
    """
    host = host if host is not None else PluginHost()
    try:
        return host.evaluator(name)
    except MissingExtraError:
        raise
    except PluginError:
        if name == DEFAULT_EVALUATOR and DEFAULT_EVALUATOR not in host.installed_names("evaluators"):
            raise MissingExtraError("the evaluator", "evaluator") from None
        raise
