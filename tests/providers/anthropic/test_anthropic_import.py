"""Installing the provider costs nothing until it is selected: no SDK import at module import."""

from __future__ import annotations

import subprocess
import sys


def test_provider_module_does_not_import_the_sdk() -> None:
    code = (
        "import sys\n"
        "import autocad_bench_anthropic.provider as p\n"
        "assert p.AnthropicProvider.name == 'anthropic'\n"
        "assert 'anthropic' not in sys.modules, sorted(m for m in sys.modules if m.startswith('anthropic'))\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_entry_point_is_installed() -> None:
    from importlib.metadata import entry_points

    (ep,) = [e for e in entry_points(group="autocad_bench.providers") if e.name == "anthropic"]
    assert ep.value == "autocad_bench_anthropic.provider:AnthropicProvider"
