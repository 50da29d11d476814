"""The etcd_member module's work: a member brought to the state asked (present, as a voter or
a learner, or absent), through the plan of etcd_membership and the steps of etcd_member_ops;
in check mode the plan alone, said as what would have been done."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from etcd_runbook.clients.etcd_client import EtcdClient
from etcd_runbook.clients.etcd_common import ConnectionParams, parse_url
from etcd_runbook.clients.etcd_errors import EtcdQuorumRefusedError
from etcd_runbook.operations.etcd_health import ClusterHealth, cluster_health
from etcd_runbook.operations.etcd_member_ops import execute, membership_text
from etcd_runbook.operations.etcd_membership import MemberPlan, plan_absent, plan_present

Params = dict[str, Any]


def member_state(
    params: Params, *, check_mode: bool, diff: bool, warn: Callable[[str], None]
) -> dict[str, Any]:
    """The module's result for its params; `warn` is told what the plan warns of."""
    connection = ConnectionParams.from_module_params(params)
    for url in params["peer_urls"]:
        parse_url(url, what="peer URL")
    with EtcdClient(connection) as client:
        health, plan = _planned(client, params)
        for warning in plan.warnings:
            warn(warning)
        member, members, retries = plan.member, plan.members_after, 0
        if plan.steps and not check_mode:
            member, members, retries = execute(client, health, plan, params)
    message = plan.message if plan.steps else plan.message + "; nothing to do"
    if plan.steps and check_mode:
        message = "would have " + message
    result: dict[str, Any] = {
        "changed": bool(plan.steps),
        "msg": message,
        "steps": plan.steps,
        "retries": retries,
        "members": [m.as_dict() for m in members],
    }
    if member is not None:
        result["member"] = member.as_dict()
    if plan.transferee is not None:
        result["leader_moved_to"] = plan.transferee.as_dict()
    if diff:
        result["diff"] = {
            "before": membership_text(health.members),
            "after": membership_text(members),
        }
    return result


def _planned(client: EtcdClient, params: Params) -> tuple[ClusterHealth, MemberPlan]:
    """The plan on a look at the cluster. A refusal for too few healthy voting members is
    looked at again each second for `quorum_wait` seconds before it stands: on a loaded
    machine a healthy member misses a health check now and then, and one such miss failed a
    break-glass member replace (two molecule scenarios at once, 2 of 2 voters needed)."""
    deadline = time.monotonic() + params["quorum_wait"]
    while True:
        health = cluster_health(client)
        try:
            if params["state"] == "present":
                plan = plan_present(health, params["name"], params["peer_urls"], params["learner"])
            else:
                plan = plan_absent(health, params["name"], params["peer_urls"], params["force"])
        except EtcdQuorumRefusedError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(1)
            continue
        return health, plan
