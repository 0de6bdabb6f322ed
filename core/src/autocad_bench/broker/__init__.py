"""Client side of the broker wire protocol: models, errors and the retrying async client."""

from autocad_bench.broker.client import (
    DEFAULT_OPERATION_DEADLINE_S,
    MAX_TRANSPORT_ATTEMPTS,
    BrokerClient,
)
from autocad_bench.broker.errors import (
    BrokerConflict,
    BrokerError,
    BrokerHTTPError,
    BrokerProtocolError,
    BrokerTransportExhausted,
)

__all__ = [
    "DEFAULT_OPERATION_DEADLINE_S",
    "MAX_TRANSPORT_ATTEMPTS",
    "BrokerClient",
    "BrokerConflict",
    "BrokerError",
    "BrokerHTTPError",
    "BrokerProtocolError",
    "BrokerTransportExhausted",
]
