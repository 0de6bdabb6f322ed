"""autocad-bench ``local-hyperv`` backend: a pool of Hyper-V AutoCAD VMs, one per rollout.

The plugin class is :class:`autocad_bench_hyperv.plugin.HyperVPlugin` (entry point
``local-hyperv``). Nothing is imported here, so ``python -m autocad_bench_hyperv.wrapper``
and the entry-point loader import only what they use. See ``docs/hyperv.md``.
"""
