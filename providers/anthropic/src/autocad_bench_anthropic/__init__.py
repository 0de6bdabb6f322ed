"""autocad-bench provider: Anthropic Messages API (``"provider": "anthropic"``).

The provider class lives in :mod:`autocad_bench_anthropic.provider`; importing this package
does not import the ``anthropic`` SDK.
"""

__all__: list[str] = []
