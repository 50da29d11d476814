"""The report of a run: status, conditions (Available, Progressing, Degraded) and Events, from
the observation and the plan made from it."""

from __future__ import annotations

from typing import Any

from etcd_runbook.names import LABEL_CLUSTER, LABEL_VERSION
from etcd_runbook.rules.cluster.common import _deleting, labels_of
from etcd_runbook.rules.cluster.members import LEARNER_CATCH_UP, _fence, learner_age
from etcd_runbook.rules.cluster.observed import _Observed, data_fault, pod_ready
from etcd_runbook.rules.cluster.recovery import majority_lost_message
from etcd_runbook.rules.cluster.space import last_defragmented, space_recheck

# Seconds until a run that saw a Ready member Pod whose member etcd did not yet count healthy
# looks again.
LAGGING_RECHECK = 5

# Seconds until a run of a quorum recovery under way looks again.
RECOVERY_RECHECK = 5

# Seconds until a run that saw a member's node lost looks again: a node that comes back can
# turn Ready after the last event the operator watches (its Lease renewed, its Pods Ready), and
# nothing else would look before the node loss came due.
NODE_LOST_RECHECK = 15

# The phases of a quorum recovery in which the cluster is not yet back (recover_steps.py).
RECOVERING = ("Fencing", "Stopping", "Restoring", "Starting", "Failed")


def _recovering(p: dict[str, Any]) -> bool:
    """A quorum recovery under way and not failed."""
    return (p["recovery"] or {}).get("phase") in RECOVERING[:-1]


def _waiting_for_restore(o: _Observed) -> str:
    """Why the cluster has no member yet while its restore runs, or ''."""
    if o.restore and not o.known and (not o.claims or o.restoring):
        return (
            f"the first member's data is being restored by EtcdRestore {o.restore}; members "
            "start once it is written"
        )
    return ""


def _available(o: _Observed, p: dict[str, Any]) -> tuple[bool, str, str]:
    if o.known and o.quorum.get("ok"):
        q = o.quorum
        return (
            True,
            "QuorumHealthy",
            f"{q['healthy_voters']} of {q['voters']} voting members healthy, {q['needed']} needed",
        )
    # A quorum recovery under way says where it stands, not what it is repairing.
    if (p["recovery"] or {}).get("phase") in RECOVERING:
        return False, "Recovering", p["recovery"]["message"]
    # Waiting for a restore is a cluster still being created, not one that lost its quorum.
    if waiting := _waiting_for_restore(o):
        return False, "Creating", waiting
    if not o.known and not o.pods and not o.live_claims:
        return False, "Creating", "no member has been started yet"
    if p["majority_lost"]:
        return False, "MajorityDataLost", majority_lost_message(p["majority_lost"])
    if o.known:
        q = o.quorum
        return (
            False,
            "QuorumLost",
            f"{q.get('healthy_voters')} of {q.get('voters')} voting members healthy, "
            f"{q.get('needed')} needed: etcd refuses writes and linearizable reads; the "
            "members down keep their data and are brought back",
        )
    return (
        False,
        "QuorumLost",
        "no member answered: " + (o.info_error[:200] or "no member Pod is running"),
    )


def _roll_note(o: _Observed, p: dict[str, Any]) -> str:
    """What a roll not over waits for, said after the members and versions."""
    if not p["roll_pending"] or p["roll"]:
        return ""
    needed = o.spec["min_ready_seconds"]
    waiting = "; ".join(
        f"{n} is on its new Pod, "
        + (
            f"healthy for {int(seconds)} of {needed} s"
            if seconds is not None
            else "not healthy yet"
        )
        for n, seconds in sorted(p["settling"].items())
    )
    if not waiting:
        return ""
    return f"; {waiting} (spec.minReadySeconds) before {p['roll_pending'][0]} restarts" + (
        f", then {', '.join(p['roll_pending'][1:])}" if len(p["roll_pending"]) > 1 else ""
    )


def _node_loss_remedy(loss: dict[str, Any]) -> str:
    if loss["movable"]:
        return "made again on its own volume on another node"
    return "replaced"


def _requeue_after(o: _Observed, p: dict[str, Any], lagging: list[str]) -> float | None:
    """When the run wants to look again though no event may come: a member etcd has yet to
    count healthy behind its Ready Pod, a lost node that may be back, or a lost node's member
    coming due for replacement."""
    if o.hands_off:
        return None
    waits = [float(LAGGING_RECHECK)] if lagging else []
    # A member on its new Pod counted healthy so far: looked at again once it has been so for
    # spec.minReadySeconds, when the roll may go on.
    needed = o.spec["min_ready_seconds"]
    waits.extend(
        max(1.0, needed - seconds + 1) for seconds in p["settling"].values() if seconds is not None
    )
    # A learner coming due for replacement (members.LEARNER_CATCH_UP) is looked at then.
    for m in o.members:
        age = learner_age(o, m["name"]) if m.get("is_learner") and m["name"] else None
        if age is not None and age < LEARNER_CATCH_UP:
            waits.append(max(1.0, LEARNER_CATCH_UP - age + 1))
    # A quorum recovery's Job and Pods queue no run of the cluster: its steps are looked at.
    if _recovering(p):
        waits.append(float(RECOVERY_RECHECK))
    if (space := space_recheck(o)) is not None:
        waits.append(space)
    timeout = o.spec["node_loss_timeout"]
    for loss in p["node_lost"].values():
        if loss["seconds"] is None:
            continue  # the node is gone: nothing comes back
        waits.append(float(NODE_LOST_RECHECK))
        if timeout and loss["seconds"] < timeout:
            waits.append(max(1.0, timeout - loss["seconds"] + 1))
    return min(waits) if waits else None


def _member_status(o: _Observed) -> list[dict[str, Any]]:
    """Each member as status shows it, its version as it says itself when healthy."""
    statuses = {s.get("member_id"): s for s in o.info.get("status") or [] if s.get("healthy")}
    return [
        {
            "name": m["name"],
            "id": m["id"],
            "peerURL": (m.get("peer_urls") or [""])[0],
            "clientURL": (m.get("client_urls") or [""])[0],
            "ready": bool(m.get("healthy")) and not m.get("is_learner"),
            "learner": bool(m.get("is_learner")),
            "version": str((statuses.get(m["id"]) or {}).get("version") or ""),
            **_space_of(o, statuses.get(m["id"]) or {}, m["name"]),
        }
        for m in o.members
    ]


def _space_of(o: _Observed, status: dict[str, Any], name: str) -> dict[str, Any]:
    """A member's database size and in-use size as it last answered, and when a runbook last
    defragmented it (its claim's record)."""
    out: dict[str, Any] = {}
    if status.get("db_size") is not None:
        out["dbSize"] = status["db_size"]
    if status.get("db_size_in_use") is not None:
        out["dbSizeInUse"] = status["db_size_in_use"]
    if when := last_defragmented(o.claims.get(name)):
        out["lastDefragmented"] = when
    return out


def _alarms(o: _Observed) -> list[dict[str, Any]]:
    return [
        {
            "member": next(
                (m["name"] for m in o.members if m["id"] == a.get("member_id")), a.get("member_id")
            ),
            "alarm": a.get("alarm"),
        }
        for a in o.info.get("alarms") or []
    ]


def _seen(
    o: _Observed, p: dict[str, Any], extra_refusals: list[dict[str, str]] | None
) -> dict[str, Any]:
    """What the report is made of: the members, their versions, availability, whether the
    cluster is at its size and on its spec, alarms, and every refusal of the run."""
    members = _member_status(o)
    available, a_reason, a_message = _available(o, p)
    return {
        "refusals": p["refusals"] + [r for r in extra_refusals or [] if r not in p["refusals"]],
        "members": members,
        "versions": sorted({m["version"] for m in members if m["version"]}),
        "available": available,
        "a_reason": a_reason,
        "a_message": a_message,
        "sized": len(members) == o.spec["size"] and all(not m["learner"] for m in members),
        "rolled": o.known
        and not p["roll"]
        and not p["upgrade_waiting"]
        and not p["outdated"]
        and all(
            labels_of(pod).get(LABEL_VERSION) == p["versions"].get(n)
            for n, pod in o.pods.items()
            if n in o.live_claims
        ),
        "alarms": _alarms(o),
        "unhealthy": [m["name"] for m in members if not m["ready"] and not m["learner"]],
    }


def _phase_of(o: _Observed, p: dict[str, Any], r: dict[str, Any]) -> str:
    if o.paused:
        return "Paused"
    if r["a_reason"] == "Creating":
        # A new cluster the runbook refuses (a spec it cannot make, a Secret missing, a name
        # taken) would read Creating for ever: Failed, and Degraded says why. It reads
        # Creating again once the refusal is mended.
        return "Failed" if r["refusals"] else "Creating"
    if not r["available"]:
        if r["a_reason"] == "Recovering":
            return "Recovering"
        return "MajorityDataLost" if p["majority_lost"] else "QuorumLost"
    if not r["sized"]:
        return "Scaling"
    # A roll halted, or held by the allow-lists, is not under way: Degraded says why.
    if not r["rolled"] and not p["halted"] and o.spec["allowed"]:
        return "Upgrading"
    troubles = ("lost_data", "fence", "suspects", "node_lost")
    if r["refusals"] or r["unhealthy"] or r["alarms"] or any(p[k] for k in troubles):
        return "Degraded"
    return "Running"


def _node_lost_message(o: _Observed, p: dict[str, Any]) -> str:
    timeout = o.spec["node_loss_timeout"]
    return "; ".join(
        f"{n}: {loss['why']}"
        + (
            f", {_node_loss_remedy(loss)} after {timeout} s (spec.nodeLossTimeout) unless "
            "it returns"
            if timeout
            else ", waited for (spec.nodeLossTimeout is 0)"
        )
        for n, loss in p["node_lost"].items()
    )


def _member_trouble(o: _Observed, p: dict[str, Any]) -> tuple[str, str] | None:
    """The Degraded reason of a member fenced, suspected, without its data or its node."""
    if p["fence"] or (o.hands_off and _fence(o)):
        fenced = p["fence"] or _fence(o)
        return "MemberFenced", f"{fenced[0]['name']} is fenced: {fenced[0]['reason']}"
    if p["suspects"]:
        suspect = p["suspects"][0]
        return (
            "MemberSuspect",
            f"{suspect['name']}: {suspect['reason']}; not fenced: {suspect['unfenced']}",
        )
    if p["lost_data"]:
        return (
            "MemberDataLost",
            "; ".join(f"{n}: etcd says: {data_fault(o.pods[n])}" for n in p["lost_data"])
            + ": replaced while quorum holds, never restarted under its old identity",
        )
    if p["node_lost"]:
        return "NodeLost", _node_lost_message(o, p)
    return None


def _degraded(o: _Observed, p: dict[str, Any], r: dict[str, Any]) -> tuple[str, str]:
    """The Degraded condition's reason and message: the first trouble, in this order."""
    refusals, alarms = r["refusals"], r["alarms"]
    if refusals:
        return refusals[0]["reason"], refusals[0]["message"]
    if not r["available"] and r["a_reason"] != "Creating":
        return r["a_reason"], r["a_message"]
    if trouble := _member_trouble(o, p):
        return trouble
    if alarms:
        return "Alarm", "; ".join(f"{a['alarm']} on {a['member']}" for a in alarms) + (
            f": writes are refused; {p['space']['why']}"
            if any(a["alarm"] == "NOSPACE" for a in alarms) and p["space"]["why"]
            else ""
        )
    if r["unhealthy"]:
        return "MembersUnhealthy", "not ready: " + ", ".join(r["unhealthy"])
    if p["withheld"]:
        return "ChangesWithheld", p["withheld"]
    return "AllMembersHealthy", "every member is healthy"


def _progressing(o: _Observed, p: dict[str, Any], r: dict[str, Any]) -> tuple[bool, str, str]:
    if o.paused:
        return False, "Paused", "spec.paused is true: the operator changes nothing"
    if r["refusals"]:
        return False, r["refusals"][0]["reason"], r["refusals"][0]["message"]
    if waiting := _waiting_for_restore(o):
        return True, "WaitingForRestore", waiting
    if p["upgrade_waiting"]:
        return True, "SnapshotBeforeUpgrade", p["upgrade_waiting"]
    if p["space"]["action"]:
        reason = "Defragmenting" if p["space"]["action"] == "defragment" else "RecoveringSpace"
        return True, reason, p["space"]["why"]
    members, versions = r["members"], r["versions"]
    if not r["sized"] or not r["rolled"] or r["a_reason"] == "Creating":
        return (
            True,
            "Creating"
            if r["a_reason"] == "Creating"
            else ("Scaling" if not r["sized"] else "Upgrading"),
            f"{len(members)} of {o.spec['size']} members, version "
            f"{'/'.join(versions) or '?'} (spec {o.spec['version']})" + _roll_note(o, p),
        )
    return False, "Reconciled", f"{len(members)} members on etcd {'/'.join(versions)}"


def _events(p: dict[str, Any], r: dict[str, Any]) -> list[dict[str, str]]:
    events = [
        {"type": "Warning", "reason": w["reason"], "message": w["message"]} for w in p["warnings"]
    ]
    if not r["available"] and r["a_reason"] in ("QuorumLost", "MajorityDataLost"):
        events.append({"type": "Warning", "reason": r["a_reason"], "message": r["a_message"]})
    nospace = sorted(a["member"] for a in r["alarms"] if a["alarm"] == "NOSPACE")
    if nospace and not any(f["reason"] == "DatabaseFull" for f in r["refusals"]):
        events.append(
            {
                "type": "Warning",
                "reason": "NoSpace",
                "message": f"NOSPACE alarm on {', '.join(nospace)}: the cluster refuses writes; "
                + (p["space"]["why"] or "recovered when the cluster is healthy"),
            }
        )
    for refusal in r["refusals"]:
        events.append(
            {"type": "Warning", "reason": refusal["reason"], "message": refusal["message"]}
        )
    if (recovery := p["recovery"]) and recovery["action"] != "done":
        events.append(_recovery_event(recovery))
    for suspect in p["suspects"]:
        events.append(
            {
                "type": "Warning",
                "reason": "MemberSuspect",
                "message": f"{suspect['name']}: {suspect['reason']}; not fenced: "
                f"{suspect['unfenced']}",
            }
        )
    return events


def _recovery_event(recovery: dict[str, Any]) -> dict[str, str]:
    """The Event of a recovery request this run: refused, chosen (and, in the same run, its
    claims fenced), a step carried out, or failed."""
    phase = recovery.get("phase") or "Fencing"
    if recovery["action"] == "refuse":
        kind, reason = "Warning", "RecoveryRefused"
    elif phase == "Fencing":
        kind, reason = "Warning", "RecoveryChosen"
    elif phase == "Failed":
        kind, reason = "Warning", str(recovery["reason"])
    else:
        kind, reason = "Normal", "Recovering"
    return {"type": kind, "reason": reason, "message": recovery["message"]}


def _lagging(o: _Observed, p: dict[str, Any]) -> list[str]:
    """etcd may not yet count a member healthy whose Pod is already Ready (its readiness probe
    asks the member alone): no event will mark the moment it does, so the run asks for
    another look soon rather than leave status Degraded until the next full run."""
    return [
        m["name"]
        for m in o.members
        if not m.get("healthy")
        and m["name"] in o.pods
        and pod_ready(o.pods[m["name"]])
        and not _deleting(o.pods[m["name"]])
        and m["name"] not in p["node_lost"]
    ]


def _status(o: _Observed, p: dict[str, Any], r: dict[str, Any], phase: str) -> dict[str, Any]:
    members, versions = r["members"], r["versions"]
    status = {
        "phase": phase,
        "members": members,
        "readyMembers": sum(1 for m in members if m["ready"]),
        "size": len(members),
        "currentVersion": versions[0] if len(versions) == 1 else "",
        "leader": o.leader,
        "selector": f"app.kubernetes.io/name=etcd,{LABEL_CLUSTER}={o.name}",
        "alarms": r["alarms"],
        # The backend quota the members run with, and what the space runbook does or waits for.
        "space": {"quota": o.spec["quota_bytes"], "message": p["space"]["why"]},
    }
    if p["cluster_id"]:
        status["clusterID"] = p["cluster_id"]
    elif o.recovery_seed:
        # A recovery's first member's claim supersedes the old ID, and the new one is not
        # known yet: the old one would hold the next run's calls to the cluster left behind.
        status["clusterID"] = None
    if p["upgrade_snapshot"]:
        status["upgradeSnapshot"] = p["upgrade_snapshot"]
    # Null once no EtcdBackup of the cluster holds a verified snapshot (all deleted, say).
    status["lastBackup"] = last_backup(o) or None
    # Kept while it holds, and cleared (null) once a quorum is back, so a recovery reads the
    # survivors of this loss, never those of an earlier one.
    status["majorityDataLost"] = (
        {k: v for k, v in p["majority_lost"].items() if k in ("lost", "survivors", "newest")}
        if p["majority_lost"]
        else None
    )
    # A person's recovery request, as decided this run; cleared (null) with the annotation.
    status["recovery"] = p["recovery"] or None
    return status


def last_backup(o: _Observed) -> dict[str, Any]:
    """The newest verified snapshot any EtcdBackup of the cluster reports (its Job writes
    lastSnapshot only once etcd's hash and the sha256 are checked): which backup, when, where;
    empty when none has one."""
    taken = [
        {"backup": str((b.get("metadata") or {}).get("name")), **last}
        for b in o.own_backups
        if (last := (b.get("status") or {}).get("lastSnapshot") or {}).get("sha256")
        and last.get("time")
    ]
    if not taken:
        return {}
    newest = max(taken, key=lambda t: str(t["time"]))
    return {k: newest[k] for k in ("backup", "time", "location") if newest.get(k)}


def _condition(true: bool, reason: str, message: str) -> dict[str, str]:
    return {"status": "True" if true else "False", "reason": reason, "message": message}


def report_of(
    o: _Observed, p: dict[str, Any], extra_refusals: list[dict[str, str]] | None
) -> dict[str, Any]:
    """The report of plan `p`, made from observation `o` (see etcd_plan.report)."""
    r = _seen(o, p, extra_refusals)
    phase = _phase_of(o, p, r)
    d_reason, d_message = _degraded(o, p, r)
    degraded = d_reason not in ("AllMembersHealthy",) and not (
        r["a_reason"] == "Creating" and not r["refusals"]
    )
    return {
        "phase": phase,
        # A recovery under way is progress, not a failure: a failed run would be retried with
        # backoff, and the recovery's Job queues no run of its own.
        "failed": bool(r["refusals"])
        or (not r["available"] and r["a_reason"] != "Creating" and not _recovering(p)),
        "status": _status(o, p, r, phase),
        "conditions": {
            "Available": _condition(r["available"], r["a_reason"], r["a_message"]),
            "Progressing": _condition(*_progressing(o, p, r)),
            "Degraded": _condition(degraded, d_reason, d_message),
        },
        "events": _events(p, r),
        "requeue_after": _requeue_after(o, p, _lagging(o, p)),
        "quorum": o.quorum,
        "cluster_id": p["cluster_id"],
        "leader": o.leader,
        "members": r["members"],
        "alarms": r["alarms"],
    }
