"""autocad-bench provider: OpenRouter Responses API."""
