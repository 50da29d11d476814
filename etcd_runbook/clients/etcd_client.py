"""Synchronous etcd v3 client for the Ansible modules, over the async `etcd3aio` library.

Modules never see asyncio: `EtcdClient` owns one private event loop and runs every call to
completion on it. Each endpoint URL gets its own gRPC channel (so a chosen member can be
asked for its status, defragmented or snapshotted, and TLS checks the right host name);
cluster-wide calls go to the first given endpoint that answers. Every failure leaves this
module as an `EtcdModuleError` with a message a person can act on.

One client speaks to one cluster: every answer's header must carry the expected cluster ID
(the `cluster_id` given, else the one `expect_cluster` was told, else the first answer's), or
the call fails with `EtcdForeignClusterError` before its answer is used; a change (member add,
remove, promote, update, alarm disarm, compaction, downgrade, defragmentation, a leader move)
is only sent once the endpoint has answered for that cluster on the same channel. Only the
surveys (`statuses`, `member_views`) take every endpoint's answer, with its cluster ID, for the
caller to judge.

    with EtcdClient(ConnectionParams.from_module_params(module.params)) as client:
        members = client.member_list()
        client.endpoint(members[0].client_urls[0]).status()
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import http.client
import json
import socket
import ssl
import sys
from collections.abc import Awaitable, Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

from etcd_runbook.clients.etcd_common import (
    Alarm,
    ConnectionParams,
    EndpointStatus,
    HashKV,
    Member,
    MemberView,
    member_id_hex,
    parse_member_id,
    parse_url,
)
from etcd_runbook.clients.etcd_errors import (
    EtcdAuthError,
    EtcdForeignClusterError,
    EtcdInputError,
    EtcdModuleError,
    EtcdServerError,
    EtcdTimeoutError,
    EtcdUnreachableError,
    translate,
)

try:
    import grpc
    import grpc.aio
    from etcd3aio.auth import AuthService
    from etcd3aio.cluster import ClusterService
    from etcd3aio.kv import KVService
    from etcd3aio.maintenance import AlarmType, DowngradeAction, MaintenanceService
except ImportError as exc:  # reported by EtcdClient(), where a module can fail_json on it
    IMPORT_ERROR: ImportError | None = exc
else:
    IMPORT_ERROR = None

T = TypeVar("T")

# Answers from one endpoint that say "ask another one" for a cluster-wide call.
_TRY_NEXT_REASONS = {"LearnerEndpoint", "NoLeader", "ServerStopped"}

DOWNGRADE_ACTIONS = ("validate", "enable", "cancel")

# Set while a survey asks every endpoint for its own answer: their cluster IDs are data then.
_SURVEY: contextvars.ContextVar[bool] = contextvars.ContextVar("etcd_survey", default=False)

# How etcd lists a raised NOSPACE alarm among a member's Status errors.
NOSPACE_ERROR = "alarm:NOSPACE"


@contextlib.contextmanager
def _surveying(on: bool = True) -> Iterator[None]:
    """Answers taken inside (by the tasks started inside too) are not checked."""
    token = _SURVEY.set(on)
    try:
        yield
    finally:
        _SURVEY.reset(token)


def foreign_answer(expected: str | None, got: int) -> bool:
    """Whether an answer whose header says cluster `got` comes from another cluster than
    `expected` (hex; None: not known yet, so any answer is taken). etcd itself leaves the
    header empty (0) in a few answers (defragment, move leader, 3.4's alarms): those calls are
    sent only after the endpoint's status named our cluster on the same channel."""
    return expected is not None and bool(got) and member_id_hex(got) != expected


def _cluster_check(client: EtcdClient, url: str) -> grpc.aio.ClientInterceptor:
    """Every answer on this endpoint's channel is checked against the client's cluster (by
    gRPC itself, so no call of any module can forget it)."""

    class ClusterCheck(grpc.aio.UnaryUnaryClientInterceptor):
        async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
            response = await (await continuation(details, request))
            header = getattr(response, "header", None)
            if header is not None and not _SURVEY.get():
                method = details.method.decode() if isinstance(details.method, bytes) else ""
                client.answered(url, method.rsplit("/", 1)[-1], int(header.cluster_id))
            return response

    return ClusterCheck()


def _bracketed(address: str) -> str:
    """An IPv6 address as a gRPC target's host."""
    return f"[{address}]" if ":" in address else address


def _member(pb: object) -> Member:
    return Member(
        id=member_id_hex(pb.ID),  # type: ignore[attr-defined]
        name=pb.name,  # type: ignore[attr-defined]
        peer_urls=list(pb.peerURLs),  # type: ignore[attr-defined]
        client_urls=list(pb.clientURLs),  # type: ignore[attr-defined]
        is_learner=bool(pb.isLearner),  # type: ignore[attr-defined]
    )


@dataclass
class _Services:
    channel: grpc.aio.Channel
    auth: AuthService
    cluster: ClusterService
    kv: KVService
    maintenance: MaintenanceService

    def set_token(self, token: str | None) -> None:
        for service in (self.auth, self.cluster, self.kv, self.maintenance):
            service.set_token(token)


class EndpointClient:
    """Calls that concern one member: the one serving this URL."""

    def __init__(self, client: EtcdClient, url: str):
        self._client = client
        self.url = url
        self._parsed = parse_url(url, what="endpoint")
        self._services: _Services | None = None

    async def _open(self) -> _Services:
        # Channels bind to the running loop, so they are created inside it.
        if self._services is None:
            options: list[tuple[str, Any]] = [
                ("grpc.keepalive_time_ms", 10_000),
                ("grpc.keepalive_timeout_ms", 5_000),
                ("grpc.max_receive_message_length", 64 * 1024 * 1024),
                ("grpc.enable_http_proxy", 0),
            ]
            credentials = self._client._credentials() if self._parsed.secure else None
            interceptors = [_cluster_check(self._client, self.url)]
            target = self._parsed.target
            address = self._client.params.addresses.get(self._parsed.host)
            if address is not None:
                target = f"{_bracketed(address)}:{self._parsed.port}"
                # The certificate is checked against the URL's host name, not the address.
                options.append(("grpc.ssl_target_name_override", self._parsed.host))
            if credentials is None:
                channel = grpc.aio.insecure_channel(
                    target, options=options, interceptors=interceptors
                )
            else:
                channel = grpc.aio.secure_channel(
                    target, credentials, options, interceptors=interceptors
                )
            self._services = _Services(
                channel=channel,
                auth=AuthService(channel, max_attempts=1),
                cluster=ClusterService(channel, max_attempts=1),
                kv=KVService(channel, max_attempts=1),
                maintenance=MaintenanceService(channel, max_attempts=1),
            )
        self._services.set_token(self._client._token)
        return self._services

    async def _close(self) -> None:
        if self._services is not None:
            await self._services.channel.close()
            self._services = None

    def _call(
        self,
        operation: str,
        fn: Callable[[_Services, float | None], Awaitable[T]],
        timeout: float | None = None,
        *,
        authenticate: bool = True,
    ) -> T:
        return self._client._call(self, operation, fn, timeout, authenticate=authenticate)

    async def _status(self, timeout: float | None) -> EndpointStatus:
        services = await self._open()
        response = await services.maintenance.status(timeout=timeout, max_attempts=1)
        errors = list(response.errors)
        # A raised NOSPACE alarm is listed among the errors of every member, yet each still
        # answers, follows its leader and serves reads, deletes and the cure (compact,
        # defragment, disarm): healthy, the alarm said apart (alarms). Any other error is not.
        return EndpointStatus(
            endpoint=self.url,
            healthy=response.leader != 0 and all(NOSPACE_ERROR in e for e in errors),
            member_id=member_id_hex(response.header.member_id),
            cluster_id=member_id_hex(response.header.cluster_id),
            version=response.version,
            db_size=response.dbSize,
            db_size_in_use=response.dbSizeInUse,
            leader=member_id_hex(response.leader) if response.leader else None,
            raft_index=response.raftIndex,
            raft_applied_index=response.raftAppliedIndex,
            raft_term=response.raftTerm,
            revision=response.header.revision,
            is_learner=response.isLearner,
            errors=errors,
        )

    def status(self) -> EndpointStatus:
        """This member's status; raises when it does not answer, or answers for another
        cluster than the client's."""
        return self._call("status", lambda _s, t: self._status(t))

    def verify_cluster(self) -> None:
        """Raises unless this endpoint's status names the client's cluster: asked on the
        channel a change (or a call whose answer names no cluster) is then sent through."""
        status = self.status()
        expected = self._client.expected_cluster_id
        if expected is not None and status.cluster_id != expected:
            raise EtcdForeignClusterError(
                f"status at {self.url} names cluster {status.cluster_id}, not {expected}: "
                "nothing was sent through it",
                endpoint=self.url,
            )

    def defragment(self, timeout: float | None = None) -> None:
        """Defragment this member's backend; `timeout` None waits as long as it takes."""

        async def run(services: _Services, deadline: float | None) -> None:
            await services.maintenance.defragment(timeout=deadline, max_attempts=1)

        self.verify_cluster()
        self._call("defragment", run, timeout, authenticate=True)

    def hash_kv(self, revision: int = 0) -> HashKV:
        """Hash of the MVCC keyspace up to `revision` (0: latest), to compare members."""

        async def run(services: _Services, deadline: float | None) -> HashKV:
            response = await services.maintenance.hash_kv(
                revision, timeout=deadline, max_attempts=1
            )
            return HashKV(
                member_id=member_id_hex(response.header.member_id),
                hash=response.hash,
                revision=response.header.revision,
                compact_revision=response.compact_revision,
            )

        return self._call("hash_kv", run)

    def version(self) -> dict[str, str]:
        """etcd's HTTP /version answer: {"etcdserver": ..., "etcdcluster": ...}. The cluster
        version is not part of the gRPC API, so it is read over HTTP(S) on the same port."""
        client = self._client
        context = None
        if self._parsed.secure:
            context = ssl.create_default_context(cafile=client.params.ca_cert)
            if client.params.client_cert:
                context.load_cert_chain(client.params.client_cert, client.params.client_key)
        timeout = client.params.timeout
        host, port = self._parsed.host, self._parsed.port
        # No proxy from the environment: etcd is spoken to directly, as over gRPC.
        connection = (
            http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
            if self._parsed.secure
            else http.client.HTTPConnection(host, port, timeout=timeout)
        )
        address = client.params.addresses.get(host)
        if address is not None:
            # Connect to the address; the Host header, SNI and the certificate check keep
            # the host name.
            def connect(_: object, *rest: Any) -> socket.socket:
                return socket.create_connection((address, port), *rest)

            connection._create_connection = connect  # type: ignore[attr-defined]
        try:
            connection.request("GET", "/version")
            response = connection.getresponse()
            if response.status != 200:
                raise OSError(f"HTTP {response.status} {response.reason}")
            answer = json.loads(response.read())
        except (OSError, ValueError, http.client.HTTPException) as exc:
            raise EtcdUnreachableError(
                f"cannot read {self.url}/version: {exc}", endpoint=self.url
            ) from exc
        finally:
            connection.close()
        return {str(k): str(v) for k, v in answer.items()}

    def move_leader(self, target_id: str) -> None:
        """Hand leadership to `target_id`; this endpoint must be the leader's."""
        target = parse_member_id(target_id)

        async def run(services: _Services, deadline: float | None) -> None:
            await services.maintenance.move_leader(target, timeout=deadline, max_attempts=1)

        self.verify_cluster()
        self._call("move leader", run)


def endpoint_key(url: str) -> str:
    """How the client keys an endpoint URL: its channel, trust and preference (a trailing
    slash or spaces make no other endpoint)."""
    return url.strip().rstrip("/")


class EtcdClient:
    """The cluster as seen through the given endpoints; use as a context manager."""

    def __init__(self, params: ConnectionParams):
        if IMPORT_ERROR is not None:
            raise EtcdModuleError(
                f"the Python library etcd3aio (and grpcio) is needed on the host running the "
                f"module, for {sys.executable}: pip install etcd3aio==0.3.0 ({IMPORT_ERROR})",
                reason="MissingLibrary",
            )
        params.validate()
        self.params = params
        self._runner = asyncio.Runner()
        self._endpoints: dict[str, EndpointClient] = {}
        self._token: str | None = None
        self._authenticated = False
        self._credentials_cache: grpc.ChannelCredentials | None = None
        self._distrusted: set[str] = set()
        self._preferred: list[str] = []
        self._expected = params.cluster_id.lower() if params.cluster_id else None

    def __enter__(self) -> EtcdClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        async def close_all() -> None:
            for endpoint in self._endpoints.values():
                await endpoint._close()

        try:
            self._runner.run(close_all())
        finally:
            self._endpoints.clear()
            self._runner.close()

    # ---- plumbing ---------------------------------------------------------------------

    @property
    def expected_cluster_id(self) -> str | None:
        """The cluster every answer must come from (hex); None until one is known."""
        return self._expected

    def expect_cluster(self, cluster_id: str) -> None:
        """From now on, answers must come from this cluster (the one the members' views chose),
        unless one was given or already seen."""
        if self._expected is None and cluster_id:
            self._expected = cluster_id.lower()

    def answered(self, url: str, method: str, cluster_id: int) -> None:
        """Checks the cluster ID of an answer from `url` (the first answer decides when none
        is expected yet); an endpoint of another cluster is distrusted, and the call fails."""
        if self._expected is None:
            if cluster_id:
                self._expected = member_id_hex(cluster_id)
            return
        if not foreign_answer(self._expected, cluster_id):
            return
        self.distrust([url])
        raise EtcdForeignClusterError(
            f"{method or 'a call'} at {url} was answered for etcd cluster "
            f"{member_id_hex(cluster_id)}, not for cluster "
            f"{self._expected}: what answers there is no member of this cluster (a stranger "
            "on a member's address, or a member that forked off); its answer was not used",
            endpoint=url,
        )

    def _credentials(self) -> grpc.ChannelCredentials:
        if self._credentials_cache is None:
            self._credentials_cache = grpc.ssl_channel_credentials(
                root_certificates=_read(self.params.ca_cert),
                private_key=_read(self.params.client_key),
                certificate_chain=_read(self.params.client_cert),
            )
        return self._credentials_cache

    def endpoint(self, url: str) -> EndpointClient:
        """The client for one member's URL (a given endpoint or a member's client URL)."""
        key = endpoint_key(url)
        if key not in self._endpoints:
            self._endpoints[key] = EndpointClient(self, key)
        return self._endpoints[key]

    def _call(
        self,
        endpoint: EndpointClient,
        operation: str,
        fn: Callable[[_Services, float | None], Awaitable[T]],
        timeout: float | None,
        *,
        authenticate: bool = True,
    ) -> T:
        deadline = self.params.timeout if timeout is None else timeout
        for attempt in (1, 2):
            if authenticate:
                self._authenticate()
            try:
                return self._runner.run(self._bounded(endpoint, fn, deadline))
            except Exception as exc:
                error = translate(exc, endpoint=endpoint.url, operation=operation, timeout=deadline)
                # Simple tokens live in each member's memory: one restarted since we logged
                # in no longer knows ours. Log in again once.
                if (
                    attempt == 1
                    and authenticate
                    and self.params.user
                    and isinstance(error, EtcdAuthError)
                    and error.reason == "InvalidToken"
                ):
                    self._authenticated = False
                    self._token = None
                    continue
                raise error from exc
        raise AssertionError("unreachable")

    @staticmethod
    async def _bounded(
        endpoint: EndpointClient,
        fn: Callable[[_Services, float | None], Awaitable[T]],
        deadline: float | None,
    ) -> T:
        services = await endpoint._open()
        async with asyncio.timeout(deadline):
            return await fn(services, deadline)

    def _authenticate(self) -> None:
        """Log in once per client with user/password, through the first endpoint that can."""
        if self._authenticated or not self.params.user:
            return
        user, password = self.params.user, self.params.password or ""

        async def login(services: _Services, deadline: float | None) -> str | None:
            services.set_token(None)
            try:
                # Before any cluster is known, the login's answer decides none.
                with _surveying(self._expected is None):
                    response = await services.auth.authenticate(
                        user, password, timeout=deadline, max_attempts=1
                    )
            except Exception as exc:
                rpc = exc.__cause__ if isinstance(exc.__cause__, grpc.aio.AioRpcError) else exc
                details = rpc.details() if isinstance(rpc, grpc.aio.AioRpcError) else ""
                if details == "etcdserver: authentication is not enabled":
                    return None
                raise
            return str(response.token)

        token = self._on_cluster(
            "authenticate", lambda ep: ep._call("authenticate", login, authenticate=False)
        )
        self._token = token
        self._authenticated = True

    def distrust(self, urls: Sequence[str]) -> None:
        """Never send a cluster-wide call through these URLs (members of another cluster)."""
        self._distrusted.update(endpoint_key(url) for url in urls)

    def trusted(self, urls: Sequence[str]) -> list[str]:
        return [url for url in urls if endpoint_key(url) not in self._distrusted]

    def prefer(self, urls: Sequence[str]) -> None:
        """Send the calls made through any one of the given endpoints to these first, in this
        order (the others after them, as given): those known to answer."""
        self._preferred = [endpoint_key(url) for url in urls]

    def _in_preferred_order(self, urls: Sequence[str]) -> list[str]:
        rank = {url: i for i, url in enumerate(self._preferred)}
        return sorted(urls, key=lambda url: rank.get(endpoint_key(url), len(rank)))

    def _on_cluster(
        self,
        operation: str,
        fn: Callable[[EndpointClient], T],
        *,
        mutation: bool = False,
        verify: bool = False,
        via: Sequence[str] | None = None,
    ) -> T:
        """Run `fn` on the first trusted endpoint (of `via`, default the given ones) that
        answers; a `mutation` (or a call to `verify`, whose answer names no cluster) only once
        that endpoint has answered for the client's cluster."""
        failures: list[EtcdModuleError] = []
        urls = self.trusted(via or self._in_preferred_order(self.params.endpoints))
        if not urls:
            raise EtcdUnreachableError(
                f"{operation}: every endpoint belongs to another cluster than "
                f"{self.params.cluster_id or 'the one most members report'}",
                reason="ForeignCluster",
            )
        for url in urls:
            try:
                endpoint = self.endpoint(url)
                if mutation or verify:
                    endpoint.verify_cluster()
                return fn(endpoint)
            except (EtcdUnreachableError, EtcdTimeoutError) as error:
                if mutation and isinstance(error, EtcdTimeoutError):
                    raise EtcdTimeoutError(
                        f"{error.message}; the {operation} may or may not have been applied: "
                        "check the member list before retrying",
                        endpoint=error.endpoint,
                    ) from error
                failures.append(error)
            except EtcdServerError as error:
                if error.reason not in _TRY_NEXT_REASONS:
                    raise
                failures.append(error)
        if len(failures) == 1:
            raise failures[0]
        reasons = {failure.reason for failure in failures}
        raise EtcdUnreachableError(
            f"{operation} failed on every endpoint: " + "; ".join(f.message for f in failures),
            reason=reasons.pop() if len(reasons) == 1 else "Unreachable",
        )

    # ---- cluster-wide calls -----------------------------------------------------------

    def member_list(self) -> list[Member]:
        return self.cluster_members()[1]

    def cluster_members(self) -> tuple[str, list[Member]]:
        """(cluster ID as hex, members) from one linearizable member list."""

        async def run(services: _Services, deadline: float | None) -> tuple[str, list[Member]]:
            response = await services.cluster.member_list(timeout=deadline, max_attempts=1)
            return member_id_hex(response.header.cluster_id), [_member(m) for m in response.members]

        return self._on_cluster("member list", lambda ep: ep._call("member list", run))

    def member_add(self, peer_urls: Sequence[str], *, learner: bool = False) -> Member:
        urls = [parse_url(url, what="peer URL").url for url in peer_urls]
        if not urls:
            raise EtcdInputError("a member needs at least one peer URL")

        async def run(services: _Services, deadline: float | None) -> Member:
            response = await services.cluster.member_add(
                urls, is_learner=learner, timeout=deadline, max_attempts=1
            )
            return _member(response.member)

        return self._on_cluster("member add", lambda ep: ep._call("member add", run), mutation=True)

    def member_remove(self, member_id: str, *, via: Sequence[str] | None = None) -> list[Member]:
        """Remove a member. `via`: endpoints to send it through, in order; best not the
        member's own, which stops as soon as it applies its removal and may not answer."""
        return self._member_change("member remove", member_id, "member_remove", via=via)

    def member_promote(self, member_id: str) -> list[Member]:
        return self._member_change("member promote", member_id, "member_promote")

    def member_update(self, member_id: str, peer_urls: Sequence[str]) -> list[Member]:
        urls = [parse_url(url, what="peer URL").url for url in peer_urls]
        if not urls:
            raise EtcdInputError("a member needs at least one peer URL")
        numeric = parse_member_id(member_id)

        async def run(services: _Services, deadline: float | None) -> list[Member]:
            response = await services.cluster.member_update(
                numeric, urls, timeout=deadline, max_attempts=1
            )
            return [_member(m) for m in response.members]

        return self._on_cluster(
            "member update", lambda ep: ep._call("member update", run), mutation=True
        )

    def _member_change(
        self, operation: str, member_id: str, method: str, via: Sequence[str] | None = None
    ) -> list[Member]:
        numeric = parse_member_id(member_id)

        async def run(services: _Services, deadline: float | None) -> list[Member]:
            call = getattr(services.cluster, method)
            response = await call(numeric, timeout=deadline, max_attempts=1)
            return [_member(m) for m in response.members]

        return self._on_cluster(
            operation, lambda ep: ep._call(operation, run), mutation=True, via=via
        )

    def alarms(self) -> list[Alarm]:
        async def run(services: _Services, deadline: float | None) -> list[Alarm]:
            response = await services.maintenance.alarms(timeout=deadline, max_attempts=1)
            return [_alarm(a) for a in response.alarms]

        # etcd 3.4 names no cluster in this answer.
        return self._on_cluster("alarm list", lambda ep: ep._call("alarm list", run), verify=True)

    def alarm_disarm(self, alarm: str = "NONE", member_id: str | None = None) -> list[Alarm]:
        """Deactivate `alarm` (NOSPACE, CORRUPT; NONE: every kind) on one or all members."""
        try:
            alarm_type = AlarmType[alarm.upper()]
        except KeyError as exc:
            raise EtcdInputError(f"unknown alarm '{alarm}': use NOSPACE or CORRUPT") from exc
        numeric = parse_member_id(member_id) if member_id else 0

        async def run(services: _Services, deadline: float | None) -> list[Alarm]:
            response = await services.maintenance.alarm_deactivate(
                alarm_type, member_id=numeric, timeout=deadline, max_attempts=1
            )
            return [_alarm(a) for a in response.alarms]

        return self._on_cluster(
            "alarm disarm", lambda ep: ep._call("alarm disarm", run), mutation=True
        )

    def current_revision(self) -> int:
        """The cluster's current MVCC revision (a linearizable read)."""

        async def run(services: _Services, deadline: float | None) -> int:
            response = await services.kv.get("\0", timeout=deadline, max_attempts=1)
            return int(response.header.revision)

        return self._on_cluster("read revision", lambda ep: ep._call("read revision", run))

    def compact(
        self, revision: int, *, physical: bool = True, timeout: float | None = None
    ) -> None:
        async def run(services: _Services, deadline: float | None) -> None:
            await services.kv.compact(revision, physical=physical, timeout=deadline, max_attempts=1)

        self._on_cluster("compact", lambda ep: ep._call("compact", run, timeout), mutation=True)

    def downgrade(self, action: str, version: str) -> str:
        """Downgrade validate|enable|cancel (etcd >= 3.6); returns the server's version."""
        if action not in DOWNGRADE_ACTIONS:
            raise EtcdInputError(f"downgrade action must be one of {sorted(DOWNGRADE_ACTIONS)}")

        async def run(services: _Services, deadline: float | None) -> str:
            response = await services.maintenance.downgrade(
                DowngradeAction[action.upper()], version, timeout=deadline, max_attempts=1
            )
            return str(response.version)

        return self._on_cluster(
            f"downgrade {action}", lambda ep: ep._call(f"downgrade {action}", run), mutation=True
        )

    def cluster_version(self) -> str:
        """The version the cluster runs at (the lowest of its members', as etcd decides)."""

        def read(endpoint: EndpointClient) -> str:
            # /version is HTTP and names no cluster: asked only of an endpoint that answers
            # for ours.
            endpoint.verify_cluster()
            return endpoint.version().get("etcdcluster", "")

        return self._on_cluster("read version", read)

    def member_views(
        self, urls: Sequence[str], linearizable: Collection[str] = ()
    ) -> list[MemberView]:
        """Each URL's own member list, asked in parallel: for the URLs in `linearizable`
        through the leader where the member can, else (and for the others) from its local
        state. An endpoint that answers neither gives a view with only `errors`; only bad
        input or an auth failure raises."""
        self._authenticate()
        endpoints = [self.endpoint(url) for url in urls]
        through_leader = {self.endpoint(url).url for url in linearizable}

        async def ask(endpoint: EndpointClient, linearizable: bool) -> MemberView:
            async def run(services: _Services, deadline: float | None) -> MemberView:
                response = await services.cluster.member_list(
                    linearizable=linearizable, timeout=deadline, max_attempts=1
                )
                return MemberView(
                    endpoint=endpoint.url,
                    member_id=member_id_hex(response.header.member_id),
                    cluster_id=member_id_hex(response.header.cluster_id),
                    members=[_member(m) for m in response.members],
                    linearizable=linearizable,
                )

            return await self._bounded(endpoint, run, self.params.timeout)

        async def gather() -> list[tuple[MemberView | BaseException, MemberView | BaseException]]:
            async def both(
                endpoint: EndpointClient,
            ) -> tuple[MemberView | BaseException, MemberView | BaseException]:
                answers: tuple[MemberView | BaseException, MemberView | BaseException]
                if endpoint.url not in through_leader:
                    local = await asyncio.gather(ask(endpoint, False), return_exceptions=True)
                    return local[0], local[0]
                answers = await asyncio.gather(
                    ask(endpoint, True), ask(endpoint, False), return_exceptions=True
                )
                return answers

            with _surveying():
                return list(await asyncio.gather(*(both(ep) for ep in endpoints)))

        views: list[MemberView] = []
        for endpoint, (strict, local) in zip(endpoints, self._runner.run(gather()), strict=True):
            view = strict if isinstance(strict, MemberView) else local
            if isinstance(view, MemberView):
                views.append(view)
                continue
            assert isinstance(strict, BaseException)
            error = translate(
                strict, endpoint=endpoint.url, operation="member list", timeout=self.params.timeout
            )
            if isinstance(error, EtcdInputError) or (
                isinstance(error, EtcdAuthError) and error.reason != "InvalidToken"
            ):
                raise error from strict
            views.append(MemberView(endpoint=endpoint.url, errors=[error.message]))
        return views

    def statuses(self, urls: Sequence[str]) -> list[EndpointStatus]:
        """Status of each URL, queried in parallel. An endpoint that does not answer (or
        answers with an etcd error) gives an unhealthy entry whose `errors` say why; only
        bad input or an auth failure raises."""
        self._authenticate()
        endpoints = [self.endpoint(url) for url in urls]

        async def gather() -> list[EndpointStatus | BaseException]:
            async def one(endpoint: EndpointClient) -> EndpointStatus:
                return await self._bounded(
                    endpoint, lambda _s, t: endpoint._status(t), self.params.timeout
                )

            with _surveying():
                return await asyncio.gather(*(one(ep) for ep in endpoints), return_exceptions=True)

        results: list[EndpointStatus] = []
        for endpoint, outcome in zip(endpoints, self._runner.run(gather()), strict=True):
            if isinstance(outcome, EndpointStatus):
                results.append(outcome)
                continue
            error = translate(
                outcome, endpoint=endpoint.url, operation="status", timeout=self.params.timeout
            )
            # A member that does not know our token yet is one member's problem, reported as
            # its status; a rejected login or a missing permission concerns every call.
            if isinstance(error, EtcdInputError) or (
                isinstance(error, EtcdAuthError) and error.reason != "InvalidToken"
            ):
                raise error from outcome
            results.append(
                EndpointStatus(endpoint=endpoint.url, healthy=False, errors=[error.message])
            )
        return results


def _alarm(pb: object) -> Alarm:
    kind = pb.alarm  # type: ignore[attr-defined]
    name = AlarmType(kind).name if kind in AlarmType._value2member_map_ else str(kind)
    return Alarm(member_id=member_id_hex(pb.memberID), alarm=name)  # type: ignore[attr-defined]


def _read(path: str | None) -> bytes | None:
    if path is None:
        return None
    with open(path, "rb") as handle:
        return handle.read()
