"""Membership decisions: which change brings the cluster to the wanted state, and whether
etcd's safety rules allow it. Pure functions over a `ClusterHealth`, so check mode, the
real run and the unit tests share one decision.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from etcd_runbook.clients.etcd_common import Member, describe, normalize_url
from etcd_runbook.clients.etcd_errors import (
    EtcdInputError,
    EtcdQuorumRefusedError,
    EtcdRefusedError,
)
from etcd_runbook.operations.etcd_health import ClusterHealth, quorum_of

# Placeholder ID of a member that check mode predicts etcd would add.
PREDICTED_ID = "(new)"


@dataclass
class MemberPlan:
    """Steps to run, in order: add, update, promote, move_leader, remove."""

    steps: list[str]
    member: Member | None
    members_after: list[Member]
    message: str
    transferee: Member | None = None
    warnings: list[str] = field(default_factory=list)


def _url_set(urls: Sequence[str]) -> set[str]:
    return {normalize_url(url) for url in urls}


def find_member(members: Sequence[Member], name: str, peer_urls: Sequence[str]) -> Member | None:
    """The member called `name`, else the one holding one of `peer_urls` (a member added
    but not started yet has no name in etcd, only its peer URLs)."""
    wanted = _url_set(peer_urls)
    holders = [m for m in members if wanted & _url_set(m.peer_urls)]
    named = next((m for m in members if m.name == name), None)
    if named is not None:
        others = [m for m in holders if m.id != named.id]
        if others:
            raise EtcdInputError(
                f"peer URLs {list(peer_urls)} of member {name} are used by another member, "
                f"{describe(others[0])}"
            )
        return named
    if not holders:
        return None
    holder = holders[0]
    if holder.name and holder.name != name:
        raise EtcdInputError(
            f"peer URLs {list(peer_urls)} belong to member {describe(holder)}, not to {name}"
        )
    return holder


def _require_quorum(health: ClusterHealth, action: str) -> None:
    quorum = health.quorum()
    if not quorum["ok"]:
        raise EtcdQuorumRefusedError(
            f"refusing to {action}: the cluster has no quorum ({quorum['healthy_voters']} of "
            f"{quorum['voters']} voting members healthy, {quorum['needed']} needed); "
            "membership changes need a healthy quorum"
        )


def _replace(members: Sequence[Member], new: Member) -> list[Member]:
    return [new if m.id == new.id else m for m in members]


def plan_present(
    health: ClusterHealth, name: str, peer_urls: Sequence[str], learner: bool
) -> MemberPlan:
    member = find_member(health.members, name, peer_urls)
    if member is None:
        if not peer_urls:
            raise EtcdInputError(
                f"no member named {name} exists, and peer_urls are needed to add it (a member "
                "added but not started yet has no name in etcd: give its peer_urls to find it)"
            )
        if learner and health.learners:
            raise EtcdRefusedError(
                f"refusing to add {name} as a learner: the cluster already has learner "
                f"{describe(health.learners[0])} and etcd allows one learner at a time; "
                "promote or remove that learner first"
            )
        _require_quorum(health, f"add member {name}")
        new = Member(id=PREDICTED_ID, name="", peer_urls=list(peer_urls), is_learner=learner)
        kind = "learner" if learner else "voting member"
        return MemberPlan(
            ["add"],
            new,
            [*health.members, new],
            f"added {name} as a {kind}; start its etcd with --initial-cluster-state=existing",
        )

    steps: list[str] = []
    after = member
    warnings: list[str] = []
    if peer_urls and _url_set(peer_urls) != _url_set(member.peer_urls):
        steps.append("update")
        after = dataclasses.replace(after, peer_urls=list(peer_urls))
    if member.is_learner and not learner:
        steps.append("promote")
        after = dataclasses.replace(after, is_learner=False)
    if learner and not member.is_learner:
        warnings.append(
            f"{describe(member)} is already a voting member; learner=true never demotes"
        )
    if not steps:
        return MemberPlan(
            [], member, list(health.members), f"{describe(member)} is as wanted", warnings=warnings
        )
    _require_quorum(health, f"change member {name}")
    done = {"update": "updated the peer URLs of", "promote": "promoted"}
    message = " and ".join(done[s] for s in steps) + f" {describe(member)}"
    return MemberPlan(steps, after, _replace(health.members, after), message, warnings=warnings)


def pick_transferee(health: ClusterHealth, leaving: str) -> Member | None:
    """The healthy voter, other than `leaving`, furthest along the raft log."""
    candidates = [m for m in health.healthy_voters if m.id != leaving]

    def progress(member: Member) -> int:
        status = health.member_status[member.id]
        return status.raft_applied_index or status.raft_index or 0

    return max(candidates, key=progress, default=None)


def plan_absent(
    health: ClusterHealth, name: str, peer_urls: Sequence[str], force: bool
) -> MemberPlan:
    member = find_member(health.members, name, peer_urls)
    if member is None:
        return MemberPlan([], None, list(health.members), f"no member named {name} exists")
    if peer_urls and not _url_set(peer_urls) & _url_set(member.peer_urls):
        # The name is the member's own word; its peer URL (scheme, host, port) is who it is in
        # the membership: a member of another namespace's cluster of the same name may carry
        # the same name.
        raise EtcdRefusedError(
            f"refusing to remove {describe(member)}: it is named {name} but its peer URLs "
            f"{list(member.peer_urls)} are none of {list(peer_urls)}, so it is not taken for "
            f"{name}; remove it by its own peer URLs if it must go"
        )
    remaining = [m for m in health.members if m.id != member.id]
    if not member.is_learner and not force:
        _refuse_unsafe_removal(health, member)
    steps = []
    transferee = None
    if member.id == health.leader_id:
        transferee = pick_transferee(health, member.id)
        if transferee is not None:
            steps.append("move_leader")
        elif not force:
            raise EtcdRefusedError(
                f"refusing to remove {describe(member)}: it is the leader and no other healthy "
                "voting member can take over leadership first"
            )
    steps.append("remove")
    return MemberPlan(steps, member, remaining, f"removed {describe(member)}", transferee)


def _refuse_unsafe_removal(health: ClusterHealth, member: Member) -> None:
    voters = health.voters
    if len(voters) <= 2:
        raise EtcdRefusedError(
            f"refusing to remove {describe(member)}: the cluster has {len(voters)} voting "
            "members, and removing one from a two-member cluster risks losing quorum if the "
            "other fails during the change; add a member first (or set force=true)"
        )
    remaining = [v for v in voters if v.id != member.id]
    healthy = [v for v in remaining if health.is_healthy(v.id)]
    needed = quorum_of(len(remaining))
    if len(healthy) < needed:
        unhealthy = [describe(v) for v in remaining if not health.is_healthy(v.id)]
        raise EtcdQuorumRefusedError(
            f"refusing to remove {describe(member)}: afterwards only {len(healthy)} of the "
            f"{len(remaining)} remaining voting members would be healthy, below the quorum of "
            f"{needed} (unhealthy: {', '.join(unhealthy)}); remove or repair the failed "
            "member first (or set force=true)"
        )
