"""autocad-bench provider: OpenAI Responses API."""
