"""Space: members defragmented on spec.defragmentation's policy, a NOSPACE alarm recovered
without a person, and a CORRUPT alarm that halts every runbook of the cluster.

etcd's database file never shrinks by itself: compaction turns old revisions into free pages
the file keeps, and only a defragmentation (a rewrite of the file, during which that member
answers nothing) gives them back. So a member is worth defragmenting only when much of its
file is free (spec.defragmentation.freePercent) and that is enough bytes to be worth the
pause (minReclaim): a rewrite that frees nothing is the known trap. With a schedule
(spec.defragmentation.schedule), such a defragmentation starts only inside a window opened
each time the line fires, so that the pauses fall in hours the clients can bear. A NOSPACE
alarm stops every write of the cluster; when old revisions fill the quota, compaction and then
defragmentation make room and the alarm may go. When live data fills it, nothing the runbook
may do frees space: that is said with the figures (DatabaseFull) and the runbook does not try
again until something changed (the revision moved: a person deleted keys). NOSPACE is an
outage: its recovery waits for no window.

Every step here waits for a cluster that is wholly healthy and that no other runbook acts on
(a roll, a scale, a replacement, a recovery, a backup's snapshot), one member at a time,
followers first and the leader last.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from etcd_runbook.names import ANN_DEFRAGMENTED, ANN_SPACE_FULL
from etcd_runbook.rules.cluster.common import (
    PlanError,
    _meta,
    _refusal,
    annotations_of,
    format_bytes,
    member_index,
    parse_quantity,
)
from etcd_runbook.rules.cluster.observed import Decided, _Observed
from etcd_runbook.rules.cluster.spec import quota_limit
from etcd_runbook.rules.cron import RFC3339, next_run, schedule_problem
from etcd_runbook.rules.etcd_pods import seconds_between

# A NOSPACE alarm is disarmed only once every member's database is this far (percent) below
# the quota, as etcd_maintenance's disarm_alarms checks: just under it, the next writes would
# raise it again at once.
SPACE_MARGIN = 10.0

IDLE: dict[str, Any] = {"action": "", "members": [], "why": ""}

# An alarm changes no Kubernetes object, so nothing queues a run when one is raised: a cluster
# is looked at again by how near its quota its largest member is, an alarm counting as full.
# Below the lowest step, at the watcher's full-run interval (10 minutes): filling the other
# three quarters of a 320Mi quota in that time takes 400 KB/s of new data for ten minutes.
# (percent of the quota, seconds), the highest first.
SPACE_STEPS = ((50, 30), (25, 120))
SPACE_RECHECK = SPACE_STEPS[0][1]

# What other runbooks of this cluster do in this run, by the plan's keys: space work waits.
_OTHERS = {
    "bootstrap": "the cluster is being created",
    "heal": "a member's Pod is being made again",
    "ended": "a member's Pod ended",
    "fence": "a member is being fenced",
    "stale": "a removed member is being cleaned up",
    "replace": "a member is being replaced",
    "lost": "a member etcd lists has no claim",
    "promote": "a learner is being promoted",
    "add": "a member is being added",
    "remove": "a member is being removed",
    "roll": "a member is being rolled",
    "settle_marks": "a rolled member is settling",
    "upgrade_backup": "an upgrade's snapshot is being asked for",
}


def space_recheck(o: _Observed) -> float | None:
    """When to look again for space's sake: by how near the quota the cluster is (an alarm:
    SPACE_RECHECK; else pressure_recheck), or when the next defragmentation window opens while
    members worth defragmenting wait for it (whichever comes first); None when neither."""
    waits = []
    largest = max(
        (int(s.get("db_size") or 0) for s in o.info.get("status") or [] if s.get("healthy")),
        default=0,
    )
    if o.info.get("alarms"):
        waits.append(float(SPACE_RECHECK))
    elif (pressure := pressure_recheck(largest, o.spec["quota_bytes"])) is not None:
        waits.append(pressure)
    # Opening a window changes no object either, and a window shorter than the full-run
    # interval could pass unseen.
    policy = o.spec["defragmentation"]
    if policy["enabled"] and worth_defragmenting(member_sizes(o), policy)[0]:
        # At least a second away: whole seconds, and window_wait's opening is after the look.
        opens = seconds_between(o.observed_at, window_wait(policy, o.observed_at) or "")
        if opens is not None:
            waits.append(opens)
    return min(waits) if waits else None


def pressure_recheck(largest: int, quota: int) -> float | None:
    """Seconds until a cluster whose largest member database is `largest` bytes is looked at
    again for space's sake (SPACE_STEPS), None below every step."""
    for percent, seconds in SPACE_STEPS:
        if largest * 100 >= percent * quota:
            return float(seconds)
    return None


def window_wait(policy: dict[str, Any], now: str) -> str | None:
    """When the policy's next defragmentation window opens (RFC 3339, UTC) while `now` is in
    none; None inside one, or with no schedule (the policy acts whenever its thresholds say).
    '' when no window is known to open: the line or zone is refused (the spec reader says
    why), the line never fires (Feb 30), or the time of the look is unknown. A window runs
    from each time the line fires, for `window` seconds."""
    line = policy["schedule"]
    if line is None:
        return None
    # A refused line may still read as a cron line (weekday 7): it opens no window either.
    if schedule_problem(line):
        return ""
    try:
        at = datetime.strptime(now, RFC3339).replace(tzinfo=UTC)
    except ValueError:
        return ""
    # The first firing after the earliest start of a window still open at `now`: at or
    # before `now`, that window is open; later, it is the next one.
    fired = next_run(line, policy["time_zone"], at - timedelta(seconds=policy["window"]))
    if fired is None:
        return ""
    return None if fired <= at else fired.strftime(RFC3339)


def window_message(members: list[str], free: int, policy: dict[str, Any], opens: str) -> str:
    """What status.space says while members worth defragmenting wait for the window."""
    zone = "" if policy["time_zone"] == "UTC" else f" in {policy['time_zone']}"
    schedule = f'spec.defragmentation.schedule "{policy["schedule"]}"{zone}'
    when = f"next {opens}" if opens else "no next window found"
    return (
        f"{', '.join(members)} would free {format_bytes(free)}: waiting for the "
        f"defragmentation window ({schedule}, {when})"
    )


def member_sizes(o: _Observed) -> list[dict[str, Any]]:
    """Each of our members etcd lists, with its database size and in-use size as it last
    answered (None when it did not) and when it was last defragmented (its claim's record)."""
    statuses = {s.get("member_id"): s for s in o.info.get("status") or [] if s.get("healthy")}
    out = []
    for m in o.members:
        if not m["name"]:
            continue
        status = statuses.get(m["id"]) or {}
        out.append(
            {
                "name": m["name"],
                "learner": bool(m.get("is_learner")),
                "db_size": status.get("db_size"),
                "db_size_in_use": status.get("db_size_in_use"),
                "last_defragmented": last_defragmented(o.claims.get(m["name"])),
            }
        )
    return out


def last_defragmented(claim: dict[str, Any] | None) -> str:
    """The time the claim records its member was last defragmented ('' when never)."""
    return annotations_of(claim).get(ANN_DEFRAGMENTED, "").split(" ")[0]


def defrag_order(names: list[str], leader: str) -> list[str]:
    """Followers by index first, the leader last: its rewrite stalls every write, so it comes
    when the others are done and after leadership has moved away."""
    followers = sorted((n for n in names if n != leader), key=member_index)
    return followers + [n for n in names if n == leader]


def worth_defragmenting(
    sizes: list[dict[str, Any]], policy: dict[str, Any]
) -> tuple[list[str], list[str]]:
    """(members to defragment, why each member fragmented enough but freeing too little is
    skipped). A member is chosen when its free pages are at least freePercent of its file and
    at least minReclaim bytes."""
    chosen, skipped = [], []
    for m in sizes:
        size, in_use = m["db_size"], m["db_size_in_use"]
        if m["learner"] or not size or in_use is None:
            continue
        free = max(0, size - in_use)
        if free * 100 < policy["free_percent"] * size:
            continue
        if free >= policy["min_reclaim"]:
            chosen.append(m["name"])
        else:
            skipped.append(
                f"{m['name']} is {free * 100 // size}% free but would reclaim only "
                f"{format_bytes(free)}, under spec.defragmentation.minReclaim "
                f"{format_bytes(policy['min_reclaim'])}"
            )
    return chosen, skipped


def space_verdict(
    sizes: list[dict[str, Any]], quota: int, volume: int, revision: int
) -> dict[str, Any]:
    """After compaction and defragmentation under NOSPACE, whether the alarm may be disarmed
    (every member below the quota by SPACE_MARGIN) or live data fills the quota: then the
    figures and what a person can do (`record` is what the claims keep, so later runs at the
    same revision say it again instead of rewriting every member for nothing)."""
    limit = int(quota * (100 - SPACE_MARGIN) / 100)
    full = [m for m in sizes if (m.get("db_size") or 0) >= limit]
    if not full:
        return {"disarm": True, "message": "", "record": ""}
    largest = max(full, key=lambda m: m["db_size"])
    return {
        "disarm": False,
        "message": full_message(largest["name"], largest["db_size"], quota, volume),
        "record": f"{revision} {largest['name']} {largest['db_size']}",
    }


def full_message(member: str, size: int, quota: int, volume: int) -> str:
    most = quota_limit(volume)
    room = (
        f"raise spec.storage.quotaBackendBytes up to {format_bytes(most)} (what the "
        f"{format_bytes(volume)} volume holds beside the WAL and a defragmentation's copy), "
        if most > quota
        else ""
    )
    return (
        f"live data fills the backend quota: after compacting every old revision and "
        f"defragmenting, {member}'s database is {format_bytes(size)} of its "
        f"{format_bytes(quota)} quota (NOSPACE is disarmed only below {100 - SPACE_MARGIN:g}% "
        f"of it). Writes stay refused: delete keys (deletes are allowed), {room}or grow "
        "spec.storage.size; the runbook tries again once the revision moves"
    )


def _full_record(o: _Observed) -> tuple[int, str, int] | None:
    """The newest 'live data fills the quota' verdict a claim records: (revision, member,
    bytes)."""
    records = []
    for claim in o.live_claims.values():
        fields = annotations_of(claim).get(ANN_SPACE_FULL, "").split()
        if len(fields) == 3 and fields[0].isdigit() and fields[2].isdigit():
            records.append((int(fields[0]), fields[1], int(fields[2])))
    return max(records) if records else None


def _revision(o: _Observed) -> int:
    return max(
        (int(s.get("revision") or 0) for s in o.info.get("status") or [] if s.get("healthy")),
        default=0,
    )


def _not_now(o: _Observed, d: Decided) -> str:
    """Why no member may be defragmented in this run ('' when one may): anything short of a
    wholly healthy cluster that no other runbook acts on."""
    if not o.trusted:
        return "etcd's member list is not confirmed by a quorum"
    unhealthy = sorted(m["name"] or m["id"] for m in o.members if not m.get("healthy"))
    if unhealthy:
        return f"{', '.join(unhealthy)} is not healthy"
    if not o.leader:
        return "the members agree on no leader"
    learners = sorted(m["name"] for m in o.members if m.get("is_learner"))
    if learners:
        return f"learner {', '.join(learners)} is catching up"
    for key, what in _OTHERS.items():
        if d.get(key):
            return what
    if d.get("settling") or d.get("halted") or d.get("upgrade_waiting"):
        return "a roll is under way"
    if d.get("recover"):
        return "a quorum recovery is under way"
    running = sorted(
        _meta(b).get("name", "")
        for b in o.own_backups
        if (b.get("status") or {}).get("phase") == "Running"
    )
    if running:
        return f"EtcdBackup {', '.join(running)} is taking a snapshot"
    return ""


def plan_space(o: _Observed, d: Decided) -> Decided:
    """This run's space work (`space`: its action, members in order, why), the CORRUPT
    members (`corrupt`, which halt everything: plan_corrupt_hold), the refusals, and for a
    person's run (space_by_hand) each member's sizes and why no member may be defragmented
    now (`space_sizes`, `space_blocked`)."""
    seen = {"space_sizes": member_sizes(o), "space_blocked": _not_now(o, d)}
    return {**_space(o, d), **seen}


def _space(o: _Observed, d: Decided) -> Decided:
    if o.hands_off or not d.get("spec_ok", True):
        return {"space": IDLE, "corrupt": []}
    alarms = o.info.get("alarms") or []
    names = {m["id"]: m["name"] or m["id"] for m in o.members}
    corrupt = sorted(
        {
            names.get(a.get("member_id"), a.get("member_id"))
            for a in alarms
            if a.get("alarm") == "CORRUPT"
        }
    )
    if corrupt:
        message = (
            f"a CORRUPT alarm is raised on {', '.join(corrupt)}: its data differs from the "
            "others'. Every runbook of this cluster is halted (no roll, scale, defragmentation "
            "or recovery) until a person replaces that member (playbooks/etcd-member-replace.yml"
            ") and disarms the alarm (etcdctl alarm disarm)"
        )
        return {
            "space": IDLE,
            "corrupt": corrupt,
            "refusals": [_refusal("CorruptAlarm", "status.alarms", message)],
        }
    sizes = member_sizes(o)
    nospace = sorted(
        {
            names.get(a.get("member_id"), a.get("member_id"))
            for a in alarms
            if a.get("alarm") == "NOSPACE"
        }
    )
    if nospace:
        return {"corrupt": [], **_plan_nospace(o, d, sizes, nospace)}
    policy = o.spec["defragmentation"]
    if not policy["enabled"]:
        return {"space": IDLE, "corrupt": []}
    chosen, skipped = worth_defragmenting(sizes, policy)
    if not chosen:
        return {"space": {**IDLE, "why": "; ".join(skipped)}, "corrupt": []}
    order = defrag_order(chosen, o.leader)
    # Before _not_now: a closed window is the longer wait, and the one a person asked for.
    if (opens := window_wait(policy, o.observed_at)) is not None:
        free = sum(m["db_size"] - m["db_size_in_use"] for m in sizes if m["name"] in chosen)
        return {"space": {**IDLE, "why": window_message(order, free, policy, opens)}, "corrupt": []}
    why = f"{', '.join(order)} at least {policy['free_percent']}% free"
    if wait := _not_now(o, d):
        return {"space": {**IDLE, "why": f"defragmentation of {why} waits: {wait}"}, "corrupt": []}
    return {
        "space": {
            "action": "defragment",
            "members": order,
            "why": f"defragmenting {why}, one at a time, the leader last",
        },
        "corrupt": [],
    }


def _plan_nospace(
    o: _Observed, d: Decided, sizes: list[dict[str, Any]], raised: list[str]
) -> Decided:
    revision = _revision(o)
    record = _full_record(o)
    if record is not None and record[0] == revision:
        message = full_message(record[1], record[2], o.spec["quota_bytes"], o.spec["volume_bytes"])
        return {
            "space": {**IDLE, "why": message},
            "refusals": [_refusal("DatabaseFull", "spec.storage.quotaBackendBytes", message)],
        }
    if wait := _not_now(o, d):
        return {"space": {**IDLE, "why": f"NOSPACE on {', '.join(raised)}: recovery waits: {wait}"}}
    order = defrag_order([m["name"] for m in sizes], o.leader)
    return {
        "space": {
            "action": "nospace",
            "members": order,
            "why": (
                f"NOSPACE on {', '.join(raised)}: compacting every old revision, defragmenting "
                f"{', '.join(order)} one at a time, then disarming"
            ),
            "revision": revision,
        }
    }


def space_by_hand(plan: dict[str, Any], asked: list[str], min_reclaim: str) -> dict[str, Any]:
    """A person's defragmentation (playbooks/etcd-defrag.yml), as plan_space would carry it
    out: under NOSPACE, the operator's recovery; else the members asked (every voting member
    when none is named) that would reclaim at least `min_reclaim` (spec.defragmentation's
    when ''), followers first, the leader last. `refused` says why nothing may be done."""
    refused = {**IDLE, "refused": ""}
    if plan["corrupt"]:
        return {**refused, "refused": f"a CORRUPT alarm is raised on {', '.join(plan['corrupt'])}"}
    if plan["space"]["action"] == "nospace":
        return {**plan["space"], "refused": ""}
    if plan["space_blocked"]:
        return {**refused, "refused": f"not now: {plan['space_blocked']}"}
    sizes = {m["name"]: m for m in plan["space_sizes"] if not m["learner"]}
    unknown = [n for n in asked if n not in sizes]
    if unknown:
        return {
            **refused,
            "refused": f"{', '.join(unknown)} is no voting member of {plan['name']} (members: "
            f"{', '.join(sorted(sizes))})",
        }
    try:
        least = (
            parse_quantity(min_reclaim)
            if min_reclaim
            else plan["spec"]["defragmentation"]["min_reclaim"]
        )
    except PlanError:
        return {
            **refused,
            "refused": f"min_reclaim must be a quantity such as 64Mi, got {min_reclaim!r}",
        }
    chosen, skipped = [], []
    for name in asked or sorted(sizes):
        free = max(0, (sizes[name]["db_size"] or 0) - (sizes[name]["db_size_in_use"] or 0))
        if free >= least and free > 0:
            chosen.append(name)
        else:
            skipped.append(
                f"{name} would reclaim only {format_bytes(free)} "
                f"(min_reclaim {format_bytes(least)})"
            )
    order = defrag_order(chosen, plan["leader"])
    why = (
        f"defragmenting {', '.join(order)} by hand, one at a time, the leader last" if order else ""
    )
    return {
        "action": "defragment" if order else "",
        "members": order,
        "why": "; ".join([why, *skipped]).strip("; "),
        "refused": "",
    }


def plan_corrupt_hold(o: _Observed, d: Decided) -> Decided:
    """A CORRUPT alarm: no runbook acts on the cluster (its Pods that run keep running)."""
    if not d["corrupt"]:
        return {}
    held = ("heal", "ended", "moved", "fence", "record", "relabel", "settle_marks")
    membership = ("stale", "replace", "lost", "promote", "add", "remove", "roll")
    return {**{k: [] for k in (*held, *membership)}, "recover": {}, "upgrade_backup": []}


def _defragmented(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The members etcd_maintenance defragmented, from a loop's registered results."""
    return [step for r in results for step in r.get("members") or [] if step.get("finished_at")]


def _claim_patch(namespace: str, member: str, annotation: str, value: str | None) -> dict[str, Any]:
    """A merge patch of a member's claim annotation (None removes it)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": f"{member}-data",
            "namespace": namespace,
            "annotations": {annotation: value},
        },
    }


def defrag_records(results: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    """What each defragmented member's claim records of it: when, and its size before and
    after (status.members[].lastDefragmented)."""
    return [
        _claim_patch(
            namespace,
            step["name"],
            ANN_DEFRAGMENTED,
            f"{_utc(step['finished_at'])} {step['db_size_before']} {step['db_size_after']}",
        )
        for step in _defragmented(results)
    ]


def defrag_events(results: list[dict[str, Any]]) -> list[dict[str, str]]:
    """One Event per member defragmented: its sizes, how long it paused, leadership moved."""
    events = []
    for step in _defragmented(results):
        moved = (
            f", after leadership moved to {step['leader_moved_to']}"
            if step.get("leader_moved_to")
            else ""
        )
        seconds = float(step["finished_at"]) - float(step["started_at"])
        events.append(
            {
                "type": "Normal",
                "reason": "Defragmented",
                "message": f"{step['name']}: database {format_bytes(step['db_size_before'])} "
                f"to {format_bytes(step['db_size_after'] or 0)} "
                f"({format_bytes(step['db_size_in_use_before'])} in use) in {seconds:.1f} s"
                + moved,
            }
        )
    return events


def nospace_verdict(
    results: list[dict[str, Any]], space: dict[str, Any], spec: dict[str, Any], namespace: str
) -> dict[str, Any]:
    """space_verdict of the sizes the defragmentations of `space` (the run's space work) left,
    with the claim patches of the verdict (`records`): a full database recorded on every
    member's claim, or, when the alarm may be disarmed, a former record removed (a patch
    that removes what a claim lacks writes nothing)."""
    sizes = [{"name": s["name"], "db_size": s["db_size_after"]} for s in _defragmented(results)]
    verdict = space_verdict(
        sizes, spec["quota_bytes"], spec["volume_bytes"], int(space.get("revision", 0))
    )
    records = [
        _claim_patch(namespace, name, ANN_SPACE_FULL, verdict["record"] or None)
        for name in space["members"]
    ]
    return {**verdict, "records": records}


def _utc(epoch: float) -> str:
    return datetime.fromtimestamp(float(epoch), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
