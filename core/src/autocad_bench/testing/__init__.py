"""Test support for plugin authors: conformance suites, a pytest plugin and wire-level fakes.

``from autocad_bench.testing import BackendConformance`` and subclass it in a test module
named ``Test...`` to run the backend contract checks against your plugin.
"""

from autocad_bench.testing.backend_conformance import BackendConformance
from autocad_bench.testing.provider_conformance import ProviderConformance

__all__ = ["BackendConformance", "ProviderConformance"]
