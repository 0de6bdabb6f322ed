"""autocad-bench local-xvfb backend."""
