"""autocad-bench ``local-xvfb`` backend: one private Xvfb display, LibreCAD and broker per rollout.

The plugin class is :class:`autocad_bench_xvfb.plugin.LocalXvfbPlugin` (entry point
``local-xvfb``). Nothing is imported here, so ``python -m autocad_bench_xvfb.wrapper`` and
the entry-point loader import only what they use. See ``docs/local-xvfb.md``.
"""
