"""The cluster's health as the modules judge it: every member asked for its own status.

The given endpoints may be only some members (or port-forwards whose URLs differ from the
advertised ones), so each member is looked up first among the given endpoints that answered
as that member, then through its advertised client URLs. A member that does not answer is
unhealthy; that is data, not an error, as long as the member list itself could be read.

The member list is not taken on one endpoint's word: every endpoint is asked for its own
(a "view"), and the list most of them report is the cluster's, among views of the expected
cluster ID when one is given. Endpoints that answer for another cluster (a member that forked
off, a stranger on a reused address) are distrusted: no call goes through them.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from etcd_runbook.clients.etcd_client import EtcdClient
from etcd_runbook.clients.etcd_common import EndpointStatus, Member, MemberView
from etcd_runbook.clients.etcd_errors import (
    EtcdModuleError,
    EtcdRefusedError,
    EtcdUnreachableError,
)


def quorum_of(voters: int) -> int:
    return voters // 2 + 1


@dataclass
class ClusterHealth:
    cluster_id: str
    members: list[Member]
    statuses: list[EndpointStatus]
    member_status: dict[str, EndpointStatus] = field(default_factory=dict)
    leader_id: str | None = None
    views: list[MemberView] = field(default_factory=list)

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


def choose_view(views: Sequence[MemberView], expected: str | None) -> MemberView | None:
    """The view most endpoints share (of the expected cluster when given); linearizable
    answers outrank answers from local state."""
    answered = [v for v in views if v.cluster_id and (not expected or v.cluster_id == expected)]
    if not answered:
        return None
    tally = Counter((v.cluster_id, tuple(v.member_ids)) for v in answered)
    strict = Counter((v.cluster_id, tuple(v.member_ids)) for v in answered if v.linearizable)
    best = max(tally, key=lambda key: (strict[key], tally[key]))
    return max(
        (v for v in answered if (v.cluster_id, tuple(v.member_ids)) == best),
        key=lambda v: v.linearizable,
    )


def _views(
    client: EtcdClient, urls: list[str], statuses: list[EndpointStatus]
) -> tuple[MemberView, list[MemberView]]:
    """The chosen view and every view, members not among the given endpoints asked too. Only
    an endpoint that knows a leader is asked for a linearizable list: without one it could only
    time out. Nor, while another endpoint answered, is one that did not answer its status
    asked at all: a hung member (a lost node, a stopped process) would make the look wait out
    the call timeout once more."""
    led = {s.endpoint for s in statuses if s.leader}
    mute = {s.endpoint: s for s in statuses if s.member_id is None}
    if len(mute) == len(statuses):
        mute = {}
    answering = [url for url in urls if client.endpoint(url).url not in mute]
    views = client.member_views(answering, linearizable=led) + [
        MemberView(
            endpoint=status.endpoint,
            errors=[f"not asked for its member list: {'; '.join(status.errors) or 'no answer'}"],
        )
        for status in mute.values()
    ]
    chosen = choose_view(views, client.expected_cluster_id)
    if chosen is not None and client.params.advertised:
        heard = {v.member_id for v in views if v.cluster_id}
        asked = {v.endpoint for v in views}
        extra = [
            url
            for m in chosen.members
            if m.id not in heard
            for url in m.client_urls
            if url.rstrip("/") not in asked
        ]
        if extra:
            views += client.member_views(extra, linearizable=extra)
            chosen = choose_view(views, client.expected_cluster_id) or chosen
    if chosen is None:
        others = sorted({v.cluster_id for v in views if v.cluster_id})
        if others:
            raise EtcdRefusedError(
                f"no endpoint answers for cluster {client.expected_cluster_id}: the members that "
                f"answered belong to cluster {', '.join(others)}"
            )
        reasons = "; ".join(e for v in views for e in v.errors)
        raise EtcdUnreachableError(f"member list failed on every endpoint: {reasons}")
    client.distrust([v.endpoint for v in views if is_stranger(v, chosen)])
    # Every later answer, a change's included, must come from the chosen cluster.
    client.expect_cluster(chosen.cluster_id or "")
    return chosen, views


def is_stranger(view: MemberView, chosen: MemberView) -> bool:
    """A view of another cluster, or a leader of its own under the same cluster ID (a fork):
    its linearizable list does not even hold a quorum of the chosen list's voters."""
    if not view.cluster_id:
        return False
    if view.cluster_id != chosen.cluster_id:
        return True
    voters = {m.id for m in chosen.members if not m.is_learner}
    shared = len(set(view.member_ids) & voters)
    return view.linearizable and shared < quorum_of(len(voters))


def cluster_health(client: EtcdClient) -> ClusterHealth:
    """Member list plus the status of every member (raises only if no endpoint answers)."""
    given = list(client.params.endpoints)
    statuses = client.statuses(given)
    # The calls made through any one endpoint (alarms, the cluster version) go first to those
    # that answered, healthy ones first, instead of waiting on a hung one that comes first.
    client.prefer(
        [s.endpoint for s in statuses if s.healthy]
        + [s.endpoint for s in statuses if not s.healthy and s.member_id is not None]
    )
    chosen, views = _views(client, given, statuses)
    cluster_id, members = chosen.cluster_id or "", chosen.members
    answered = {s.member_id for s in statuses if s.healthy and s.cluster_id == cluster_id}
    queried = {s.endpoint for s in statuses}
    extra = [
        url
        for m in members
        if m.id not in answered and client.params.advertised
        for url in m.client_urls
        if url.rstrip("/") not in queried
    ]
    if extra:
        statuses += client.statuses(client.trusted(extra))
    # A member of another cluster answering on a member's address is not that member.
    foreign = [s for s in statuses if s.cluster_id and s.cluster_id != cluster_id]
    client.distrust([s.endpoint for s in foreign])
    statuses = [
        dataclasses.replace(
            s,
            healthy=False,
            errors=[*s.errors, f"answers for another cluster, {s.cluster_id}, not {cluster_id}"],
        )
        if s in foreign
        else s
        for s in statuses
    ]
    health = ClusterHealth(cluster_id=cluster_id, members=members, statuses=statuses, views=views)
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
        elif not errors and not client.params.advertised:
            errors = ["none of the endpoints asked answered as this member"]
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


def cluster_info(client: EtcdClient) -> dict[str, Any]:
    """What etcd_cluster_info returns: the agreed member list, each member's health, leader,
    quorum, cluster version and (with quorum) alarms."""
    health = cluster_health(client)
    alarms = client.alarms() if health.quorum()["ok"] else []
    try:
        cluster_version = client.cluster_version()
    except EtcdModuleError:
        cluster_version = ""
    leader = health.leader
    members = [{**m.as_dict(), "healthy": health.is_healthy(m.id)} for m in health.members]
    return {
        "cluster_id": health.cluster_id,
        "cluster_version": cluster_version,
        "members": members,
        "status": [s.as_dict() for s in health.statuses],
        "views": [v.as_dict() for v in health.views],
        "leader": {"id": leader.id, "name": leader.name} if leader else None,
        "quorum": health.quorum(),
        "healthy": all(m["healthy"] for m in members),
        "alarms": [a.as_dict() for a in alarms],
    }
