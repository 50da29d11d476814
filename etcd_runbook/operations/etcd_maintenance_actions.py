"""The actions of the etcd_maintenance module: each takes the client, the module params and
check mode, and returns the module result (with a `diff` that `maintain`, the module's one
call, drops unless asked)."""

from __future__ import annotations

import re
from typing import Any

from etcd_runbook.clients.etcd_client import EndpointClient, EtcdClient
from etcd_runbook.clients.etcd_common import Alarm, ConnectionParams, describe
from etcd_runbook.clients.etcd_errors import (
    EtcdInputError,
    EtcdModuleError,
    EtcdRefusedError,
    EtcdServerError,
)
from etcd_runbook.operations.etcd_defrag import plan_defrag, run_defrag
from etcd_runbook.operations.etcd_health import ClusterHealth, cluster_health
from etcd_runbook.operations.etcd_leadership import transfer_leadership
from etcd_runbook.operations.etcd_maintenance_ops import (
    compacted_revision,
    member_endpoint,
    require_healthy,
    resolve_member,
    status_extras,
)

Params = dict[str, Any]


def _leader_endpoint(client: EtcdClient, health: ClusterHealth) -> EndpointClient:
    leader = health.leader
    if leader is None:
        raise EtcdModuleError(
            "the cluster has no leader: quorum is probably lost", reason="NoLeader"
        )
    return member_endpoint(client, health, leader)


# ---- defragment ------------------------------------------------------------------------


def defragment(client: EtcdClient, params: Params, check: bool) -> dict[str, Any]:
    health = cluster_health(client)
    only = resolve_member(health, params["member"]) if params["member"] else None
    corrupt = any(alarm.alarm == "CORRUPT" for alarm in client.alarms())
    plan = plan_defrag(health, only, corrupt)
    if check:
        changed = any(step.reclaimable for step in plan.steps)
        message = f"would defragment {', '.join(plan.order)} in this order"
    else:
        run_defrag(
            client,
            health,
            plan,
            defrag_timeout=params["defrag_timeout"],
            wait_timeout=params["wait_timeout"],
            leader_away=params["leader_away"],
        )
        changed = any(
            step.db_size_after != step.db_size_before or step.leader_moved_to for step in plan.steps
        )
        message = f"defragmented {', '.join(plan.order)} in this order"
    sizes = [step.as_dict() for step in plan.steps]
    return {
        "changed": changed,
        "msg": message,
        "order": plan.order,
        "members": sizes,
        "diff": {
            "before": "".join(f"{s['name']} db_size={s['db_size_before']}\n" for s in sizes),
            "after": "".join(
                f"{s['name']} db_size={s['db_size_after'] or s['db_size_in_use_before']}\n"
                for s in sizes
            ),
        },
    }


# ---- compact ---------------------------------------------------------------------------


def compact(client: EtcdClient, params: Params, check: bool) -> dict[str, Any]:
    health = cluster_health(client)
    endpoint = _leader_endpoint(client, health)
    current = client.current_revision()
    if params["keep"] is not None:
        if params["keep"] < 1:
            raise EtcdInputError("keep must be at least 1")
        target = max(current - params["keep"] + 1, 1)
    else:
        target = params["revision"]
        if target < 1:
            raise EtcdInputError("revision must be at least 1")
        if target > current:
            raise EtcdInputError(
                f"revision {target} is in the future: the cluster is at revision {current}"
            )
    before = compacted_revision(endpoint, current)
    result: dict[str, Any] = {
        "revision": target,
        "current_revision": current,
        "compact_revision_before": before,
        "diff": {"before": f"compact_revision={before}\n", "after": f"compact_revision={target}\n"},
    }
    if target <= before:
        result["diff"]["after"] = result["diff"]["before"]
        message = f"already compacted at revision {before} (>= {target}); nothing to do"
        return {**result, "changed": False, "compact_revision": before, "msg": message}
    if not check:
        try:
            client.compact(target, physical=params["physical"])
        except EtcdServerError as error:
            # Someone compacted at or past the target since we looked: the outcome wanted.
            if error.reason != "Compacted":
                raise
            after = compacted_revision(endpoint, current)
            message = f"already compacted at revision {after} (>= {target})"
            return {**result, "changed": False, "compact_revision": after, "msg": message}
    verb = "would compact" if check else "compacted"
    return {**result, "changed": True, "compact_revision": target, "msg": f"{verb} to {target}"}


# ---- move_leader -----------------------------------------------------------------------


def move_leader(client: EtcdClient, params: Params, check: bool) -> dict[str, Any]:
    health = cluster_health(client)
    target = resolve_member(health, params["to"])
    if target.is_learner:
        raise EtcdRefusedError(
            f"refusing to move leadership to {describe(target)}: it is a learner (not voting)"
        )
    require_healthy(health, "move the leader", allow_learners=True)
    leader = health.leader
    assert leader is not None  # require_healthy refuses a cluster without one
    result: dict[str, Any] = {
        "leader_before": leader.name,
        "diff": {"before": f"leader={leader.name}\n", "after": f"leader={target.name}\n"},
    }
    if leader.id == target.id:
        result["diff"]["after"] = result["diff"]["before"]
        message = f"{describe(target)} is already the leader; nothing to do"
        return {**result, "changed": False, "leader": target.name, "msg": message}
    if not check:
        transfer_leadership(client, health, target, params["wait_timeout"])
    verb = "would move" if check else "moved"
    message = f"{verb} leadership from {describe(leader)} to {describe(target)}"
    return {**result, "changed": True, "leader": target.name, "msg": message}


# ---- disarm_alarms ---------------------------------------------------------------------


def _alarm_text(alarms: list[Alarm]) -> str:
    return "".join(f"{a.member_id} {a.alarm}\n" for a in sorted(alarms, key=lambda a: a.member_id))


def disarm_alarms(client: EtcdClient, params: Params, check: bool) -> dict[str, Any]:
    alarms = client.alarms()
    result: dict[str, Any] = {
        "alarms_before": [a.as_dict() for a in alarms],
        "diff": {"before": _alarm_text(alarms), "after": ""},
    }
    if not alarms:
        return {**result, "changed": False, "alarms": [], "msg": "no alarm is raised"}
    corrupt = [a for a in alarms if a.alarm == "CORRUPT"]
    if corrupt:
        raise EtcdRefusedError(
            "refusing to disarm: a CORRUPT alarm is raised on member "
            f"{', '.join(a.member_id for a in corrupt)}; its data differs from the others'. "
            "Replace that member (remove it, add a new one with an empty data dir), then "
            "disarm by hand",
            reason="CorruptAlarm",
        )
    unknown = [a for a in alarms if a.alarm != "NOSPACE"]
    if unknown:
        raise EtcdRefusedError(f"refusing to disarm alarms of unknown kind: {unknown}")
    health = cluster_health(client)
    quota = _check_space(client, health, params)
    result["quota"] = quota
    if check:
        message = f"would disarm {len(alarms)} NOSPACE alarm(s)"
        return {**result, "changed": True, "alarms": [], "msg": message}
    for member_id in sorted({a.member_id for a in alarms}):
        client.alarm_disarm("NOSPACE", member_id)
    remaining = client.alarms()
    result["diff"]["after"] = _alarm_text(remaining)
    if remaining:
        raise EtcdModuleError(
            f"alarms still raised after disarming: {_alarm_text(remaining).strip()}",
            reason="AlarmsRemain",
        )
    message = f"disarmed {len(alarms)} NOSPACE alarm(s)"
    return {**result, "changed": True, "alarms": [], "msg": message}


def _check_space(client: EtcdClient, health: ClusterHealth, params: Params) -> int:
    """Refuse unless every member's database is below the quota by the margin; returns the
    quota used."""
    margin = params["space_margin"]
    if not 0 <= margin < 100:
        raise EtcdInputError("space_margin must be a percentage from 0 to below 100")
    quotas = []
    full = []
    for member in health.members:
        status = health.member_status[member.id]
        if not status.healthy:
            raise EtcdRefusedError(
                f"refusing to disarm: member {describe(member)} does not answer, so its "
                "database size is unknown",
                reason="ClusterUnhealthy",
            )
        reported = status_extras(client.endpoint(status.endpoint)).db_size_quota
        quota = reported or params["quota_backend_bytes"]
        quotas.append(quota)
        limit = int(quota * (100 - margin) / 100)
        if (status.db_size or 0) >= limit:
            full.append(f"{describe(member)} db_size {status.db_size} >= {limit}")
    if full:
        raise EtcdRefusedError(
            f"refusing to disarm NOSPACE: the database is still within {margin:g}% of the "
            f"quota on {'; '.join(full)}. Compact (action=compact), defragment "
            "(action=defragment), then disarm; or raise --quota-backend-bytes",
            reason="StillFull",
        )
    return min(quotas)


# ---- downgrade -------------------------------------------------------------------------

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?$")


def _minor(version: str, what: str) -> tuple[int, int]:
    match = _VERSION.match(version.strip())
    if match is None:
        raise EtcdInputError(f"{what} '{version}' is not a version like 3.5 or 3.5.0")
    return int(match.group(1)), int(match.group(2))


def downgrade(client: EtcdClient, params: Params, check: bool) -> dict[str, Any]:
    action = params["downgrade_action"]
    major, minor = _minor(params["target_version"], "target_version")
    target = f"{major}.{minor}.0"
    health = cluster_health(client)
    require_healthy(health, f"downgrade {action}")
    versions = {s.version for s in health.member_status.values() if s.version}
    oldest = min((_minor(v, "server version") for v in versions), default=(0, 0))
    if oldest < (3, 5):
        raise EtcdRefusedError(
            f"refusing to downgrade {action}: etcd {min(versions)} has no downgrade API "
            "(it came with 3.5 and works from 3.6)",
            reason="Unsupported",
        )
    if oldest < (3, 6) and action != "validate":
        raise EtcdRefusedError(
            f"refusing to downgrade {action}: every member must run etcd 3.6 or newer (found "
            f"{', '.join(sorted(versions))}); 3.5's experimental downgrade enable times out",
            reason="Unsupported",
        )
    extras = status_extras(_leader_endpoint(client, health))
    state = {"enabled": extras.downgrade_enabled, "target_version": extras.downgrade_target}
    result: dict[str, Any] = {
        "downgrade": state,
        "diff": {"before": _downgrade_text(state), "after": _downgrade_text(state)},
    }
    if action == "validate" or check:
        version = client.downgrade("validate", target)
        result["cluster_version"] = version
        if action == "validate":
            message = f"the cluster (version {version}) may be downgraded to {target}"
            return {**result, "changed": False, "msg": message}
    wanted = {"enabled": action == "enable", "target_version": target if action == "enable" else ""}
    if state["enabled"] == wanted["enabled"] and (
        not wanted["enabled"] or state["target_version"] == target
    ):
        now = f"to {target} already enabled" if wanted["enabled"] else "not enabled"
        message = f"downgrade {now}; nothing to do"
        return {**result, "changed": False, "msg": message}
    if state["enabled"] and action == "enable":
        raise EtcdRefusedError(
            f"a downgrade to {state['target_version']} is already enabled: cancel it first"
        )
    result["diff"]["after"] = _downgrade_text(wanted)
    if check:
        return {**result, "changed": True, "downgrade": wanted, "msg": f"would {action} downgrade"}
    result["cluster_version"] = client.downgrade(action, target)
    after = status_extras(_leader_endpoint(client, health))
    result["downgrade"] = {
        "enabled": after.downgrade_enabled,
        "target_version": after.downgrade_target,
    }
    return {**result, "changed": True, "msg": f"downgrade {action} to {target} done"}


def _downgrade_text(state: dict[str, Any]) -> str:
    return f"downgrade enabled={state['enabled']} target={state['target_version']}\n"


# ---- the module ------------------------------------------------------------------------

ACTIONS = {
    "defragment": defragment,
    "compact": compact,
    "move_leader": move_leader,
    "disarm_alarms": disarm_alarms,
    "downgrade": downgrade,
}


def maintain(params: Params, *, check_mode: bool, diff: bool) -> dict[str, Any]:
    """The etcd_maintenance module's work: its `action` on the cluster of `endpoints`; the
    result's `diff` only when asked for."""
    with EtcdClient(ConnectionParams.from_module_params(params)) as client:
        result = ACTIONS[params["action"]](client, params, check_mode)
    if not diff:
        result.pop("diff", None)
    return result
