"""``infrastructure.settings`` of the local-hyperv backend (unknown keys are rejected).

A pool is one or more Hyper-V hosts, each with the names of its VMs (clones of one
operator-built AutoCAD image), how the controller reaches the host (PowerShell remoting over
WinRM with credentials named by environment variables, or a local ``powershell.exe`` when
the controller runs on the host) and how the broker inside a VM is reached (a host port
proxy or a routed network). No setting holds a credential: only variable names.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from autocad_bench.infrastructure import InfrastructureSpec
from autocad_bench_hyperv.bounds import (
    DEFAULT_BOOT_S,
    DEFAULT_HANDOFF_S,
    DEFAULT_LEASE_TTL_MINUTES,
    DEFAULT_LEASE_WAIT_S,
    DEFAULT_READINESS_S,
    DEFAULT_VM_ATTEMPTS,
    MAX_BOOT_S,
    MAX_HANDOFF_S,
    MAX_LEASE_TTL_MINUTES,
    MAX_LEASE_WAIT_S,
    MAX_READINESS_S,
    MAX_VM_ATTEMPTS,
    MIN_LEASE_TTL_MINUTES,
)

EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=128)]
Label = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")]
VmName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9 ._()-]{0,99}$")]
"""Hyper-V VM names may contain spaces; quotes, wildcards and control characters are refused."""

DEFAULT_CHECKPOINT = "autocad-bench-clean"
DEFAULT_GUEST_BROKER_PORT = 8765


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PsrpConnection(_Model):
    """PowerShell remoting (PSRP over WinRM) to a Hyper-V host, with pypsrp."""

    kind: Literal["psrp"]
    server: str = Field(min_length=1, max_length=255, pattern=r"^[A-Za-z0-9.:\[\]-]+$",
                        description="host name or address of the Hyper-V host")
    port: int | None = Field(default=None, ge=1, le=65535, description="default 5986 with ssl, 5985 without")
    ssl: bool = Field(default=True, description="WinRM over HTTPS (recommended)")
    auth: Literal["negotiate", "kerberos", "ntlm", "credssp"] = "negotiate"
    cert_validation: bool = Field(default=True, description="verify the WinRM HTTPS certificate (it must chain to "
                                  "a CA that Python's requests trusts on the controller)")
    username_env: EnvName = Field(description="variable holding the WinRM user (DOMAIN\\user or user@domain)")
    password_env: EnvName = Field(description="variable holding the WinRM password")

    @property
    def resolved_port(self) -> int:
        return self.port if self.port is not None else (5986 if self.ssl else 5985)


class LocalConnection(_Model):
    """The controller runs on the Hyper-V host: a local ``powershell.exe`` per command."""

    kind: Literal["local"]
    powershell: str = Field(default="powershell.exe", min_length=1,
                            description="Windows PowerShell 5.1 executable (name on PATH or absolute path)")


Connection = Annotated[PsrpConnection | LocalConnection, Field(discriminator="kind")]


class PortProxyReach(_Model):
    """Each VM's broker is forwarded by a host port (``netsh interface portproxy``, NAT mapping)."""

    kind: Literal["port_proxy"]
    address: str = Field(min_length=1, max_length=255, pattern=r"^[A-Za-z0-9.:\[\]-]+$",
                         description="the address the controller uses for the host's forwarded ports")
    ports: dict[str, int] = Field(min_length=1, description="VM name to the host port forwarding its broker")

    @field_validator("ports")
    @classmethod
    def _ports(cls, value: dict[str, int]) -> dict[str, int]:
        for vm, port in value.items():
            if not 1 <= port <= 65535:
                raise ValueError(f"port of {vm!r} must be between 1 and 65535")
        if len(set(value.values())) != len(value):
            raise ValueError("every VM needs its own forwarded port")
        return value


class RoutedReach(_Model):
    """The controller reaches each VM directly (routed internal network, DNS)."""

    kind: Literal["routed"]
    address_template: str = Field(
        default="{ip}", min_length=1, max_length=255,
        description="'{vm}' is the VM name, '{ip}' its first IPv4 address reported by Hyper-V, '{host}' the host "
        "name; e.g. '{vm}.acad.lab' or '{ip}'")
    port: int = Field(default=DEFAULT_GUEST_BROKER_PORT, ge=1, le=65535, description="the broker's port on the VM")

    @field_validator("address_template")
    @classmethod
    def _template(cls, value: str) -> str:
        unknown = set(re.findall(r"\{([^}]*)\}", value)) - {"vm", "ip", "host"}
        if unknown:
            raise ValueError(f"unknown placeholders {sorted(unknown)}; use {{vm}}, {{ip}} or {{host}}")
        if not re.fullmatch(r"[A-Za-z0-9.:\[\]{}-]+", value):
            raise ValueError("must be a host name or address template")
        return value


Reach = Annotated[PortProxyReach | RoutedReach, Field(discriminator="kind")]


class HostSettings(_Model):
    """One Hyper-V host of the pool."""

    name: Label = Field(description="a label of the host, unique in the pool (worker ids are '<name>/<vm>')")
    connection: Connection
    vms: list[VmName] = Field(min_length=1, description="the pool VMs on this host")
    broker: Reach
    hourly_usd: float = Field(default=0.0, ge=0, allow_inf_nan=False,
                              description="what one VM of this host costs per hour (recorded per rollout)")
    checkpoint: str | None = Field(default=None, min_length=1, max_length=100,
                                   description="overrides the pool's checkpoint name for this host")

    @model_validator(mode="after")
    def _consistent(self) -> HostSettings:
        if len(set(self.vms)) != len(self.vms):
            raise ValueError("VM names must be unique on a host")
        if isinstance(self.broker, PortProxyReach) and set(self.broker.ports) != set(self.vms):
            missing = sorted(set(self.vms) - set(self.broker.ports))
            extra = sorted(set(self.broker.ports) - set(self.vms))
            raise ValueError(f"broker.ports must name exactly the host's VMs (missing {missing}, unknown {extra})")
        return self


class HyperVSettings(_Model):
    """``infrastructure.settings`` of ``local-hyperv``."""

    hosts: list[HostSettings] = Field(min_length=1)
    checkpoint: str = Field(default=DEFAULT_CHECKPOINT, min_length=1, max_length=100,
                            description="the clean checkpoint every rollout starts from")
    guest_username_env: EnvName = Field(description="variable holding the guest administrator user "
                                        "(PowerShell Direct into the VM)")
    guest_password_env: EnvName = Field(description="variable holding that user's password")
    console_user: str = Field(default="Administrator", min_length=1, max_length=104,
                              description="the autologon user whose console session the broker must run in")
    licence_seats: int = Field(ge=1, le=10_000, description="AutoCAD licence seats the pool may use at once")
    guest_broker_port: int = Field(default=DEFAULT_GUEST_BROKER_PORT, ge=1, le=65535,
                                   description="the port the broker listens on inside every VM")
    vm_attempts: int = Field(default=DEFAULT_VM_ATTEMPTS, ge=1, le=MAX_VM_ATTEMPTS,
                             description="VMs tried per rollout before it fails (all before any model call)")
    lease_wait_s: float = Field(default=DEFAULT_LEASE_WAIT_S, ge=0, le=MAX_LEASE_WAIT_S,
                                description="how long a rollout waits for a free VM and a seat")
    lease_ttl_minutes: int = Field(default=DEFAULT_LEASE_TTL_MINUTES, ge=MIN_LEASE_TTL_MINUTES,
                                   le=MAX_LEASE_TTL_MINUTES,
                                   description="after this a lease of a vanished controller may be taken over")
    boot_timeout_s: float = Field(default=DEFAULT_BOOT_S, gt=0, le=MAX_BOOT_S,
                                  description="Start-VM until the heartbeat integration service reports OK")
    readiness_timeout_s: float = Field(default=DEFAULT_READINESS_S, gt=0, le=MAX_READINESS_S,
                                       description="heartbeat until the broker's current-boot readiness record")
    handoff_timeout_s: float = Field(default=DEFAULT_HANDOFF_S, gt=0, le=MAX_HANDOFF_S,
                                     description="authenticated /health must identify the exact broker within this")

    @model_validator(mode="after")
    def _unique_hosts(self) -> HyperVSettings:
        names = [host.name for host in self.hosts]
        if len(set(names)) != len(names):
            raise ValueError("host names must be unique")
        return self

    def host(self, name: str) -> HostSettings:
        for host in self.hosts:
            if host.name == name:
                return host
        raise KeyError(name)

    def checkpoint_of(self, host: HostSettings) -> str:
        return host.checkpoint or self.checkpoint

    @property
    def vm_count(self) -> int:
        return sum(len(host.vms) for host in self.hosts)

    def environment_names(self) -> tuple[str, ...]:
        """Every variable the backend reads (the subprocess wrapper inherits them by name)."""
        names = [self.guest_username_env, self.guest_password_env]
        for host in self.hosts:
            if isinstance(host.connection, PsrpConnection):
                names += [host.connection.username_env, host.connection.password_env]
        return tuple(dict.fromkeys(names))


def hyperv_settings(spec: InfrastructureSpec) -> HyperVSettings:
    """The validated settings of ``spec`` (call after ``validate_spec`` passed)."""
    return HyperVSettings.model_validate(spec.settings)


def worker_id(host: str, vm: str) -> str:
    """The backend-neutral worker id of a VM: ``<host>/<vm>``."""
    return f"{host}/{vm}"


def split_worker_id(value: str) -> tuple[str, str] | None:
    """``(host, vm)`` of a worker id ``<host>/<vm>``, or ``None`` when it is not one."""
    host, sep, vm = value.partition("/")
    return (host, vm) if sep and host and vm else None
