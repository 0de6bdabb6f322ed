"""An example third-party autocad-bench backend: a static pool of already-running desktops."""

from example_autocad_backend.plugin import ExamplePoolPlugin, PoolSettings

__all__ = ["ExamplePoolPlugin", "PoolSettings"]
