"""``python -m autocad_bench.harness ROLLOUT_DIR``: the neutral child command."""

from autocad_bench.harness.cli import main

main()
