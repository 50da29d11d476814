"""Quorum-loss recovery as a person asks for it: the request an EtcdCluster carries in its
`recover-quorum` annotation (etcd_runbook.names.ANN_RECOVER_QUORUM), read, and the one
decision taken on it: refuse (saying why, and which key to change), nothing to do (this very
request was carried out already), or recover from a survivor or from an EtcdBackup.

A recovery gives up for good whatever only the members left behind hold, so the request says
exactly what it means: its source, the cluster ID it was written for (a request copied from
another cluster, or left over from before an earlier recovery gave this one a new ID, never
fires), and `acceptOlder=true` when it means to take less than the newest data there is.
The annotation's value is space-separated key=value pairs:

    member=<survivor> clusterID=<status.clusterID> [acceptOlder=true]
    backup=<EtcdBackup> clusterID=<status.clusterID> [acceptOlder=true]

Pure: the caller passes what the run already knows (`majority_lost` as
recovery.plan_majority_lost makes it, the recorded cluster ID, the EtcdBackups it read, the
fingerprints of the requests carried out) and acts on the Decision. Tested in
tests/unit/test_etcd_recover_request.py.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from etcd_runbook.names import ANN_RECOVER_QUORUM
from etcd_runbook.rules.cluster.common import _deleting, _meta, annotations_of
from etcd_runbook.rules.cluster.observed import Decided, _Observed
from etcd_runbook.rules.cluster.recovery import newest as newest_of
from etcd_runbook.rules.etcd_restore_plan import RestoreRefused, _backup_source, version_refusal

# Every message starts with the annotation's short name: a line in status or an Event then
# says which request it answers.
PREFIX = ANN_RECOVER_QUORUM.split("/", 1)[1] + ": "
KEYS = ("member", "backup", "clusterID", "acceptOlder")
EXPECTED = {
    "member": "member=<a survivor, as status.majorityDataLost.survivors names it>",
    "backup": "backup=<an EtcdBackup of this cluster>",
    "clusterID": "clusterID=<the cluster ID, as status.clusterID shows it>",
    "acceptOlder": "acceptOlder=true (or false)",
}
USAGE = "member=<survivor> clusterID=<status.clusterID> (backup=<EtcdBackup> instead of member)"
# A Kubernetes object name (DNS-1123 subdomain): what a member or an EtcdBackup is called.
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
# etcd's IDs are 64 bits; status.clusterID spells them in lowercase hex, no leading zeros.
_CLUSTER_ID = re.compile(r"^[0-9a-f]{1,16}$")
# An annotation is anyone's text: a message shows at most this much of a value.
_SHOWN = 64

Action = Literal["refuse", "done", "from_member", "from_backup"]
# A refusal as (reason, message); None when the rule lets the request through.
Refusal = tuple[str, str] | None


class RequestError(ValueError):
    """A request that cannot be read. `field` is the key at fault (`request` when the text
    is not key=value pairs at all); the message says what is expected."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


@dataclass(frozen=True)
class RecoverRequest:
    """What a person asked: exactly one of `member` and `backup`, for `cluster_id`."""

    member: str
    backup: str
    cluster_id: str
    accept_older: bool = False

    @property
    def asked(self) -> str:
        """The source as the request names it: `member=<name>` or `backup=<name>`."""
        return f"member={self.member}" if self.member else f"backup={self.backup}"

    def normalised(self) -> str:
        """One spelling per request: keys in a fixed order, acceptOlder only when true (false
        and absent mean the same), the cluster ID as status.clusterID spells it."""
        older = " acceptOlder=true" if self.accept_older else ""
        return f"{self.asked} clusterID={self.cluster_id}{older}"

    def fingerprint(self) -> str:
        """A short stable hash of the normalised request: what status keeps of a request
        carried out, so the annotation left in place never runs it a second time."""
        return hashlib.sha256(self.normalised().encode()).hexdigest()[:16]


def _quoted(value: str) -> str:
    """A value as a message shows it: quoted, escaped and cut short."""
    return json.dumps(value if len(value) <= _SHOWN else value[:_SHOWN] + "...")


def _pairs(value: str) -> dict[str, str]:
    """The key=value pairs of the request, each key known, given once, with a value."""
    pairs: dict[str, str] = {}
    for token in value.split():
        key, sep, given = token.partition("=")
        if not sep:
            field, want = (key, EXPECTED[key]) if key in KEYS else ("request", USAGE)
            raise RequestError(field, f"{PREFIX}{_quoted(token)} is not key=value; write {want}")
        if key not in KEYS:
            near = {k.lower(): k for k in KEYS}.get(key.lower())
            hint = f" (did you mean {near}?)" if near else ""
            raise RequestError(
                key, f"{PREFIX}unknown key {_quoted(key)}{hint}; the keys are {', '.join(KEYS)}"
            )
        if key in pairs:
            raise RequestError(key, f"{PREFIX}{key} is given twice; give it once")
        if not given:
            raise RequestError(key, f"{PREFIX}{key} is empty; write {EXPECTED[key]}")
        pairs[key] = given
    return pairs


def _source(pairs: dict[str, str]) -> tuple[str, str]:
    """The member and the EtcdBackup asked for: exactly one of them, each a name."""
    member, backup = pairs.get("member", ""), pairs.get("backup", "")
    if bool(member) == bool(backup):
        which = "both member and backup are" if member else "neither member nor backup is"
        raise RequestError("member", f"{PREFIX}{which} given; name one source: {USAGE}")
    key, name = ("member", member) if member else ("backup", backup)
    if not _NAME.match(name):
        raise RequestError(
            key,
            f"{PREFIX}{key} {_quoted(name)} is not a Kubernetes name (lowercase letters, "
            f"digits, '-' and '.'); write {EXPECTED[key]}",
        )
    return member, backup


def _cluster_id(value: str | None) -> str:
    """The cluster ID the request is for, as status.clusterID spells it."""
    if value is None:
        raise RequestError(
            "clusterID",
            f"{PREFIX}clusterID is missing: say which cluster the request is for, "
            f"{EXPECTED['clusterID']}",
        )
    if not _CLUSTER_ID.match(value):
        # etcdctl -w json prints IDs in decimal: the likeliest wrong copy, said by name.
        decimal = "; etcdctl -w json prints it in decimal" if value.isdigit() else ""
        raise RequestError(
            "clusterID",
            f"{PREFIX}clusterID {_quoted(value)} is not a cluster ID (hex, as status.clusterID "
            f"shows it){decimal}",
        )
    return _canonical_id(value)


def _canonical_id(value: str) -> str:
    """A cluster ID as status.clusterID spells it (etcd_common's member_id_hex)."""
    return value.lstrip("0") or "0"


def _accept_older(value: str) -> bool:
    if value not in ("true", "false"):
        raise RequestError(
            "acceptOlder",
            f"{PREFIX}acceptOlder {_quoted(value)} is neither true nor false; write "
            "acceptOlder=true to take a source older than the newest data",
        )
    return value == "true"


def parse_request(value: str) -> RecoverRequest:
    """The request an annotation's value makes. RequestError names the first key at fault:
    the pairs themselves, then the source, then clusterID, then acceptOlder."""
    pairs = _pairs(value)
    member, backup = _source(pairs)
    return RecoverRequest(
        member=member,
        backup=backup,
        cluster_id=_cluster_id(pairs.get("clusterID")),
        accept_older=_accept_older(pairs.get("acceptOlder", "false")),
    )


@dataclass(frozen=True)
class LeftBehind:
    """A voting member a recovery leaves behind and what it held, for status to record what
    is lost: `raft_index` and `revision` are None when its data is gone or it does not answer."""

    name: str
    data_lost: bool
    raft_index: int | None = None
    revision: int | None = None


@dataclass(frozen=True)
class Decision:
    """What is done with a request. `action` is refuse, done, from_member or from_backup;
    `reason` a condition reason; `message` names the key or status field to read or change.
    A recovery says its `source` (the member or EtcdBackup), the `raft_index` and `revision`
    it starts from, who is left behind (`lost`) and the `newest` survivor there was."""

    action: Action
    reason: str
    message: str
    fingerprint: str
    source: str = ""
    raft_index: int | None = None
    revision: int | None = None
    lost: tuple[LeftBehind, ...] = ()
    newest: str = ""


def _survivors(lost: dict[str, Any]) -> list[dict[str, Any]]:
    return list(lost.get("survivors") or [])


def _survivor(lost: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((s for s in _survivors(lost) if s.get("name") == name), None)


def _newest(lost: dict[str, Any]) -> str:
    return str(lost.get("newest") or newest_of(_survivors(lost)))


def _held(survivor: dict[str, Any]) -> tuple[int, int]:
    """How much a survivor holds, ordered as recovery.newest orders survivors."""
    return (survivor.get("raftIndex") or 0, survivor.get("revision") or 0)


def _cluster_refusal(request: RecoverRequest, cluster_id: str) -> Refusal:
    """A request fires only on the cluster it was written for."""
    if not cluster_id:
        return (
            "ClusterIDUnknown",
            f"{PREFIX}status.clusterID is empty, so clusterID={request.cluster_id} cannot be "
            "checked against this cluster: nothing is recovered until its ID is known",
        )
    if request.cluster_id != _canonical_id(cluster_id):
        return (
            "ClusterIDMismatch",
            f"{PREFIX}clusterID={request.cluster_id} is not this cluster's (status.clusterID "
            f"is {cluster_id}): the request was written for another cluster, or before an "
            "earlier recovery gave this one a new ID. Read status.majorityDataLost again and "
            "write a new request with this cluster's ID",
        )
    return None


def _state_refusal(quorum_answers: bool, lost: dict[str, Any]) -> Refusal:
    """Recovery is for a majority's data gone for good, never for members merely down."""
    if quorum_answers:
        return (
            "QuorumAnswers",
            f"{PREFIX}refused while a quorum answers: a recovery throws away the members left "
            "behind, and with a quorum no data is lost (status.majorityDataLost is empty). "
            "Remove the annotation",
        )
    if not lost:
        return (
            "NotMajorityLost",
            f"{PREFIX}status.majorityDataLost is empty: the members that are down keep their "
            "data and come back on their own (status says QuorumLost while they do), so there "
            "is nothing to recover. Wait for them, and remove the annotation",
        )
    return None


def _not_a_survivor(name: str, lost: dict[str, Any]) -> str:
    if name in (lost.get("lost") or []):
        why = f"member={name} lost its data (status.majorityDataLost.lost) and is never a source"
    else:
        why = f"member={name} is not one of status.majorityDataLost.survivors"
    names = [str(s.get("name")) for s in _survivors(lost)]
    offer = (
        f"the survivors are {', '.join(names)}"
        if names
        else "no member survives: ask for backup=<EtcdBackup> instead"
    )
    return f"{PREFIX}{why}; {offer}"


def _member_refusal(request: RecoverRequest, lost: dict[str, Any]) -> Refusal:
    """Only a survivor that answered, and the newest unless acceptOlder says otherwise."""
    chosen = _survivor(lost, request.member)
    if chosen is None:
        return "NotASurvivor", _not_a_survivor(request.member, lost)
    # raftIndex is this run's answer: what a survivor held when it last answered may be
    # gone since, so only one answering now is taken.
    if chosen.get("raftIndex") is None:
        return (
            "NoAnswer",
            f"{PREFIX}member={request.member} does not answer Status now (its raftIndex in "
            "status.majorityDataLost.survivors is unknown; it last answered "
            f"{chosen.get('lastAnswered') or 'never'}), so how much it holds is unknown: wait "
            "until its Pod runs and it answers, or name another survivor",
        )
    best = _survivor(lost, _newest(lost)) or chosen
    # Compared by what each holds, not by name: a survivor level with `newest` is as new.
    if _held(chosen) < _held(best) and not request.accept_older:
        return (
            "NotNewest",
            f"{PREFIX}member={request.member} holds raft index {chosen['raftIndex']} "
            f"(revision {chosen.get('revision')}), older than {best['name']}'s raft index "
            f"{best['raftIndex']} (revision {best.get('revision')}, "
            "status.majorityDataLost.newest): what lies between would be lost. Name "
            f"member={best['name']}, or add acceptOlder=true to take {request.member} anyway",
        )
    return None


def _survivor_refusal(request: RecoverRequest, lost: dict[str, Any]) -> Refusal:
    """A backup over a survivor's data only when the request says it means to."""
    names = [str(s.get("name")) for s in _survivors(lost)]
    if not names or request.accept_older:
        return None
    best = _newest(lost) or names[0]
    kept = "keeps its data" if len(names) == 1 else "keep their data"
    return (
        "SurvivorExists",
        f"{PREFIX}backup={request.backup} refused: {', '.join(names)} {kept} "
        "(status.majorityDataLost.survivors), and a survivor's data is in general at least "
        f"as new as any backup. Name member={best}, or add acceptOlder=true to restore the "
        "backup anyway and give up what only the survivors hold",
    )


def backup_named(backups: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    """The EtcdBackup of that name; one being deleted is as good as gone."""
    return next((b for b in backups if _meta(b).get("name") == name and not _deleting(b)), None)


def _last_snapshot(backup: dict[str, Any]) -> dict[str, Any]:
    return dict((backup.get("status") or {}).get("lastSnapshot") or {})


def _owner_refusal(key: str, backup: dict[str, Any], cluster_id: str, cluster_name: str) -> Refusal:
    """The backup must be this cluster's: by its spec, and by the ID its snapshot recorded."""
    owner = str((backup.get("spec") or {}).get("clusterName") or "")
    if owner != cluster_name:
        return (
            "BackupOfAnotherCluster",
            f"{PREFIX}{key} backs up EtcdCluster {owner or '(none)'} (its spec.clusterName), "
            f"not {cluster_name}: name an EtcdBackup of this cluster",
        )
    taken_of = str(_last_snapshot(backup).get("clusterID") or "")
    if taken_of and _canonical_id(taken_of) != _canonical_id(cluster_id):
        return (
            "BackupOfAnotherCluster",
            f"{PREFIX}{key} holds a snapshot of cluster ID {taken_of} (its "
            f"status.lastSnapshot.clusterID), not of this cluster's {cluster_id} "
            "(status.clusterID): it was taken before an earlier recovery, or of a cluster "
            "re-created under this name. If that is meant, restore it with an EtcdRestore",
        )
    return None


def _snapshot_refusal(key: str, backup: dict[str, Any]) -> Refusal:
    """Only a verified snapshot that its backup's last check still found."""
    last = _last_snapshot(backup)
    if not last.get("sha256") or not last.get("location"):
        return (
            "BackupNotVerified",
            f"{PREFIX}{key} has no verified snapshot (its status.lastSnapshot has no sha256): "
            "wait until its snapshot is verified, or name another EtcdBackup",
        )
    # The restore runbook's rule too: a snapshot its backup's check found gone restores nothing.
    if any(
        isinstance(c, dict) and (c.get("type"), c.get("reason")) == ("Available", "SnapshotMissing")
        for c in (backup.get("status") or {}).get("conditions") or []
    ):
        return (
            "BackupSnapshotMissing",
            f"{PREFIX}{key}'s status.lastSnapshot {last['location']} is missing (its Available "
            "condition says SnapshotMissing): name another EtcdBackup",
        )
    return None


def _restorable_refusal(request: RecoverRequest, backup: dict[str, Any], version: str) -> Refusal:
    """What the restore runbook would refuse of that snapshot, refused before anything is
    fenced: a snapshot not where its backup's destination says, or of an etcd that the
    cluster's version cannot start on."""
    key = f"backup={request.backup}"
    try:
        source = _backup_source(request.backup, backup)
    except RestoreRefused as e:
        return (
            "BackupNotRestorable",
            f"{PREFIX}{key}: {e.message.removeprefix(f'{e.field}: ')}; name another EtcdBackup",
        )
    taken_by = source["etcd_version"]
    if version and version_refusal(taken_by, version):
        minor = ".".join(taken_by.split(".")[:2])
        return (
            "BackupVersionMismatch",
            f"{PREFIX}{key} holds a snapshot of etcd {taken_by}, which spec.version {version} "
            f"cannot start on (etcd reads data of its own minor or the one before): set "
            f"spec.version to a {minor} release, or name another EtcdBackup",
        )
    return None


def _backup_refusal(
    request: RecoverRequest,
    backup: dict[str, Any] | None,
    lost: dict[str, Any],
    cluster_id: str,
    cluster_name: str,
    version: str,
) -> Refusal:
    """A survivor first (whatever the backup, it is the better source), then the backup:
    there, this cluster's, verified, restorable by `version`."""
    key = f"backup={request.backup}"
    if refusal := _survivor_refusal(request, lost):
        return refusal
    if backup is None:
        return (
            "BackupNotFound",
            f"{PREFIX}{key}: no EtcdBackup {request.backup} in this namespace (or it is being "
            "deleted); name one of this cluster's EtcdBackups",
        )
    return (
        _owner_refusal(key, backup, cluster_id, cluster_name)
        or _snapshot_refusal(key, backup)
        or _restorable_refusal(request, backup, version)
    )


def _left_behind(lost: dict[str, Any], source: str) -> tuple[LeftBehind, ...]:
    """Every voting member but the source: the lost, and the survivors not chosen."""
    gone = [LeftBehind(str(name), data_lost=True) for name in lost.get("lost") or []]
    kept = [
        LeftBehind(str(s.get("name")), False, s.get("raftIndex"), s.get("revision"))
        for s in _survivors(lost)
        if s.get("name") != source
    ]
    return tuple(sorted(gone + kept, key=lambda m: m.name))


def _said(left: tuple[LeftBehind, ...]) -> str:
    def one(m: LeftBehind) -> str:
        if m.data_lost:
            return f"{m.name} (data lost)"
        if m.raft_index is None:
            return f"{m.name} (not answering)"
        return f"{m.name} (raft index {m.raft_index}, revision {m.revision})"

    return ", ".join(one(m) for m in left) or "none"


def _from_member(request: RecoverRequest, lost: dict[str, Any], fingerprint: str) -> Decision:
    chosen = _survivor(lost, request.member) or {}
    best = _survivor(lost, _newest(lost)) or chosen
    older = _held(chosen) < _held(best)
    left = _left_behind(lost, request.member)
    which = (
        f"older than {best.get('name')} (acceptOlder=true)" if older else "the newest data there is"
    )
    return Decision(
        action="from_member",
        reason="FromOlderSurvivor" if older else "FromNewestSurvivor",
        message=f"{PREFIX}recovering from member={request.member} (raft index "
        f"{chosen.get('raftIndex')}, revision {chosen.get('revision')}), {which}; left "
        f"behind: {_said(left)}",
        fingerprint=fingerprint,
        source=request.member,
        raft_index=chosen.get("raftIndex"),
        revision=chosen.get("revision"),
        lost=left,
        newest=_newest(lost),
    )


def _from_backup(
    request: RecoverRequest, backup: dict[str, Any], lost: dict[str, Any], fingerprint: str
) -> Decision:
    last = _last_snapshot(backup)
    left = _left_behind(lost, "")
    over = " over the survivors' data (acceptOlder=true)" if _survivors(lost) else ""
    return Decision(
        action="from_backup",
        reason="FromBackup",
        message=f"{PREFIX}recovering from backup={request.backup} (status.lastSnapshot "
        f"{last.get('location')}, revision {last.get('revision')}){over}; left behind: "
        f"{_said(left)}",
        fingerprint=fingerprint,
        source=request.backup,
        revision=last.get("revision"),
        lost=left,
        newest=_newest(lost),
    )


def _done(request: RecoverRequest, fingerprint: str) -> Decision:
    return Decision(
        action="done",
        reason="AlreadyDone",
        message=f"{PREFIX}{request.normalised()} was carried out already (fingerprint "
        f"{fingerprint}): nothing to do; the annotation may be removed",
        fingerprint=fingerprint,
    )


def decide(
    request: RecoverRequest,
    *,
    cluster_id: str,
    cluster_name: str,
    quorum_answers: bool,
    majority_lost: dict[str, Any],
    backups: list[dict[str, Any]],
    done: list[str],
    version: str = "",
) -> Decision:
    """What to do with `request` on the cluster `cluster_name` recorded as `cluster_id`
    (status.clusterID). `majority_lost` is recovery.plan_majority_lost's (empty unless a
    majority's data is gone), `backups` the namespace's EtcdBackups as the API returns them,
    `done` the fingerprints of the requests carried out already, `version` the etcd version
    the recovered cluster runs (spec.version; '' skips that check).

    The rules, in order: a request carried out already is done (first, because a recovery
    gives the cluster a new ID: the annotation left in place then reads as done, not as a
    mismatch); the cluster ID must be this cluster's; never while a quorum answers; only when
    a majority's data is gone; then the source's own rules."""
    fingerprint = request.fingerprint()
    if fingerprint in done:
        return _done(request, fingerprint)
    backup = backup_named(backups, request.backup) if request.backup else None
    refusal = (
        _cluster_refusal(request, cluster_id)
        or _state_refusal(quorum_answers, majority_lost)
        or (
            _member_refusal(request, majority_lost)
            if request.member
            else _backup_refusal(request, backup, majority_lost, cluster_id, cluster_name, version)
        )
    )
    if refusal:
        return Decision("refuse", refusal[0], refusal[1], fingerprint)
    if backup is not None:
        return _from_backup(request, backup, majority_lost, fingerprint)
    return _from_member(request, majority_lost, fingerprint)


def _status_of(asked: str, decision: Decision, held: bool) -> dict[str, Any]:
    """What status.recovery records of a decision: what was asked, what was chosen and why,
    and what a recovery from that source leaves behind. `held`: the cluster is paused (or
    not the operator's to change), so the recovery waits."""
    out: dict[str, Any] = {
        "asked": asked,
        "action": decision.action,
        "reason": decision.reason,
        "message": decision.message,
        "fingerprint": decision.fingerprint,
    }
    if decision.action in ("from_member", "from_backup"):
        out |= {
            "source": decision.source,
            "raftIndex": decision.raft_index,
            "revision": decision.revision,
            "newest": decision.newest,
            "leftBehind": [
                {
                    "name": m.name,
                    "dataLost": m.data_lost,
                    "raftIndex": m.raft_index,
                    "revision": m.revision,
                }
                for m in decision.lost
            ],
            # Carried out by recover_steps.py from this run on, unless held.
            "carriedOut": False,
        }
        if held:
            out["message"] = decision.message + HELD
    return out


# What a recovery's decision says while the cluster is paused or not the operator's.
HELD = (
    ". Nothing is done while spec.paused is true (or the cluster is outside the operator's "
    "allow-lists): the recovery starts once it is not"
)


def plan_recover_request(o: _Observed, d: Decided) -> Decided:
    """The recovery request the EtcdCluster carries, if any, decided on this run's look:
    `recovery` is what status.recovery records ({} when there is no request). A request that
    cannot be read names the key at fault (`field`). The run's other decisions do not depend
    on it: a request left in place never holds up healing or scaling. A run by hand may pass
    its request in `options.recover_quorum` instead (playbooks/etcd-recover-quorum.yml shows
    its decision in check mode, where no annotation is written); it is taken over the
    annotation's."""
    given = str(o.options.get("recover_quorum") or "")
    value = given or annotations_of(o.obj).get(ANN_RECOVER_QUORUM)
    where = "options.recover_quorum" if given else f"metadata.annotations[{ANN_RECOVER_QUORUM}]"
    if value is None:
        return {"recovery": {}}
    try:
        request = parse_request(value)
    except RequestError as e:
        return {
            "recovery": {
                # As written, escaped and cut short: it could not be read, so not normalised.
                "asked": _quoted(value).strip('"'),
                "action": "refuse",
                "reason": "RequestInvalid",
                "field": f"{where} {e.field}",
                "message": e.message,
            }
        }
    decision = decide(
        request,
        cluster_id=o.recorded_id,
        cluster_name=o.name,
        quorum_answers=bool(o.quorum.get("ok")),
        majority_lost=d["majority_lost"],
        backups=o.backups,
        # Read back from the claims: a recovery's first member's claim records its request.
        done=sorted(o.recovered),
        version=str(o.spec.get("version") or ""),
    )
    return {"recovery": _status_of(request.normalised(), decision, o.hands_off)}
