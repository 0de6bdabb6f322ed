"""Test support for plugin authors: conformance suites, a pytest plugin and wire-level fakes.

``from autocad_bench.testing import BackendConformance`` and subclass it in a test module
named ``Test...`` to run the backend contract checks against your plugin;
``serve_fake_brokers`` gives it live brokers to point its ``valid_spec`` at.
"""

from autocad_bench.testing.backend_conformance import BackendConformance
from autocad_bench.testing.provider_conformance import ProviderConformance
from autocad_bench.testing.served_brokers import serve_fake_brokers

__all__ = ["BackendConformance", "ProviderConformance", "serve_fake_brokers"]
