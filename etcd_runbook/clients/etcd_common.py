"""Shared option spec, input validation and the plain data the etcd client returns.

Member IDs are lowercase hex strings everywhere (the format etcdctl prints), so a value copied
from `etcdctl member list` can be given to a module and vice versa.
"""

from __future__ import annotations

import atexit
import dataclasses
import ipaddress
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from etcd_runbook.clients.etcd_errors import EtcdInputError

DEFAULT_TIMEOUT = 10.0


def connection_argument_spec() -> dict[str, Any]:
    """The connection options every etcd module accepts (documented in the
    `etcd_connection` doc fragment)."""
    return {
        "endpoints": {"type": "list", "elements": "str", "required": True},
        "ca_cert": {"type": "path"},
        "client_cert": {"type": "path"},
        "client_key": {"type": "path", "no_log": False},
        "user": {"type": "str"},
        "password": {"type": "str", "no_log": True},
        "timeout": {"type": "float", "default": DEFAULT_TIMEOUT},
        "cluster_id": {"type": "str"},
        "ca_cert_content": {"type": "str"},
        "client_cert_content": {"type": "str"},
        "client_key_content": {"type": "str", "no_log": True},
        "advertised_urls": {"type": "bool", "default": True},
        "addresses": {"type": "dict", "default": {}},
    }


_private_dir: list[str] = []


def private_file(name: str, content: str) -> str:
    """`content` in a file only this process can read, removed when the process ends: TLS
    libraries take certificate chains and keys as paths."""
    # A module run in the task's worker (plugins/action/normal.py) has its exit handlers run
    # at the end of each loop item, while this module-level list lives on to the next item.
    if not _private_dir or not os.path.isdir(_private_dir[0]):
        _private_dir[:] = [tempfile.mkdtemp(prefix="etcd-module-")]
        atexit.register(shutil.rmtree, _private_dir[0], True)
    path = os.path.join(_private_dir[0], name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(content)
    return path


def connection_required_together() -> list[list[str]]:
    """`required_together` for AnsibleModule: a client cert needs its key, a user a password."""
    return [["client_cert", "client_key"], ["user", "password"]]


def describe(member: Member) -> str:
    """A member as messages name it: its name (or that it has not started) and its ID."""
    return f"{member.name or '(not started)'} ({member.id})"


def member_id_hex(member_id: int) -> str:
    return format(member_id, "x")


def parse_member_id(value: str) -> int:
    try:
        parsed = int(value, 16)
    except ValueError:
        raise EtcdInputError(
            f"member ID '{value}' is not a hex number like 8e9e05c52164694d"
        ) from None
    if parsed <= 0 or parsed >= 1 << 64:
        raise EtcdInputError(f"member ID '{value}' is out of range")
    return parsed


@dataclass(frozen=True)
class ParsedURL:
    url: str
    scheme: str
    host: str
    port: int

    @property
    def target(self) -> str:
        """host:port as gRPC wants it (IPv6 literals keep their brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def secure(self) -> bool:
        return self.scheme == "https"


def parse_url(url: str, *, what: str) -> ParsedURL:
    """Validate an http(s)://host:port URL; `what` names it in the error message."""
    example = f"{what} '{url}' is not a URL like https://10.0.0.1:2379"
    if not isinstance(url, str) or not url.strip():
        raise EtcdInputError(f"{what} must be a non-empty URL like https://10.0.0.1:2379")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise EtcdInputError(f"{example}: {exc}") from exc
    if parts.scheme not in ("http", "https"):
        raise EtcdInputError(f"{example}: the scheme must be http or https")
    if not parts.hostname:
        raise EtcdInputError(f"{example}: it has no host")
    if port is None:
        raise EtcdInputError(f"{example}: it has no port")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise EtcdInputError(f"{example}: it must not have a path, query or fragment")
    return ParsedURL(url=url.strip(), scheme=parts.scheme, host=parts.hostname, port=port)


def normalize_url(url: str) -> str:
    """Canonical form for comparing URLs (trailing slash, case of scheme and host); URLs
    this layer does not accept as input (unix://) compare as they are."""
    try:
        parsed = parse_url(url, what="URL")
    except EtcdInputError:
        return url.strip().rstrip("/").lower()
    return f"{parsed.scheme}://{parsed.target.lower()}"


@dataclass(frozen=True)
class ConnectionParams:
    endpoints: tuple[str, ...]
    ca_cert: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    user: str | None = None
    password: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    cluster_id: str | None = None
    # Members none of `endpoints` answered as are also asked through the client URLs they
    # advertise. Off where `endpoints` already holds every member that can answer: a member
    # going away then costs no call timeout.
    advertised: bool = True
    # Host name -> the IP address to connect to for it (TLS still checks the host name): a
    # new Pod is reachable before cluster DNS answers for it, and DNS may keep answering that
    # the name does not exist for its negative-cache time.
    addresses: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_module_params(cls, params: dict[str, Any]) -> ConnectionParams:
        """Build from AnsibleModule.params and validate; raises EtcdInputError. PEM given as
        content (`*_content`) is written to files private to this process."""
        files = {}
        for option in ("ca_cert", "client_cert", "client_key"):
            content = params.get(f"{option}_content")
            if content and params.get(option):
                raise EtcdInputError(f"give {option} or {option}_content, not both")
            files[option] = private_file(option, content) if content else params.get(option)
        connection = cls(
            endpoints=tuple(params.get("endpoints") or ()),
            ca_cert=files["ca_cert"],
            client_cert=files["client_cert"],
            client_key=files["client_key"],
            user=params.get("user"),
            password=params.get("password"),
            timeout=float(params.get("timeout") or DEFAULT_TIMEOUT),
            cluster_id=(params.get("cluster_id") or "").lower() or None,
            advertised=bool(params.get("advertised_urls", True)),
            addresses={str(k): str(v) for k, v in (params.get("addresses") or {}).items()},
        )
        connection.validate()
        return connection

    def validate(self) -> None:
        if not self.endpoints:
            raise EtcdInputError("endpoints must list at least one client URL")
        parsed = [parse_url(endpoint, what="endpoint") for endpoint in self.endpoints]
        tls_files = self.ca_cert or self.client_cert
        plain = [p.url for p in parsed if not p.secure]
        if tls_files and plain:
            raise EtcdInputError(
                f"ca_cert/client_cert are given but endpoint {plain[0]} uses http://: "
                "a TLS cluster is reached through https:// endpoints"
            )
        if (self.client_cert is None) != (self.client_key is None):
            raise EtcdInputError("client_cert and client_key must be given together")
        if (self.user is None) != (self.password is None):
            raise EtcdInputError("user and password must be given together")
        if self.timeout <= 0:
            raise EtcdInputError(f"timeout must be positive, got {self.timeout}")
        if self.cluster_id is not None:
            parse_member_id(self.cluster_id)
        for host, address in self.addresses.items():
            try:
                ipaddress.ip_address(address)
            except ValueError as exc:
                raise EtcdInputError(
                    f"addresses: {host} must map to an IP address, not {address!r}"
                ) from exc
        for option in ("ca_cert", "client_cert", "client_key"):
            path = getattr(self, option)
            if path is not None:
                try:
                    with open(path, "rb"):
                        pass
                except OSError as exc:
                    raise EtcdInputError(f"{option} '{path}' cannot be read: {exc}") from exc


@dataclass(frozen=True)
class Member:
    id: str
    name: str
    peer_urls: list[str] = field(default_factory=list)
    client_urls: list[str] = field(default_factory=list)
    is_learner: bool = False

    @property
    def started(self) -> bool:
        """A member added but never started has no name and no client URLs yet."""
        return bool(self.name)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class EndpointStatus:
    """One endpoint's answer to Maintenance.Status, or why it did not answer."""

    endpoint: str
    healthy: bool
    member_id: str | None = None
    cluster_id: str | None = None
    version: str | None = None
    db_size: int | None = None
    db_size_in_use: int | None = None
    leader: str | None = None
    raft_index: int | None = None
    raft_applied_index: int | None = None
    raft_term: int | None = None
    # The store's revision as this member has applied it: answered without a quorum, so a
    # survivor's word on how much it holds when the others are gone.
    revision: int | None = None
    is_learner: bool | None = None
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class MemberView:
    """One endpoint's own answer to MemberList: which cluster and members it believes in.

    `linearizable` is False when the member could only answer from its local state (no
    quorum); etcd 3.4 always answers from local state, whatever was asked."""

    endpoint: str
    member_id: str | None = None
    cluster_id: str | None = None
    members: list[Member] = field(default_factory=list)
    linearizable: bool = False
    errors: list[str] = field(default_factory=list)

    @property
    def member_ids(self) -> list[str]:
        return sorted(m.id for m in self.members)

    def as_dict(self) -> dict[str, Any]:
        return {
            "endpoint": self.endpoint,
            "member_id": self.member_id,
            "cluster_id": self.cluster_id,
            "member_ids": self.member_ids,
            "linearizable": self.linearizable,
            "errors": list(self.errors),
        }


@dataclass(frozen=True)
class Alarm:
    member_id: str
    alarm: str

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class HashKV:
    member_id: str
    hash: int
    revision: int
    compact_revision: int

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
