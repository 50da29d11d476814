"""The versions members run and may move to, and the gate of a minor upgrade: a verified
snapshot first (a one-off EtcdBackup), unless waived in writing."""

from __future__ import annotations

import hashlib
from typing import Any

from etcd_runbook.names import (
    ANN_UPGRADE_WITHOUT_SNAPSHOT,
    ANN_VERSION,
    GROUP,
    LABEL_BEFORE_UPGRADE,
    LABEL_CLUSTER,
    LABEL_VERSION,
)
from etcd_runbook.rules.cluster.common import (
    _deleting,
    _meta,
    _refusal,
    annotations_of,
    labels_of,
    version_tuple,
)
from etcd_runbook.rules.cluster.observed import Decided, _Observed
from etcd_runbook.rules.cluster.spec import DEFAULT_VERSION, version_change_problem, version_problem


def _versions(o: _Observed) -> tuple[dict[str, str], str, dict[str, str] | None]:
    """(version each member runs, the version new members start on, a refusal or None)."""
    running = {
        n: annotations_of(c).get(ANN_VERSION) or labels_of(o.pods.get(n)).get(LABEL_VERSION) or ""
        for n, c in o.live_claims.items()
    }
    running = {n: v for n, v in running.items() if v}
    target = o.spec["version"]
    if version_problem(target):
        base = min(running.values(), key=version_tuple, default=DEFAULT_VERSION)
        return running, base, None
    for current in sorted(set(running.values()), key=version_tuple):
        if current == target or version_problem(current):
            continue
        if why := version_change_problem(
            current, target, o.options.get("min_35_for_36") or "3.5.26"
        ):
            refusal = _refusal(
                "UnsafeVersionChange",
                "spec.version",
                f"Refusing spec.version {target}: {why}. The members keep their version.",
            )
            return running, min(running.values(), key=version_tuple), refusal
    return running, target, None


def before_upgrade_name(cluster: str, minor: str) -> str:
    """The one-off EtcdBackup's name: its Job's name adds 11 characters and must stay within
    63, so a long cluster name is cut and made unique again by a hash of it."""
    suffix = f"-before-{minor.replace('.', '-')}"
    if len(cluster) + len(suffix) <= 52:
        return cluster + suffix
    digest = hashlib.sha256(cluster.encode()).hexdigest()[:6]
    return f"{cluster[: 52 - len(suffix) - 7]}-{digest}{suffix}"


def _minor_of(version: str) -> str:
    return ".".join(version.split(".")[:2])


def upgrade_snapshot(o: _Observed) -> dict[str, Any]:
    """The verified snapshot taken before the upgrade to the spec's minor, as status records
    it; empty when there is none."""
    minor = _minor_of(o.spec["version"])
    for backup in o.own_backups:
        if labels_of(backup).get(LABEL_BEFORE_UPGRADE) != minor:
            continue
        last = (backup.get("status") or {}).get("lastSnapshot") or {}
        if last.get("location") and last.get("sha256"):
            return {
                "version": minor,
                "backup": str(_meta(backup).get("name")),
                "location": last["location"],
                "sha256": last["sha256"],
                "revision": last.get("revision"),
                "time": last.get("time"),
            }
    return {}


def _before_upgrade_backup(o: _Observed, source: dict[str, Any], minor: str) -> dict[str, Any]:
    """A one-off EtcdBackup to the destination of the cluster's own EtcdBackup (a bucket or a
    claim), under a prefix of its own (`<prefix>/before-upgrade`, on a claim
    `<path>/before-upgrade`) so the schedule's retention never prunes it; owned by the
    EtcdCluster, and labelled so its progress queues the cluster."""
    destination = (source.get("spec") or {}).get("destination") or {}
    kind = "s3" if destination.get("s3") else "volume"
    where = dict(destination.get(kind) or {})
    field = "prefix" if kind == "s3" else "path"
    joined = "/".join(p for p in (str(where.get(field) or "").strip("/"), "before-upgrade") if p)
    # A claim's path is absolute inside it (the CRD says so); a key prefix is not.
    where[field] = joined if kind == "s3" else f"/{joined}"
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "EtcdBackup",
        "metadata": {
            "name": before_upgrade_name(o.name, minor),
            "namespace": o.namespace,
            "labels": {
                "app.kubernetes.io/managed-by": "etcd-runbook-operator",
                LABEL_CLUSTER: o.name,
                LABEL_BEFORE_UPGRADE: minor,
            },
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/v1alpha1",
                    "kind": "EtcdCluster",
                    "name": o.name,
                    "uid": str(_meta(o.obj).get("uid") or ""),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"clusterName": o.name, "destination": {kind: where}},
    }


def _not_the_upgrade_backup(backup: dict[str, Any], cluster: str, minor: str) -> str:
    """Why an EtcdBackup named like the one-off snapshot before an upgrade is not the one
    the plan makes (`_before_upgrade_backup`); empty when it is. Only that one is read: a
    labelled one's status changes queue the cluster, an unlabelled one's do not."""
    found = (backup.get("spec") or {}).get("clusterName")
    if found != cluster:
        return f"its spec.clusterName is {found!r}, not {cluster!r}"
    label = labels_of(backup).get(LABEL_BEFORE_UPGRADE)
    if label != minor:
        return (
            f"it is labelled {LABEL_BEFORE_UPGRADE}={label}, not {minor}"
            if label is not None
            else f"it lacks the label {LABEL_BEFORE_UPGRADE}={minor}"
        )
    return ""


def _upgrade_gate(
    o: _Observed, running: dict[str, str], snapshot: dict[str, Any]
) -> dict[str, Any]:
    """Whether members may move to the spec's version: one that takes a member to a newer
    minor waits for a verified snapshot (to the cluster's EtcdBackup's destination), unless a
    person wrote down that this version goes without one. Returns `create` (the one-off
    EtcdBackup to make), `waiting` (why the upgrade waits) or `refusal`; empty when the
    members may move (a patch change, or no change of version, needs no snapshot)."""
    target = o.spec["version"]
    minor = _minor_of(target)
    if not any(version_tuple(v)[:2] < version_tuple(target)[:2] for v in running.values()):
        return {}
    if annotations_of(o.obj).get(ANN_UPGRADE_WITHOUT_SNAPSHOT) == target:
        return {}
    if snapshot:
        return {}
    name = before_upgrade_name(o.name, minor)
    taken = next((b for b in o.backups if _meta(b).get("name") == name and not _deleting(b)), None)
    if taken is not None:
        return _taken_gate(o, taken, target, name)
    sources = sorted(
        (
            b
            for b in o.own_backups
            if LABEL_BEFORE_UPGRADE not in labels_of(b)
            and (((b.get("spec") or {}).get("destination") or {}).keys() & {"s3", "volume"})
        ),
        key=lambda b: str(_meta(b).get("name")),
    )
    if not sources:
        return {
            "refusal": _refusal(
                "UpgradeNeedsSnapshot",
                "spec.version",
                f"spec.version {target}: not upgrading yet: a minor upgrade starts with a verified "
                "snapshot, and no EtcdBackup saves this cluster. Create one (the snapshot "
                "goes to its destination), or annotate the EtcdCluster "
                f"{ANN_UPGRADE_WITHOUT_SNAPSHOT}={target} to upgrade without one. The members "
                "keep their version meanwhile",
            )
        }
    return {
        "create": _before_upgrade_backup(o, sources[0], minor),
        "waiting": f"taking a snapshot before the upgrade to {target} (EtcdBackup {name}, to the "
        f"destination of EtcdBackup {_meta(sources[0]).get('name')}); the roll starts once it is "
        "verified",
    }


def _taken_gate(o: _Observed, taken: dict[str, Any], target: str, name: str) -> dict[str, Any]:
    """The gate once an EtcdBackup has the one-off snapshot's name: waiting for it, refused
    when it failed, or when it is someone else's object under our name (its progress does not
    queue this cluster: the watcher counts it by spec only, or under another cluster, and ours
    cannot be made)."""
    if why_not := _not_the_upgrade_backup(taken, o.name, _minor_of(target)):
        return {
            "refusal": _refusal(
                "UpgradeSnapshotNameTaken",
                "spec.version",
                f"spec.version {target}: not upgrading: EtcdBackup {name} has the name of the "
                f"snapshot this upgrade takes, but it is not that snapshot ({why_not}). Delete "
                f"or rename EtcdBackup {name} so the runbook can take it, or annotate the "
                f"EtcdCluster {ANN_UPGRADE_WITHOUT_SNAPSHOT}={target} to upgrade without one",
            )
        }
    status = taken.get("status") or {}
    if status.get("phase") == "Failed":
        why = next(
            (
                c.get("message")
                for c in status.get("conditions") or []
                if c.get("type") == "Degraded"
            ),
            "",
        )
        return {
            "refusal": _refusal(
                "UpgradeSnapshotFailed",
                "spec.version",
                f"spec.version {target}: not upgrading: the snapshot it starts with failed "
                f"(EtcdBackup {name}: {why or 'see its conditions'}). Fix the cause and "
                "delete EtcdBackup "
                f"{name} to take it again, or annotate the EtcdCluster "
                f"{ANN_UPGRADE_WITHOUT_SNAPSHOT}={target} to upgrade without one",
            )
        }
    return {
        "waiting": f"taking a snapshot before the upgrade to {target} (EtcdBackup {name}); "
        "the roll starts once it is verified"
    }


# --- the steps of a plan ---------------------------------------------------------------------


def plan_versions(o: _Observed, d: Decided) -> Decided:
    """The versions members run and the gate of a minor upgrade, decided first: every Pod the
    plan makes reads them. The spec's and the TLS Secrets' refusals come first, then the
    version's."""
    spec_ok = not o.spec["problems"]
    running, base_version, version_refusal = _versions(o)
    snapshot = upgrade_snapshot(o)
    return {
        "refusals": [*o.spec["problems"], *o.tls] + ([version_refusal] if version_refusal else []),
        "spec_ok": spec_ok,
        "running": running,
        "base_version": base_version,
        "version_refusal": version_refusal,
        "upgrade_snapshot": snapshot,
        "gate": _upgrade_gate(o, running, snapshot) if spec_ok and not version_refusal else {},
        "lowest": min(running.values(), key=version_tuple, default=base_version),
    }


def member_version(o: _Observed, d: Decided, member: str) -> str:
    """The version a Pod made now for `member` runs. A minor upgrade starts from a verified
    snapshot, or not at all: until its gate opens, every Pod the plan makes (a heal, a
    learner, a replacement, a roll of another change) runs the version its member ran, and a
    new member the lowest one running; a Pod made on the new minor would be the upgrade
    starting without its way back."""
    if d["version_refusal"] or not d["spec_ok"]:
        return str(d["running"].get(member, d["base_version"]))
    return str(d["running"].get(member, d["lowest"])) if d["gate"] else str(o.spec["version"])


def plan_upgrade_gate(o: _Observed, d: Decided) -> Decided:
    """After the membership decisions: an upgrade waiting for its snapshot holds the version,
    not the members (a learner still joins, on the version the others run). The one-off
    EtcdBackup is made only on the word of a quorum that agrees: its Job takes the snapshot
    from a healthy member."""
    gate = d["gate"]
    return {
        "refusals": [gate["refusal"]] if gate.get("refusal") else [],
        "upgrade_backup": [gate["create"]]
        if gate.get("create") and o.trusted and not o.hands_off
        else [],
        "upgrade_waiting": gate.get("waiting", "") if not o.hands_off else "",
    }
