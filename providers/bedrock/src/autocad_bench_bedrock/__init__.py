"""autocad-bench provider: AWS Bedrock runtime Converse."""
