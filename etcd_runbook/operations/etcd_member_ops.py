"""The steps of the etcd_member module, each safe to repeat: add, update, promote (retried
while the learner catches up), move the leader away, remove. The plan of which steps to take is
made by etcd_membership."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from etcd_runbook.clients.etcd_client import EtcdClient
from etcd_runbook.clients.etcd_common import Member, describe
from etcd_runbook.clients.etcd_errors import EtcdModuleError, EtcdServerError
from etcd_runbook.operations.etcd_health import ClusterHealth
from etcd_runbook.operations.etcd_leadership import transfer_leadership
from etcd_runbook.operations.etcd_membership import MemberPlan

PROMOTE_RETRY_SECONDS = 1.0
# etcd refuses membership changes as "unhealthy cluster" until the member serving the request
# has been connected to its peers for 5 s (its HealthInterval), e.g. right after a member
# (re)started. Nothing was applied then, so the request is repeated for a while.
UNHEALTHY_WAIT_SECONDS = 15.0

T = TypeVar("T")


def while_settling(action: Callable[[], T]) -> T:
    deadline = time.monotonic() + UNHEALTHY_WAIT_SECONDS
    while True:
        try:
            return action()
        except EtcdServerError as error:
            if error.reason != "UnhealthyCluster" or time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def membership_text(members: list[Member]) -> str:
    """One line per member, sorted, for --diff."""
    lines = sorted(
        f"{m.name or '(not started)'} id={m.id} peer_urls={','.join(sorted(m.peer_urls))} "
        f"{'learner' if m.is_learner else 'voter'}"
        for m in members
    )
    return "".join(line + "\n" for line in lines)


def promote(client: EtcdClient, member: Member, timeout: float) -> tuple[list[Member], int]:
    """Promote, retrying while the learner has not caught up; returns (members, retries)."""
    deadline = time.monotonic() + timeout
    retries = 0
    while True:
        try:
            return client.member_promote(member.id), retries
        except EtcdServerError as error:
            if error.reason == "NotALearner":
                # An earlier attempt was applied although its answer was lost.
                return client.member_list(), retries
            if error.reason not in ("LearnerNotReady", "LeaderChanged", "UnhealthyCluster"):
                raise
            if time.monotonic() + PROMOTE_RETRY_SECONDS > deadline:
                raise EtcdModuleError(
                    f"learner {describe(member)} did not catch up with the leader within "
                    f"{timeout:g}s ({retries + 1} promotion attempts refused by etcd: "
                    f"'{error.etcd_message}'); check that its etcd runs with "
                    "--initial-cluster-state=existing and reaches the other members' peer URLs",
                    reason="LearnerNotReady",
                ) from error
        retries += 1
        time.sleep(PROMOTE_RETRY_SECONDS)


def remove(client: EtcdClient, health: ClusterHealth, member: Member) -> list[Member]:
    others = health.endpoints_except(member.id)
    try:
        return while_settling(partial(client.member_remove, member.id, via=others))
    except EtcdServerError as error:
        if error.reason != "MemberNotFound":
            raise
        # An earlier attempt was applied although its answer was lost.
        return client.member_list()


def execute(
    client: EtcdClient, health: ClusterHealth, plan: MemberPlan, params: dict[str, Any]
) -> tuple[Member | None, list[Member], int]:
    """Run the plan's steps; returns (member after, members after, promote retries)."""
    member = plan.member
    members = health.members
    retries = 0
    for step in plan.steps:
        assert member is not None
        if step == "add":
            member = while_settling(
                partial(client.member_add, params["peer_urls"], learner=params["learner"])
            )
            members = client.member_list()
        elif step == "update":
            members = while_settling(partial(client.member_update, member.id, params["peer_urls"]))
        elif step == "promote":
            members, retries = promote(client, member, params["promote_timeout"])
        elif step == "move_leader":
            assert plan.transferee is not None
            transfer_leadership(client, health, plan.transferee, client.params.timeout)
        elif step == "remove":
            members = remove(client, health, member)
    if member is not None and params["state"] == "present":
        member = next((m for m in members if m.id == member.id), member)
    return member, members, retries
