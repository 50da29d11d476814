"""Moving etcd's leadership: the one way every module does it.

MoveLeader must be served by the leader itself, so each of the leader's URLs is tried in turn;
then the transfer counts as done only when every healthy member follows the new leader (a
member still following the old one would forward a request to it)."""

from __future__ import annotations

import time

from etcd_runbook.clients.etcd_client import EtcdClient
from etcd_runbook.clients.etcd_common import Member, describe
from etcd_runbook.clients.etcd_errors import (
    EtcdModuleError,
    EtcdTimeoutError,
    EtcdUnreachableError,
)
from etcd_runbook.operations.etcd_health import ClusterHealth, cluster_health

POLL_SECONDS = 0.2


def transfer_leadership(
    client: EtcdClient,
    health: ClusterHealth,
    target: Member,
    timeout: float,
) -> None:
    """Hand leadership to `target` and wait up to `timeout` s until every healthy member
    follows it."""
    leader = health.leader
    if leader is None:
        raise EtcdModuleError(
            "the cluster has no leader: quorum is probably lost", reason="NoLeader"
        )
    failures = []
    for url in health.endpoints_of(leader.id):
        try:
            client.endpoint(url).move_leader(target.id)
            break
        except (EtcdUnreachableError, EtcdTimeoutError) as error:
            failures.append(error.message)
    else:
        raise EtcdModuleError(
            f"cannot move leadership away from {describe(leader)}: none of its client URLs "
            f"answered ({'; '.join(failures) or 'it has none'})",
            reason="LeaderUnreachable",
        )
    deadline = time.monotonic() + timeout
    while True:
        now = cluster_health(client)
        if now.leader_id == target.id and all(
            s.leader == target.id for s in now.member_status.values() if s.healthy
        ):
            return
        if time.monotonic() > deadline:
            raise EtcdModuleError(
                f"{describe(target)} did not become the leader of every member within "
                f"{timeout:g}s (the leader is {now.leader_id})",
                reason="LeaderNotMoved",
            )
        time.sleep(POLL_SECONDS)
