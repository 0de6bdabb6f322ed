"""autocad-bench provider: AWS Bedrock Mantle (SigV4 OpenAI-compatible)."""
