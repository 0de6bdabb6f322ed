"""``autocad-bench-models``: the live, read-only model catalog check.

Looks the models of a batch configuration (``--config``), of explicit ``--provider`` /
``--model`` pairs, or (with neither) every installed provider's pinned models up in the
providers' live catalogs, exactly as admission steps 8 and 9 do. Direct providers are
checked when their credential variables are set and reported as skipped otherwise; AWS
providers (Mantle, Bedrock) use the standard AWS credential chain and are checked in
``--region`` (and ``--aws-profile``) when given. Prints one JSON report; never writes.

Exit codes: 0 every requested model is available (pinned mode also tolerates providers
skipped for missing keys), 1 a model is unavailable, was skipped or its check failed,
2 usage or configuration errors.
"""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from autocad_bench.admission.admit import optional_environment
from autocad_bench.cli.errors import report_user_errors
from autocad_bench.errors import ConfigError, PluginError, Problem, UserError
from autocad_bench.plugins import PluginHandle, PluginHost
from autocad_bench.providers.models import CatalogEntry, Credentials, ModelSpec

PINNED_ATTRIBUTE = "pinned_models"
"""Optional provider class attribute: model ids checked when nothing else is named."""
REGION_ATTRIBUTE = "catalog_region_option"
"""Optional provider class attribute: the option that ``--region`` sets (AWS providers)."""
PROFILE_ATTRIBUTE = "catalog_profile_option"
"""Optional provider class attribute: the option that ``--aws-profile`` sets (AWS providers)."""


def _check(provider: str, model: str, status: str, reason: str, image_input: bool | None = None) -> dict[str, Any]:
    return {"provider": provider, "model": model, "status": status, "available": status == "available",
            "image_input": image_input, "reason": reason}


def _specs_from_config(path: Path) -> list[tuple[ModelSpec, str]]:
    from autocad_bench.admission.admit import model_spec
    from autocad_bench.config import load_config

    loaded = load_config(path)
    out = []
    for index, entry in enumerate(loaded.config.rollouts):
        if entry.enabled:
            out.append((model_spec(entry, loaded.path.parent), loaded.at(f"$.rollouts[{index}]")))
    return out


def _with_aws_overrides(handle: PluginHandle, spec: ModelSpec, region: str | None,
                        aws_profile: str | None) -> ModelSpec:
    options = dict(spec.options)
    region_key = getattr(handle.plugin, REGION_ATTRIBUTE, None)
    profile_key = getattr(handle.plugin, PROFILE_ATTRIBUTE, None)
    if region and isinstance(region_key, str):
        options[region_key] = region
    if aws_profile and isinstance(profile_key, str):
        options[profile_key] = aws_profile
    return spec.model_copy(update={"options": options})


def run_models_check(
    host: PluginHost,
    environ: Mapping[str, str],
    *,
    config: Path | None = None,
    pairs: list[tuple[str, str]] | None = None,
    region: str | None = None,
    aws_profile: str | None = None,
) -> dict[str, Any]:
    """Build the report (raises :class:`UserError` for configuration or usage problems)."""
    mode = "config" if config is not None else ("models" if pairs else "pinned")
    checks: list[dict[str, Any]] = []
    requested: list[tuple[ModelSpec, str]] = []
    if config is not None:
        requested = _specs_from_config(config)
    elif pairs:
        requested = [(ModelSpec(provider=p, model=m), f"--provider {p} --model {m}") for p, m in pairs]
    else:
        for name in host.installed_names("providers"):
            try:
                handle = host.provider(name)
            except PluginError as error:
                checks.append(_check(name, "", "error", str(error)))
                continue
            pinned = getattr(handle.plugin, PINNED_ATTRIBUTE, ())
            if not pinned:
                continue
            requested += [(ModelSpec(provider=name, model=str(m)), f"{name} pinned model") for m in pinned]

    handles: dict[str, PluginHandle] = {}
    problems: list[Problem] = []
    by_provider: dict[str, list[ModelSpec]] = defaultdict(list)
    seen: set[tuple[str, str, str]] = set()
    for spec, where in requested:
        try:
            handle = handles.get(spec.provider) or host.provider(spec.provider)
        except PluginError as error:
            problems += [Problem(f"{where}.provider" if config else where, p.message) for p in error.problems]
            continue
        handles[spec.provider] = handle
        spec = _with_aws_overrides(handle, spec, region, aws_profile)
        problems += handle.call("validate_model_spec", model=spec, location=where) or []
        key = (spec.provider, spec.model, json.dumps(spec.options, sort_keys=True, default=str))
        if key not in seen:
            seen.add(key)
            by_provider[spec.provider].append(spec)
    if problems:
        raise ConfigError(problems)

    for provider, specs in sorted(by_provider.items()):
        handle = handles[provider]
        names = sorted({n for s in specs for n in handle.call("credential_names", model=s) or []})
        missing = [n for n in names if not environ.get(n)]
        if missing:
            checks += [_check(provider, s.model, "skipped", f"not checked: credentials missing ({', '.join(missing)})")
                       for s in specs]
            continue
        # Set optional variables (a base URL) reach the catalog check as they reach a rollout.
        handed = [*names, *(n for n in optional_environment(handle, environ) if n not in names)]
        try:
            entries: list[CatalogEntry] = handle.call(
                "check_model_catalog", models=specs, credentials=Credentials.from_environ(handed, environ)) or []
        except Exception as error:  # a provider bug must not hide the other providers' results
            checks += [_check(provider, s.model, "error", f"catalog check failed: {type(error).__name__}: {error}")
                       for s in specs]
            continue
        returned = {e.model for e in entries}
        checks += [_check(provider, e.model, "available" if e.available else "unavailable", e.reason, e.image_input)
                   for e in entries]
        checks += [_check(provider, s.model, "error", "the provider returned no catalog entry for this model")
                   for s in specs if s.model not in returned]

    tolerated = {"available", "skipped"} if mode == "pinned" else {"available"}
    passed = bool(checks) and all(c["status"] in tolerated for c in checks) and any(
        c["status"] == "available" for c in checks)
    return {"mode": mode, "region": region, "aws_profile": aws_profile, "passed": passed, "checks": checks}


@click.command(name="models")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Check every enabled model of this batch configuration.")
@click.option("--provider", "providers", multiple=True, help="Provider of an explicit model (repeat, paired).")
@click.option("--model", "models", multiple=True, help="Model id paired with the --provider at the same position.")
@click.option("--region", default=None, help="AWS region for Mantle and Bedrock (overrides provider_options).")
@click.option("--aws-profile", default=None, help="Named AWS profile for Mantle and Bedrock.")
@click.pass_context
@report_user_errors
def models_command(
    ctx: click.Context,
    config_path: Path | None,
    providers: tuple[str, ...],
    models: tuple[str, ...],
    region: str | None,
    aws_profile: str | None,
) -> None:
    """Check model ids (and image input) against the providers' live catalogs; read-only JSON report."""
    if len(providers) != len(models):
        raise click.UsageError("--provider and --model are given in pairs (same count, same order)")
    if config_path is not None and providers:
        raise click.UsageError("use either --config or --provider/--model pairs, not both")
    if config_path is not None and not config_path.is_file():
        raise UserError(f"--config {config_path}: no such file")
    obj = ctx.obj if isinstance(ctx.obj, dict) else {}
    environ: Mapping[str, str] = obj.get("environ") or dict(os.environ)
    host: PluginHost = obj.get("host") or PluginHost(environ=environ)
    report = run_models_check(host, environ, config=config_path, pairs=list(zip(providers, models, strict=True)),
                              region=region, aws_profile=aws_profile)
    click.echo(json.dumps(report, indent=2))
    sys.exit(0 if report["passed"] else 1)


def main() -> None:
    """Console-script entry point of ``autocad-bench-models``."""
    models_command(prog_name="autocad-bench-models")
