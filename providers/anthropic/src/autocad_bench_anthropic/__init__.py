"""autocad-bench provider: Anthropic Messages API."""
