"""The broker's structured event log (``GET /events``); it lives in the shared protocol layer.

See :mod:`autocad_bench.broker.service.events`. Kinds the real broker adds to the shared ones:
``startup``, ``reset_attempt`` (one per launch of a reset), ``reset_failed``,
``checkpoint_failed`` and ``shutdown``. The log is mirrored to ``events.jsonl`` under the
broker's runtime directory.
"""

from autocad_bench.broker.service.events import EventLog

__all__ = ["EventLog"]
