"""Maintenance helpers on top of the shared client: finding a member, judging that the
cluster is healthy enough, and the few reads the shared client does not offer yet
(a read at a revision, the Status fields etcd 3.6 added).

The extra reads go through `EndpointClient._call`, so they get the same auth, deadline and
error translation as every other call.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from etcd_runbook.clients.etcd_client import EndpointClient, EtcdClient
from etcd_runbook.clients.etcd_common import Member, describe, normalize_url
from etcd_runbook.clients.etcd_errors import (
    EtcdInputError,
    EtcdModuleError,
    EtcdRefusedError,
    EtcdServerError,
)
from etcd_runbook.operations.etcd_health import ClusterHealth, cluster_health

HEALTH_POLL_SECONDS = 0.5


def resolve_member(health: ClusterHealth, ref: str) -> Member:
    """A member by name, hex ID or one of its client URLs."""
    wanted = ref.strip()
    for member in health.members:
        if wanted in (member.name, member.id):
            return member
    if "://" in wanted:
        url = normalize_url(wanted)
        for member in health.members:
            if url in {normalize_url(u) for u in member.client_urls}:
                return member
        for status in health.statuses:
            if normalize_url(status.endpoint) == url and status.member_id:
                found = health.member(status.member_id)
                if found is not None:
                    return found
    known = ", ".join(describe(m) for m in health.members)
    raise EtcdInputError(f"no member '{ref}' in the cluster (members: {known})")


def member_endpoint(client: EtcdClient, health: ClusterHealth, member: Member) -> EndpointClient:
    """A client for a URL at which `member` answered its status."""
    if not health.is_healthy(member.id):
        status = health.member_status.get(member.id)
        why = "; ".join(status.errors) if status else "it did not answer"
        raise EtcdModuleError(
            f"member {describe(member)} is not reachable or not healthy: {why}",
            reason="MemberUnhealthy",
        )
    return client.endpoint(health.endpoints_of(member.id)[0])


def require_healthy(health: ClusterHealth, operation: str, *, allow_learners: bool = False) -> None:
    """Refuse unless every member answers, agrees on one leader, and (unless allowed) no
    learner is catching up."""
    problems = []
    for member in health.members:
        if not health.is_healthy(member.id):
            status = health.member_status.get(member.id)
            why = "; ".join(status.errors) if status and status.errors else "no answer"
            problems.append(f"member {describe(member)} is unhealthy ({why})")
    leaders = {
        s.leader for s in health.member_status.values() if s.healthy and s.leader is not None
    }
    if health.leader_id is None or len(leaders) > 1:
        problems.append(f"the members do not agree on one leader ({sorted(leaders) or 'none'})")
    if not allow_learners and health.learners:
        names = ", ".join(describe(m) for m in health.learners)
        problems.append(f"learner {names} is still joining (promote or remove it first)")
    if problems:
        raise EtcdRefusedError(
            f"refusing to {operation}: the cluster is not healthy: " + "; ".join(problems),
            reason="ClusterUnhealthy",
        )


def wait_healthy(
    client: EtcdClient, operation: str, timeout: float, *, allow_learners: bool = False
) -> ClusterHealth:
    """Poll until `require_healthy` passes; raise its refusal when `timeout` runs out."""
    deadline = time.monotonic() + timeout
    while True:
        health = cluster_health(client)
        try:
            require_healthy(health, operation, allow_learners=allow_learners)
            return health
        except EtcdRefusedError as refusal:
            if time.monotonic() >= deadline:
                raise EtcdModuleError(
                    f"{refusal.message} (still so after waiting {timeout:g}s)",
                    reason="ClusterUnhealthy",
                ) from refusal
        time.sleep(HEALTH_POLL_SECONDS)


def read_revision(endpoint: EndpointClient) -> int:
    """The member's current revision, by a linearizable read through it: its backend holds
    at least this revision once the read returns."""

    async def run(services: Any, deadline: float | None) -> Any:
        response = await services.kv.get("\0", timeout=deadline, max_attempts=1)
        return int(response.header.revision)

    return int(endpoint._call("read revision", run))


def readable_at(endpoint: EndpointClient, revision: int) -> bool:
    """False when `revision` is compacted away (a read at it fails with "compacted")."""

    async def run(services: Any, deadline: float | None) -> Any:
        await services.kv.get(
            "\0", revision=revision, count_only=True, timeout=deadline, max_attempts=1
        )

    try:
        endpoint._call("read at revision", run)
    except EtcdServerError as error:
        if error.reason == "Compacted":
            return False
        raise
    return True


def compacted_revision(endpoint: EndpointClient, current: int) -> int:
    """The cluster's compaction point, found by bisection over reads at a revision: every
    revision below it fails with "compacted", it and every one after it can be read. etcd
    has no call that reports it directly except HashKV, which hashes the whole keyspace."""
    if readable_at(endpoint, 1):
        return 0
    low, high = 1, current  # low: not readable; high: readable (the current revision)
    while high - low > 1:
        middle = (low + high) // 2
        if readable_at(endpoint, middle):
            high = middle
        else:
            low = middle
    return high


@dataclass(frozen=True)
class StatusExtras:
    """Status fields the shared EndpointStatus does not carry (0/empty before etcd 3.6)."""

    revision: int
    db_size_quota: int
    storage_version: str
    downgrade_enabled: bool
    downgrade_target: str


def status_extras(endpoint: EndpointClient) -> StatusExtras:
    async def run(services: Any, deadline: float | None) -> Any:
        response = await services.maintenance.status(timeout=deadline, max_attempts=1)
        info = response.downgradeInfo
        return StatusExtras(
            revision=int(response.header.revision),
            db_size_quota=int(response.dbSizeQuota),
            storage_version=str(response.storageVersion),
            downgrade_enabled=bool(info.enabled),
            downgrade_target=str(info.targetVersion),
        )

    result: StatusExtras = endpoint._call("status", run)
    return result
