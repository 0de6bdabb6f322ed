"""Fake brokers served from a background event loop (the kit's own helper, under the names
this repository's tests use)."""

from __future__ import annotations

from autocad_bench.testing.served_brokers import BrokerThread
from autocad_bench.testing.served_brokers import serve_fake_brokers as fake_brokers

__all__ = ["BrokerThread", "fake_brokers"]
