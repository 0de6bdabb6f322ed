"""The ``aws`` infrastructure backend of autocad-bench (EC2 + SSM workers, S3 evaluation transfer)."""
