"""Base class for observers: plugins that watch batches without changing them."""

from __future__ import annotations

from typing import ClassVar

from autocad_bench.events import BatchEvent, ModelTurnEvent, RolloutStateEvent
from autocad_bench.hookspecs import OBSERVER_HOOKS
from autocad_bench.plugins.base import PluginBase


class Observer(PluginBase):
    """Override any subset of the observer hooks; every registered observer gets every event.

    Observers run on controller and worker threads: return quickly and never raise (an
    exception is logged and does not stop the batch or other observers).
    """

    hook_names: ClassVar[tuple[str, ...]] = OBSERVER_HOOKS

    def batch_started(self, event: BatchEvent) -> None:
        return None

    def batch_finished(self, event: BatchEvent) -> None:
        return None

    def rollout_state_changed(self, event: RolloutStateEvent) -> None:
        return None

    def model_turn_recorded(self, event: ModelTurnEvent) -> None:
        return None
