"""The per-rollout provider session."""

from __future__ import annotations

import abc

from autocad_bench.models import JsonObject
from autocad_bench.providers.models import ModelTurn, Observation


class ProviderSession(abc.ABC):
    """Turns observations into action turns for one rollout, keeping the model-visible history.

    :meth:`next_turn` makes exactly one provider request, with SDK retries disabled: the
    core retry accounting decides whether and when to call it again. A failed request raises
    :class:`~autocad_bench.providers.models.ProviderRequestError` with its classification and
    must leave the history unchanged, so calling :meth:`next_turn` again with the same
    observation retries the same unconsumed turn.
    """

    @abc.abstractmethod
    async def next_turn(self, observation: Observation) -> ModelTurn:
        """Send the history plus ``observation``; return the model's turn."""

    def shrink(self) -> bool:
        """Rewrite the pending request to fewer bytes after a 413; ``False`` if it cannot.

        The harness retries a too-large request once, and only after this returned ``True``:
        an identical oversized payload is never resent.
        """
        return False

    @abc.abstractmethod
    def checkpoint(self) -> JsonObject:
        """The exact model-visible state (JSON; images as checksummed artifact references)."""

    async def aclose(self) -> None:  # noqa: B027 - optional override
        """Release connections; called once when the rollout ends."""
