"""autocad-bench desktop broker."""
