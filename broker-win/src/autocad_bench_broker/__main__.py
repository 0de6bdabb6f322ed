"""``python -m autocad_bench_broker``: the same as the ``autocad-bench-broker`` command."""

from autocad_bench_broker.cli import main

if __name__ == "__main__":
    main()
