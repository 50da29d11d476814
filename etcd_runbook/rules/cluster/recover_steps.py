"""A quorum recovery, from a survivor or from an EtcdBackup, carried out one look at a time
(docs/runbooks.md, "Quorum lost"; docs/design-decisions.md, "A majority's data gone").

What a person asked for and the operator chose (recover.py's decision) is carried out in
phases, each read back from the claims and never from status, so a run cut short anywhere is
taken up by the next from what was written:

- Fencing: every claim of the cluster is fenced (`fenced: recovery <fingerprint>`, the
  survivor's with ` source`, each with ` backup=<EtcdBackup>` when that is the source): none
  is ever started again under its old identity, and their Pods are stopped. etcd commits its
  database when it stops on SIGTERM.
- Stopping: until no member Pod is left (the survivor's claim can then be mounted, and its
  database no longer changes).
- Restoring: a new claim under a free name, marked restore-pending and recording the request
  (ANN_RECOVERY), and the recovery Job (etcd_restore_plan.recovery_job) that copies the
  survivor's database out of its claim, read-only, or fetches and checks the backup's newest
  verified snapshot as the restore runbook does, and restores it there as a snapshot with
  revisions bumped and marked compacted.
- Starting: once the Job succeeded the claim is released; the heal path starts its member, a
  cluster of one under a new cluster ID, which the claim records once it answers.
- Growing, then Done: the other members join as learners on new claims, one at a time, as any
  scale-up does.

Failed: the Job failed (RecoveryFailed, with its own words), or the survivor's claim, or the
backup's snapshot, is gone (RecoverySourceGone); nothing more is done until a person looks.
The old claims stay fenced, kept for inspection (docs/runbooks.md, "Fenced members").
"""

from __future__ import annotations

from typing import Any

from etcd_runbook.names import (
    ANN_FENCED,
    ANN_MEMBER_ID,
    ANN_RECOVER_QUORUM,
    ANN_RESTORE_PENDING,
    LABEL_RECOVERY,
)
from etcd_runbook.rules.cluster.common import _deleting, _meta, annotations_of
from etcd_runbook.rules.cluster.members import _free_names
from etcd_runbook.rules.cluster.observed import Decided, _Observed
from etcd_runbook.rules.cluster.recover import _owner_refusal, backup_named
from etcd_runbook.rules.etcd_restore_plan import (
    RestoreRefused,
    _backup_source,
    _job_state,
    _owned,
    failure_message,
)

PREFIX = ANN_RECOVER_QUORUM.split("/", 1)[1] + ": "
# Phases in which the recovery alone acts on the cluster: every other step waits.
EXCLUSIVE = ("Fencing", "Stopping", "Restoring")
# What the other steps would do meanwhile, held back while the recovery acts alone.
HELD = (
    "heal",
    "ended",
    "moved",
    "record",
    "relabel",
    "settle_marks",
    "stale",
    "replace",
    "lost",
    "promote",
    "add",
    "remove",
    "roll",
    "roll_pending",
    "upgrade_backup",
)
# How long the recovery Job may run: the copy and etcd's tool on the largest database (8 GiB
# by etcd's limit) take minutes, not this.
JOB_DEADLINE = 3600


def fence_reason(fingerprint: str, source: bool, backup: str = "") -> str:
    """The fence a recovery writes on a claim it leaves behind (observed.recovery_fence):
    `source` on the survivor's, `backup` on each when an EtcdBackup is restored."""
    if backup:
        return f"recovery {fingerprint} backup={backup}"
    return f"recovery {fingerprint}" + (" source" if source else "")


def _none(recovery: dict[str, Any]) -> Decided:
    return {"recovery": recovery, "recover": {}}


def _underway(o: _Observed) -> str:
    """The fingerprint of a recovery started and not yet handed over to the cluster's other
    steps; '' when none is. One is while its first member's claim records no member yet, or,
    before that claim exists, while every claim is fenced by it (no live claim is left: a
    cluster that has members again is never taken back to an earlier step)."""
    seed = o.recovery_seed
    if seed:
        name, fingerprint, *_ = seed
        return "" if annotations_of(o.claims[name]).get(ANN_MEMBER_ID) else fingerprint
    if o.live_claims:
        return ""
    started = sorted(fp for fp in o.recovery_fenced if fp not in o.recovered)
    # Two recoveries fenced the claims and neither has a first member (one is never started
    # while another is under way, so only a person's edits make this): which to take up is
    # unknowable from the claims, so neither is, and status says only the request's decision.
    return started[0] if len(started) == 1 else ""


def _recorded(o: _Observed, fingerprint: str) -> dict[str, Any]:
    """What status recorded of this recovery's decision, kept while it is carried out: the
    request, the source chosen, the revision, who is left behind. Informative only: every
    step is decided from the claims."""
    before = (o.obj.get("status") or {}).get("recovery") or {}
    if before.get("fingerprint") != fingerprint:
        action = "from_backup" if _backup(o, fingerprint) else "from_member"
        return {"action": action, "fingerprint": fingerprint}
    # A failure's reason is the failure's, not the decision's: it goes with the failure.
    dropped = (
        ("phase", "message", "reason") if before.get("phase") == "Failed" else ("phase", "message")
    )
    return {k: v for k, v in before.items() if k not in dropped}


def _source(o: _Observed, fingerprint: str) -> str:
    """The survivor a recovery restores, as its fence says ('' from a backup)."""
    return next((n for n, src in o.recovery_fenced.get(fingerprint, {}).items() if src), "")


def _backup(o: _Observed, fingerprint: str) -> str:
    """The EtcdBackup a recovery restores, as its fences or first member's claim say."""
    return o.recovery_backups.get(fingerprint, "")


def _job(o: _Observed, fingerprint: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """This recovery's Job, if this EtcdCluster controls it, and that Job's Pods (the restore
    runbook's rule of ownership, etcd_restore_plan._owned)."""
    uid = str(_meta(o.obj).get("uid") or "")
    for job in o.recovery_jobs:
        if (_meta(job).get("labels") or {}).get(LABEL_RECOVERY) == fingerprint:
            ours, pods, _ = _owned({"job": job, "pods": o.recovery_pods}, uid)
            if ours:
                return ours, pods
    return None, []


def _step(
    o: _Observed,
    fingerprint: str,
    phase: str,
    message: str,
    act: dict[str, Any] | None = None,
    reason: str = "",
    decided: dict[str, Any] | None = None,
) -> Decided:
    """The recovery's status at `phase` (the decision this run made, `decided`, else the one
    recorded; `reason` only where the phase has its own, a failure), what the role does
    (`recover`), and, while the recovery acts alone, every other step held."""
    base = decided or _recorded(o, fingerprint)
    seed = o.recovery_seed
    recovery = {
        **base,
        # Until the first member's claim exists, the recorded ID is still the old cluster's.
        "oldClusterID": seed[2] if seed else o.recorded_id,
        "phase": phase,
        "reason": reason
        or str(base.get("reason") or ("FromBackup" if _backup(o, fingerprint) else "FromSurvivor")),
        "message": (str(base["message"]) + ". " if decided else PREFIX) + message,
        "carriedOut": True,
    }
    if o.hands_off:
        recovery["message"] += (
            ". Nothing is done while spec.paused is true (or the cluster is outside the "
            "operator's allow-lists)"
        )
    out: Decided = {"recovery": recovery, "recover": {"fingerprint": fingerprint, **(act or {})}}
    if phase in EXCLUSIVE:
        out |= {k: [] for k in HELD}
    return out


def _fencing(o: _Observed, d: Decided, fingerprint: str, member: str, backup: str) -> Decided:
    """Every claim not yet fenced is fenced for this recovery, its Pod stopped. With nothing
    left to fence (every claim gone or fenced before), the recovery goes on in this run."""
    fence = [
        {"name": n, "reason": fence_reason(fingerprint, n == member, backup)}
        for n, c in sorted(o.claims.items())
        if not _deleting(c) and ANN_FENCED not in annotations_of(c)
    ]
    if not fence:
        return _carried_out(o, fingerprint, member, backup, d["recovery"])
    fenced = {f["name"] for f in fence}
    out = _step(
        o,
        fingerprint,
        "Fencing",
        f"Fencing the claims of {', '.join(sorted(fenced))} and stopping every member Pod; "
        "no claim is started again, each is kept for inspection",
        {"stop": sorted(n for n in o.pods if n not in fenced and not _deleting(o.pods[n]))},
        decided=d["recovery"],
    )
    return {**out, "fence": d["fence"] + fence}


def _stopping(
    o: _Observed, fingerprint: str, left: list[str], decided: dict[str, Any] | None
) -> Decided:
    """Pods still there: those not yet being deleted are stopped again."""
    return _step(
        o,
        fingerprint,
        "Stopping",
        f"waiting for the Pods of {', '.join(left)} to stop: no member of the old cluster "
        "runs beside the recovered one, and a survivor's database is copied only once its "
        "etcd has stopped",
        {"stop": [n for n in left if not _deleting(o.pods[n])]},
        decided=decided,
    )


def _backup_snapshot(o: _Observed, backup: str, old_id: str) -> tuple[dict[str, Any], str]:
    """The EtcdBackup's newest verified snapshot as the restore runbook reads it, or why there
    is none to restore: the backup or its snapshot gone since the request was decided, or an
    EtcdBackup of that name that is no longer this cluster's (`old_id`'s) to take it from."""
    found = backup_named(o.backups, backup)
    if found and (refused := _owner_refusal(f"backup={backup}", found, old_id, o.name)):
        return {}, refused[1].removeprefix(PREFIX)
    try:
        return _backup_source(backup, found), ""
    except RestoreRefused as e:
        return {}, e.message.removeprefix(f"{e.field}: ")


def _restoring(
    o: _Observed,
    fingerprint: str,
    source: dict[str, Any],
    said: tuple[str, str],
    old_id: str,
    backup: str,
    decided: dict[str, Any] | None,
) -> Decided:
    """The first member's claim and the Job, as each is missing; the Job's end. `source` is
    what the Job restores (etcd_restore_plan's source: a member's claim or a backup's
    snapshot, `backup` naming the EtcdBackup); `said`, how a message names it and what a
    failure leaves untouched."""
    what, kept = said
    seed = o.recovery_seed
    free = _free_names(o.name, set(o.claims) | set(o.pods))
    if not seed and not free:
        return _step(
            o,
            fingerprint,
            "Failed",
            "every member name is taken by a claim, so the first member has none: delete "
            "the fenced claims that are no longer needed (docs/runbooks.md, 'Fenced members')",
            reason="RecoveryNoFreeName",
            decided=decided,
        )
    name = seed[0] if seed else free[0]
    job, pods = _job(o, fingerprint)
    state = _job_state(job)
    image = str(o.options.get("image") or "")
    if state == "Failed":
        return _step(
            o,
            fingerprint,
            "Failed",
            f"the recovery Job failed: {failure_message(job or {}, pods)}. {kept}; read the "
            f"Job's logs, delete the Job and the claim {name}-data to try again",
            reason="RecoveryFailed",
            decided=decided,
        )
    if state == "Succeeded" and seed:
        return _step(
            o,
            fingerprint,
            "Starting",
            f"{what} is restored into {name}: starting it as the first member of the "
            "recovered cluster",
            {"release": name},
            decided=decided,
        )
    if not image and (not seed or state == "Absent"):
        return _step(
            o,
            fingerprint,
            "Restoring",
            "the operator's own image, which the recovery Job runs in, is unknown: outside "
            "the operator's Pod, set ETCD_RUNBOOK_IMAGE to it",
            reason="RecoveryImageUnknown",
            decided=decided,
        )
    act = {
        "seed": name,
        "from": source,
        "backup": backup,
        "cluster_id": old_id,
        "image": image,
        "deadline": JOB_DEADLINE,
        "claim": not seed,
        "job": state == "Absent",
    }
    waiting = "" if act["claim"] or act["job"] else " (its Job is running)"
    return _step(
        o,
        fingerprint,
        "Restoring",
        f"restoring {what} into the new first member {name}{waiting}",
        act if act["claim"] or act["job"] else {},
        decided=decided,
    )


def _carried_out(
    o: _Observed,
    fingerprint: str,
    member: str,
    backup: str,
    decided: dict[str, Any] | None = None,
) -> Decided:
    """The next step of the recovery under way, from the survivor `member` or the EtcdBackup
    `backup`. `decided`: the decision this run made, when the recovery starts in this run."""
    seed = o.recovery_seed
    what = f"EtcdBackup {backup}'s snapshot" if backup else f"{member or 'the survivor'}'s data"
    if seed and not annotations_of(o.claims[seed[0]]).get(ANN_RESTORE_PENDING):
        return _step(
            o,
            fingerprint,
            "Starting",
            f"{seed[0]} holds {what}: waiting for it to answer as the first member of the "
            "recovered cluster",
            decided=decided,
        )
    left = sorted(n for n in o.pods if not seed or n != seed[0])
    if left:
        return _stopping(o, fingerprint, left, decided)
    # Before the first member's claim exists, the recorded ID is still the old cluster's.
    old_id = seed[2] if seed else o.recorded_id
    if backup:
        source, gone = _backup_snapshot(o, backup, old_id)
        said = (
            f"EtcdBackup {backup}'s snapshot {source.get('location')} (revision "
            f"{source.get('revision')})",
            f"EtcdBackup {backup}'s snapshot is untouched",
        )
    else:
        source = {"kind": "member", "claim": f"{member}-data"}
        gone = (
            ""
            if member and member in o.claims and not _deleting(o.claims[member])
            else f"the survivor's claim {member or '(none marked source)'}-data is gone, and "
            "with it the data to recover"
        )
        said = (
            f"{member}'s database, read-only from its claim,",
            f"The survivor's claim {member}-data is untouched",
        )
    if gone:
        return _step(
            o,
            fingerprint,
            "Failed",
            f"{gone}: nothing more is done. Restore a backup into a new cluster "
            "(docs/runbooks.md, 'Restore')",
            reason="RecoverySourceGone",
            decided=decided,
        )
    return _restoring(o, fingerprint, source, said, old_id, backup, decided)


def _handed_over(o: _Observed, d: Decided) -> Decided:
    """A recovery whose first member answers: the rest is the cluster's ordinary scale-up,
    said as Growing until every member of the spec votes."""
    recovery = d["recovery"]
    seed = o.recovery_seed
    if not seed or recovery.get("fingerprint") != seed[1]:
        return _none(recovery)
    voters = sum(1 for m in o.voters if m["name"])
    grown = voters >= o.spec["size"] and o.trusted
    phase = "Done" if grown else "Growing"
    new = f"the new cluster {o.recorded_id or '(ID not yet known)'}, which replaces {seed[2]}"
    message = (
        f"recovered: {seed[0]} is the first member of {new}; {voters} of {o.spec['size']} "
        "members vote"
        if grown
        else f"{seed[0]} is the first member of {new}; the others join as learners on new "
        f"claims, one at a time: {voters} of {o.spec['size']} vote"
    )
    return _none(
        {
            **recovery,
            "phase": phase,
            "message": PREFIX + message,
            "oldClusterID": seed[2],
            "newClusterID": o.recorded_id,
        }
    )


def plan_recover_steps(o: _Observed, d: Decided) -> Decided:
    """The recovery's step this run, if one is under way or was just decided (`recover`, for
    the role; {} when nothing is to be done), and status.recovery with its phase. While one is
    under way it alone is said: a request for another (the annotation changed meanwhile)
    waits, and the message says so."""
    recovery = d["recovery"]
    fingerprint = _underway(o)
    if fingerprint:
        out = _carried_out(o, fingerprint, _source(o, fingerprint), _backup(o, fingerprint))
        if recovery.get("fingerprint") not in (None, fingerprint):
            out["recovery"]["message"] += (
                f"; the request now in the annotation ({recovery.get('asked')}) waits until "
                "this one is done (RecoveryUnderway)"
            )
        return out
    action = recovery.get("action")
    if action in ("from_member", "from_backup") and not o.hands_off:
        source = str(recovery["source"])
        member, backup = (source, "") if action == "from_member" else ("", source)
        return _fencing(o, d, str(recovery["fingerprint"]), member, backup)
    return _handed_over(o, d)
