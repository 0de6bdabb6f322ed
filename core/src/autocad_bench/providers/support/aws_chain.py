"""The environment variables of the AWS standard credential and region chain.

Providers that sign with the standard chain (``bedrock``, ``mantle``) declare these as
``optional_env``: a subprocess-mode rollout sees only the base environment plus the names
admission hands on, so without them an operator's ``AWS_PROFILE`` or access keys would reach
the plan's catalog check but not the rollout. Values are never read here: the names are
handed on as names, like credentials, and only the set ones.
"""

from __future__ import annotations

AWS_CHAIN_ENV: tuple[str, ...] = (
    "AWS_PROFILE",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_DEFAULT_REGION",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_SESSION_NAME",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
)
"""botocore's chain variables (profile, static keys, files, web identity, container role) and
its region variable; ``AWS_REGION`` is not one (botocore does not read it)."""
