"""The cluster's health as the modules judge it: every member asked for its own status.

The given endpoints may be only some members (or port-forwards whose URLs differ from the
advertised ones), so each member is looked up first among the given endpoints that answered
as that member, then through its advertised client URLs. A member that does not answer is
unhealthy; that is data, not an error, as long as the member list itself could be read.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ansible.module_utils.etcd_client import EtcdClient
from ansible.module_utils.etcd_common import EndpointStatus, Member


def quorum_of(voters: int) -> int:
    return voters // 2 + 1


@dataclass
class ClusterHealth:
    cluster_id: str
    members: list[Member]
    statuses: list[EndpointStatus]
    member_status: dict[str, EndpointStatus] = field(default_factory=dict)
    leader_id: str | None = None

    def member(self, member_id: str | None) -> Member | None:
        return next((m for m in self.members if m.id == member_id), None)

    @property
    def leader(self) -> Member | None:
        return self.member(self.leader_id)

    @property
    def voters(self) -> list[Member]:
        return [m for m in self.members if not m.is_learner]

    @property
    def learners(self) -> list[Member]:
        return [m for m in self.members if m.is_learner]

    def is_healthy(self, member_id: str) -> bool:
        status = self.member_status.get(member_id)
        return status is not None and status.healthy

    @property
    def healthy_voters(self) -> list[Member]:
        return [m for m in self.voters if self.is_healthy(m.id)]

    def quorum(self) -> dict[str, Any]:
        voters = len(self.voters)
        healthy = len(self.healthy_voters)
        needed = quorum_of(voters)
        return {
            "voters": voters,
            "healthy_voters": healthy,
            "needed": needed,
            "ok": healthy >= needed,
        }

    def endpoints_except(self, member_id: str) -> list[str]:
        """URLs that reach healthy members other than `member_id` (given endpoints first)."""
        urls = [s.endpoint for s in self.statuses if s.healthy and s.member_id != member_id]
        for member in self.members:
            if member.id != member_id and self.is_healthy(member.id):
                urls += [url for url in member.client_urls if url not in urls]
        return urls

    def endpoints_of(self, member_id: str) -> list[str]:
        """URLs to reach this member: given endpoints that answered as it, then its own."""
        urls = [s.endpoint for s in self.statuses if s.member_id == member_id and s.healthy]
        member = self.member(member_id)
        if member is not None:
            urls += [url for url in member.client_urls if url not in urls]
        return urls


def cluster_health(client: EtcdClient) -> ClusterHealth:
    """Member list plus the status of every member (raises only if no endpoint answers)."""
    cluster_id, members = client.cluster_members()
    statuses = client.statuses(list(client.params.endpoints))
    answered = {s.member_id for s in statuses if s.healthy}
    queried = {s.endpoint for s in statuses}
    extra = [
        url
        for m in members
        if m.id not in answered
        for url in m.client_urls
        if url.rstrip("/") not in queried
    ]
    if extra:
        statuses += client.statuses(extra)
    health = ClusterHealth(cluster_id=cluster_id, members=members, statuses=statuses)
    for status in statuses:
        if status.member_id is None:
            continue
        current = health.member_status.get(status.member_id)
        if current is None or (status.healthy and not current.healthy):
            health.member_status[status.member_id] = status
    # An unreachable member's entry is keyed by nothing yet: record why it is unhealthy.
    for member in members:
        if member.id in health.member_status:
            continue
        errors = [e for s in statuses if s.endpoint in member.client_urls for e in s.errors]
        if not member.client_urls:
            errors = ["the member has not started yet (it has no client URLs)"]
        health.member_status[member.id] = EndpointStatus(
            endpoint=member.client_urls[0] if member.client_urls else "",
            healthy=False,
            member_id=member.id,
            errors=errors or ["no endpoint of this member answered"],
        )
    votes = Counter(
        s.leader for s in health.member_status.values() if s.healthy and s.leader is not None
    )
    if votes:
        health.leader_id = votes.most_common(1)[0][0]
    return health
