"""The server side of the broker protocol, shared by the real broker and the test fake.

- :mod:`~autocad_bench.broker.service.http`: bodies, answers, authentication, error mapping
  and the listener (the wire format);
- :mod:`~autocad_bench.broker.service.app`: :class:`BrokerService`, every route with its
  replay, state and index rules;
- :mod:`~autocad_bench.broker.service.driver`: :class:`DesktopDriver`, what a broker
  implements to run requests on a desktop (real or fake);
- :mod:`~autocad_bench.broker.service.state` and :mod:`~autocad_bench.broker.service.events`:
  the sessions' replay caches and the ``/events`` log.
"""

from autocad_bench.broker.service.app import BrokerService, is_plain_name
from autocad_bench.broker.service.driver import (
    BatchOutcome,
    BrokerIdentity,
    CheckpointOutcome,
    DesktopDriver,
    EncodedFrame,
    FrameUnavailable,
    PngFrame,
    ResetOutcome,
    Served,
)
from autocad_bench.broker.service.events import EventLog, describe_error
from autocad_bench.broker.service.http import Abort, Middleware, error_response, read_body, route_of
from autocad_bench.broker.service.state import CachedAnswer, Session

__all__ = [
    "Abort",
    "BatchOutcome",
    "BrokerIdentity",
    "BrokerService",
    "CachedAnswer",
    "CheckpointOutcome",
    "DesktopDriver",
    "EncodedFrame",
    "EventLog",
    "FrameUnavailable",
    "Middleware",
    "PngFrame",
    "ResetOutcome",
    "Served",
    "Session",
    "describe_error",
    "error_response",
    "is_plain_name",
    "read_body",
    "route_of",
]
