"""autocad-bench provider: Fireworks Chat Completions (Kimi router)."""
