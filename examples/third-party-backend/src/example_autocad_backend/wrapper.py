"""``python -m example_autocad_backend.wrapper SPEC -- CHILD...``: the subprocess lifecycle."""

import sys

from example_autocad_backend.plugin import run_wrapped

if __name__ == "__main__":
    sys.exit(run_wrapped(sys.argv[1:]))
