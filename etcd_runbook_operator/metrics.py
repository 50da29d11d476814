"""Prometheus metrics of the watcher (names documented in docs/operator.md).

Besides the watcher's own, gauges of each EtcdCluster and EtcdBackup read from the status the
watcher writes (observe), so a Prometheus scraping the operator sees each cluster's health
without scraping etcd. object_samples() is the pure part: one object to its samples."""

from __future__ import annotations

import threading
from collections import Counter as Tally
from datetime import UTC, datetime
from typing import Any, NamedTuple

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

CLUSTER, BACKUP = "EtcdCluster", "EtcdBackup"
DEFAULT_SIZE = 3
# Always sampled, 0 when not raised, so an alert can say `> 0` from the first write on.
KNOWN_ALARMS = ("NOSPACE", "CORRUPT")

_OBJECT = ("namespace", "name")
_BACKUP = (*_OBJECT, "cluster")

# name: (help, label names) of every gauge set from an object's status.
OBJECT_GAUGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "etcd_runbook_cluster_members": ("Voting members the spec asks for (spec.size)", _OBJECT),
    "etcd_runbook_cluster_members_ready": (
        "Voting members started and healthy (status.readyMembers)",
        _OBJECT,
    ),
    "etcd_runbook_cluster_quorum": ("Members a quorum needs: spec.size // 2 + 1", _OBJECT),
    "etcd_runbook_cluster_available": (
        "1 while the Available condition is True, 0 while False, absent while Unknown",
        _OBJECT,
    ),
    "etcd_runbook_cluster_ready": (
        "1 while the Ready condition is True, 0 while False, absent while Unknown",
        _OBJECT,
    ),
    "etcd_runbook_cluster_has_leader": ("1 when status.leader names a member, else 0", _OBJECT),
    "etcd_runbook_cluster_db_size_bytes": (
        "A member's database file as it last answered (status.members[].dbSize)",
        (*_OBJECT, "member"),
    ),
    "etcd_runbook_cluster_db_size_in_use_bytes": (
        "A member's database in use as it last answered (status.members[].dbSizeInUse)",
        (*_OBJECT, "member"),
    ),
    "etcd_runbook_cluster_quota_bytes": (
        "The members' backend quota (status.space.quota)",
        _OBJECT,
    ),
    "etcd_runbook_cluster_alarms": (
        "Active etcd alarms of the cluster by alarm (status.alarms)",
        (*_OBJECT, "alarm"),
    ),
    "etcd_runbook_cluster_info": (
        "1, labelled with status.currentVersion, status.clusterID and status.phase",
        (*_OBJECT, "version", "cluster_id", "phase"),
    ),
    "etcd_runbook_backup_last_snapshot_timestamp_seconds": (
        "When the backup's last snapshot was taken (status.lastSnapshot.time), Unix seconds",
        _BACKUP,
    ),
    "etcd_runbook_backup_last_verified_timestamp_seconds": (
        "When the last snapshot was last found with its manifest (status.lastCheck.time), "
        "absent while it is not",
        _BACKUP,
    ),
    "etcd_runbook_backup_failing": ("1 while the Degraded condition is True, else 0", _BACKUP),
    "etcd_runbook_backup_scheduled": (
        "1 while spec.schedule takes snapshots (set and not suspended), else 0",
        _BACKUP,
    ),
}


class Sample(NamedTuple):
    metric: str
    labels: tuple[str, ...]  # values, in the order of OBJECT_GAUGES[metric]'s label names
    value: float


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _unix(value: Any) -> float | None:
    """Unix seconds of an RFC 3339 time; None for anything else. A time without zone is UTC,
    as everything the runbooks write is."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _condition(status: dict[str, Any], type_: str) -> str:
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == type_:
            return str(cond.get("status") or "Unknown")
    return "Unknown"


def _bit(condition: str) -> float | None:
    return {"True": 1.0, "False": 0.0}.get(condition)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _member_samples(labels: tuple[str, ...], members: Any) -> list[Sample]:
    """Database sizes of each member that answered (a member that did not has none)."""
    out = []
    for member in members if isinstance(members, list) else []:
        if not isinstance(member, dict) or not member.get("name"):
            continue
        at = (*labels, str(member["name"]))
        for metric, field in (
            ("etcd_runbook_cluster_db_size_bytes", "dbSize"),
            ("etcd_runbook_cluster_db_size_in_use_bytes", "dbSizeInUse"),
        ):
            if (size := _number(member.get(field))) is not None:
                out.append(Sample(metric, at, size))
    return out


def _alarm_samples(labels: tuple[str, ...], alarms: Any) -> list[Sample]:
    raised = Tally(
        str(a["alarm"])
        for a in (alarms if isinstance(alarms, list) else [])
        if isinstance(a, dict) and a.get("alarm")
    )
    return [
        Sample("etcd_runbook_cluster_alarms", (*labels, alarm), float(raised[alarm]))
        for alarm in sorted({*KNOWN_ALARMS, *raised})
    ]


def cluster_samples(obj: dict[str, Any]) -> list[Sample]:
    meta, spec, status = (_dict(obj.get(k)) for k in ("metadata", "spec", "status"))
    labels = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
    size = spec.get("size")
    size = size if isinstance(size, int) and not isinstance(size, bool) else DEFAULT_SIZE
    info = tuple(str(status.get(k) or "") for k in ("currentVersion", "clusterID", "phase"))
    named = [
        ("etcd_runbook_cluster_members", float(size)),
        ("etcd_runbook_cluster_quorum", float(size // 2 + 1)),
        ("etcd_runbook_cluster_members_ready", _number(status.get("readyMembers"))),
        ("etcd_runbook_cluster_available", _bit(_condition(status, "Available"))),
        ("etcd_runbook_cluster_ready", _bit(_condition(status, "Ready"))),
        ("etcd_runbook_cluster_has_leader", 1.0 if status.get("leader") else 0.0),
        ("etcd_runbook_cluster_quota_bytes", _number(_dict(status.get("space")).get("quota"))),
    ]
    return [
        *(Sample(m, labels, v) for m, v in named if v is not None),
        *_member_samples(labels, status.get("members")),
        *_alarm_samples(labels, status.get("alarms")),
        Sample("etcd_runbook_cluster_info", (*labels, *info), 1.0),
    ]


def backup_samples(obj: dict[str, Any]) -> list[Sample]:
    meta, spec, status = (_dict(obj.get(k)) for k in ("metadata", "spec", "status"))
    labels = (
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
        str(spec.get("clusterName") or ""),
    )
    snapshot, check = _dict(status.get("lastSnapshot")), _dict(status.get("lastCheck"))
    # Found is said of the location checked: a check of an older snapshot verifies not this one.
    verified = (
        check.get("result") == "Found"
        and bool(snapshot.get("location"))
        and check.get("location") == snapshot.get("location")
    )
    named = [
        ("etcd_runbook_backup_last_snapshot_timestamp_seconds", _unix(snapshot.get("time"))),
        (
            "etcd_runbook_backup_last_verified_timestamp_seconds",
            _unix(check.get("time")) if verified else None,
        ),
        ("etcd_runbook_backup_failing", 1.0 if _condition(status, "Degraded") == "True" else 0.0),
        # What tells a stopped schedule (its newest snapshot ageing) from a one-off backup.
        (
            "etcd_runbook_backup_scheduled",
            1.0 if spec.get("schedule") and not spec.get("suspend") else 0.0,
        ),
    ]
    return [Sample(m, labels, v) for m, v in named if v is not None]


def object_samples(kind: str, obj: dict[str, Any]) -> list[Sample]:
    """The gauges of one watched object as its status says; none for kinds without any."""
    if kind == CLUSTER:
        return cluster_samples(obj)
    if kind == BACKUP:
        return backup_samples(obj)
    return []


def leader_change(last: str, leader: Any) -> tuple[str, bool]:
    """The leader to remember after a write that says `leader`, and whether it changed. A
    spell without leader is remembered as nothing: the change is counted when the next
    leader is named, if it is another member."""
    if not isinstance(leader, str) or not leader:
        return last, False
    return leader, bool(last) and last != leader


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        prefix = "etcd_runbook_operator"
        self.reconcile_total = Counter(
            f"{prefix}_reconcile_total",
            "Reconciles by kind and result (success, failure, skipped, stopped, preempted)",
            ["kind", "result"],
            registry=self.registry,
        )
        self.reconcile_skipped = Counter(
            f"{prefix}_reconcile_skipped_total",
            "Reconciles that did not start ansible-runner because nothing changed",
            ["kind"],
            registry=self.registry,
        )
        self.playbook_duration = Histogram(
            f"{prefix}_playbook_duration_seconds",
            "Wall time of ansible-runner runs",
            ["kind", "result"],
            buckets=(0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800),
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            f"{prefix}_workqueue_depth",
            "Objects waiting for a worker",
            ["kind"],
            registry=self.registry,
        )
        self.leader = Gauge(
            f"{prefix}_leader",
            "1 while this process holds the leader Lease (or runs without election)",
            registry=self.registry,
        )
        self.watch_restarts = Counter(
            f"{prefix}_watch_restarts_total",
            "Watch streams re-opened, by resource and reason (closed, gone, error)",
            ["resource", "reason"],
            registry=self.registry,
        )
        self.object_gauges = {
            name: Gauge(name, text, labels, registry=self.registry)
            for name, (text, labels) in OBJECT_GAUGES.items()
        }
        self.leader_changes = Counter(
            "etcd_runbook_cluster_leader_changes_total",
            "status.leader changed from one member to another between two status writes of "
            "this process",
            _OBJECT,
            registry=self.registry,
        )
        # Workers and the mid-run status writers of several objects observe at once.
        self._lock = threading.Lock()
        # The label sets each object has now, to remove those a later status no longer has.
        self._series: dict[tuple[str, str, str], set[tuple[str, tuple[str, ...]]]] = {}
        self._leaders: dict[tuple[str, str], str] = {}

    def observe(self, kind: str, obj: dict[str, Any]) -> None:
        """Set the gauges of `obj` from the status just written."""
        samples = object_samples(kind, obj)
        if not samples:
            return
        meta = obj.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        key = (kind, namespace, name)
        series = {(s.metric, s.labels) for s in samples}
        with self._lock:
            for metric, labels in self._series.get(key, set()) - series:
                self.object_gauges[metric].remove(*labels)
            for s in samples:
                self.object_gauges[s.metric].labels(*s.labels).set(s.value)
            self._series[key] = series
            if kind == CLUSTER:
                self._count_leader_change(namespace, name, _dict(obj.get("status")))

    def _count_leader_change(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        counter = self.leader_changes.labels(namespace, name)  # 0 from the first write on
        last = self._leaders.get((namespace, name), "")
        self._leaders[(namespace, name)], changed = leader_change(last, status.get("leader"))
        if changed:
            counter.inc()

    def forget(self, kind: str, namespace: str, name: str) -> None:
        """Remove every label set of an object that is gone."""
        with self._lock:
            for metric, labels in self._series.pop((kind, namespace, name), set()):
                self.object_gauges[metric].remove(*labels)
            if kind == CLUSTER:
                self._leaders.pop((namespace, name), None)
                self.leader_changes.remove(namespace, name)

    def serve(self, host: str, port: int) -> None:
        start_http_server(port, addr=host, registry=self.registry)
