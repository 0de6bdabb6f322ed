"""Live, read-only Bedrock capability check: ``ListFoundationModels`` (exact id, IMAGE input).

Cross-region inference profile ids (``us.``, ``eu.``, ``apac.``, ``global.``...) are not
foundation models; they are looked up with ``GetInferenceProfile`` and judged by the
foundation models they route to.
"""

from __future__ import annotations

import re
from typing import Any

from autocad_bench.providers.models import CatalogEntry, ModelSpec
from autocad_bench.providers.support.catalog import check_grouped

from .errors import classify_botocore
from .options import BedrockOptions, parse_options

_PROFILE_PREFIX = re.compile(r"^(us|eu|apac|us-gov|jp|au|ca|global)\.")


def credential_source(options: BedrockOptions) -> str:
    """The credential note added to every failed catalog entry: the standard AWS chain with the
    options' profile (no API key variable).
    """
    name = f"profile {options.aws_profile!r}" if options.aws_profile else "default profile"
    return f"credentials: AWS standard credential chain ({name}); no API key variable is used"


def boto_session(options: BedrockOptions) -> Any:
    """A boto3 session for the options' profile and region (imports boto3: raises ``ImportError``
    without it; an unknown profile raises botocore's ``ProfileNotFound``).
    """
    import boto3

    return boto3.session.Session(profile_name=options.aws_profile, region_name=options.region)


def check_catalog(provider: str, models: list[ModelSpec]) -> list[CatalogEntry]:
    """The live capability check of ``models``: one catalog request per region, profile and
    endpoint; models whose options do not parse are unavailable entries.
    """
    return check_grouped(provider, models, parse_options,
                         lambda options: (options.region, options.aws_profile, options.catalog_endpoint_url),
                         lambda _, items: _check_group(provider, items))


def _check_group(provider: str, items: list[tuple[ModelSpec, BedrockOptions]]) -> list[CatalogEntry]:
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError, NoRegionError

    options = items[0][1]
    credentials = credential_source(options)

    def failed(reason: str) -> list[CatalogEntry]:
        return [CatalogEntry(provider=provider, model=s.model, available=False, reason=f"{reason}; {credentials}")
                for s, _ in items]

    try:
        session = boto_session(options)
        if session.get_credentials() is None:
            return failed("not checked: no AWS credentials found in the standard chain")
        config = Config(retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=10, read_timeout=30)
        client = session.client("bedrock", endpoint_url=options.catalog_endpoint_url, config=config)
    except NoRegionError:
        return failed("no AWS region: set provider_options.region, AWS_DEFAULT_REGION or a profile region")
    except BotoCoreError as error:
        return failed(f"not checked: {error}")
    region = client.meta.region_name
    try:
        summaries = client.list_foundation_models().get("modelSummaries", [])
    except (ClientError, BotoCoreError) as exc:
        return failed(f"{region}: ListFoundationModels failed: {classify_botocore(exc) or exc}")
    foundation: dict[str, Any] = {str(s.get("modelId")): s for s in summaries if isinstance(s, dict)}
    entries = [_entry(provider, client, region, spec.model, foundation, credentials) for spec, _ in items]
    client.close()
    return entries


def _entry(provider: str, client: Any, region: str, model: str, foundation: dict[str, Any],
           credentials: str) -> CatalogEntry:
    from botocore.exceptions import BotoCoreError, ClientError

    summary = foundation.get(model)
    if summary is not None:
        modalities = [str(m).upper() for m in summary.get("inputModalities") or []]
        return _judge(provider, model, region, "IMAGE" in modalities, f"foundation model {model}", credentials,
                      summary.get("modelLifecycle", {}).get("status"))
    if not _PROFILE_PREFIX.match(model):
        return CatalogEntry(provider=provider, model=model, available=False,
                            reason=f"{region}: not in ListFoundationModels ({len(foundation)} models); {credentials}")
    try:
        profile = client.get_inference_profile(inferenceProfileIdentifier=model)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code")
        reason = ("not a foundation model or inference profile" if code in ("ResourceNotFoundException",
                                                                            "ValidationException")
                  else f"GetInferenceProfile failed: {classify_botocore(exc) or exc}")
        return CatalogEntry(provider=provider, model=model, available=False,
                            reason=f"{region}: {reason}; {credentials}")
    except BotoCoreError as exc:
        return CatalogEntry(provider=provider, model=model, available=False,
                            reason=f"{region}: GetInferenceProfile failed: {exc}; {credentials}")
    targets = [str(m.get("modelArn", "")).rsplit("/", 1)[-1] for m in profile.get("models") or []]
    known = [foundation[t] for t in targets if t in foundation]
    if not known:
        return CatalogEntry(provider=provider, model=model, available=False,
                            reason=f"{region}: inference profile routes to unknown models {targets}; {credentials}")
    image = all("IMAGE" in [str(m).upper() for m in k.get("inputModalities") or []] for k in known)
    status = profile.get("status")
    return _judge(provider, model, region, image, f"inference profile over {', '.join(targets)}", credentials,
                  "ACTIVE" if status == "ACTIVE" else status)


def _judge(provider: str, model: str, region: str, image: bool, what: str, credentials: str,
           status: Any) -> CatalogEntry:
    if status not in (None, "ACTIVE"):
        return CatalogEntry(provider=provider, model=model, available=False, image_input=image,
                            reason=f"{region}: {what} is {status}; {credentials}")
    if not image:
        return CatalogEntry(provider=provider, model=model, available=False, image_input=False,
                            reason=f"{region}: {what} does not list IMAGE in inputModalities; {credentials}")
    return CatalogEntry(provider=provider, model=model, available=True, image_input=True,
                        reason=f"{region}: {what}; IMAGE input; {credentials}")
