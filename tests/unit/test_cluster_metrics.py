"""Per-object gauges of the operator's /metrics: the samples of one EtcdCluster or EtcdBackup
(table), label sets that go with the object or with a changed label, the leader counter, the
exposition as Prometheus reads it, and the watcher setting them where it writes status."""

from __future__ import annotations

import copy
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from etcd_runbook_operator.config import Target, Watch
from etcd_runbook_operator.controller import Controller
from etcd_runbook_operator.events import EventRecorder
from etcd_runbook_operator.kube import Resource
from etcd_runbook_operator.metrics import (
    BACKUP,
    CLUSTER,
    OBJECT_GAUGES,
    Metrics,
    leader_change,
    object_samples,
)
from tests.unit.watcher_fakes import FakeKube, FakeRunner, result

NS_NAME = ("prod", "main")
T0 = "2026-03-01T12:00:00Z"
T0_UNIX = 1772366400.0


def cond(type_: str, status: str) -> dict[str, str]:
    return {"type": type_, "status": status, "reason": "R", "message": ""}


def member(name: str, ready: bool = True, learner: bool = False, db: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "id": f"id-{name}", "ready": ready, "learner": learner}
    if db:
        out |= {"dbSize": db, "dbSizeInUse": db // 2}
    return out


def cluster(spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None) -> dict:
    obj: dict[str, Any] = {
        "metadata": {"namespace": "prod", "name": "main"},
        "spec": spec if spec is not None else {"size": 3},
    }
    if status is not None:
        obj["status"] = status
    return obj


HEALTHY: dict[str, Any] = {
    "phase": "Running",
    "readyMembers": 3,
    "size": 3,
    "leader": "main-0",
    "currentVersion": "3.6.16",
    "clusterID": "cdf818194e3a8c32",
    "members": [member("main-0", db=4096), member("main-1", db=8192), member("main-2", db=4096)],
    "alarms": [],
    "space": {"quota": 335544320, "message": ""},
    "conditions": [
        cond("Available", "True"),
        cond("Progressing", "False"),
        cond("Degraded", "False"),
        cond("Ready", "True"),
    ],
}


def samples(kind: str, obj: dict) -> dict[tuple[str, tuple[str, ...]], float]:
    return {(s.metric, s.labels): s.value for s in object_samples(kind, obj)}


def by_name(kind: str, obj: dict) -> dict[str, float]:
    """The samples of the object-level gauges (those labelled namespace and name only)."""
    return {m: v for (m, labels), v in samples(kind, obj).items() if labels == NS_NAME}


def test_a_healthy_cluster_of_three():
    got = samples(CLUSTER, cluster(status=HEALTHY))
    assert got == {
        ("etcd_runbook_cluster_members", NS_NAME): 3,
        ("etcd_runbook_cluster_quorum", NS_NAME): 2,
        ("etcd_runbook_cluster_members_ready", NS_NAME): 3,
        ("etcd_runbook_cluster_available", NS_NAME): 1,
        ("etcd_runbook_cluster_ready", NS_NAME): 1,
        ("etcd_runbook_cluster_has_leader", NS_NAME): 1,
        ("etcd_runbook_cluster_quota_bytes", NS_NAME): 335544320,
        ("etcd_runbook_cluster_db_size_bytes", (*NS_NAME, "main-0")): 4096,
        ("etcd_runbook_cluster_db_size_in_use_bytes", (*NS_NAME, "main-0")): 2048,
        ("etcd_runbook_cluster_db_size_bytes", (*NS_NAME, "main-1")): 8192,
        ("etcd_runbook_cluster_db_size_in_use_bytes", (*NS_NAME, "main-1")): 4096,
        ("etcd_runbook_cluster_db_size_bytes", (*NS_NAME, "main-2")): 4096,
        ("etcd_runbook_cluster_db_size_in_use_bytes", (*NS_NAME, "main-2")): 2048,
        ("etcd_runbook_cluster_alarms", (*NS_NAME, "CORRUPT")): 0,
        ("etcd_runbook_cluster_alarms", (*NS_NAME, "NOSPACE")): 0,
        ("etcd_runbook_cluster_info", (*NS_NAME, "3.6.16", "cdf818194e3a8c32", "Running")): 1,
    }
    assert all(len(labels) == len(OBJECT_GAUGES[m][1]) for m, labels in got)


@pytest.mark.parametrize(
    ("spec", "status", "expected"),
    [
        pytest.param(
            {"size": 4},
            {
                **HEALTHY,
                "phase": "Scaling",
                "members": [*HEALTHY["members"], member("main-3", ready=False, learner=True)],
                "size": 4,
                "conditions": [
                    cond("Available", "True"),
                    cond("Progressing", "True"),
                    cond("Ready", "False"),
                ],
            },
            # A learner is no voter: the quorum is the spec's, readyMembers counts voters.
            {
                "etcd_runbook_cluster_members": 4,
                "etcd_runbook_cluster_quorum": 3,
                "etcd_runbook_cluster_members_ready": 3,
                "etcd_runbook_cluster_available": 1,
                "etcd_runbook_cluster_ready": 0,
                "etcd_runbook_cluster_has_leader": 1,
                "etcd_runbook_cluster_quota_bytes": 335544320,
            },
            id="scaling-with-a-learner",
        ),
        pytest.param(
            {"size": 5},
            {
                **HEALTHY,
                "phase": "QuorumLost",
                "leader": "",
                "readyMembers": 2,
                "conditions": [cond("Available", "False"), cond("Ready", "False")],
            },
            {
                "etcd_runbook_cluster_members": 5,
                "etcd_runbook_cluster_quorum": 3,
                "etcd_runbook_cluster_members_ready": 2,
                "etcd_runbook_cluster_available": 0,
                "etcd_runbook_cluster_ready": 0,
                "etcd_runbook_cluster_has_leader": 0,
                "etcd_runbook_cluster_quota_bytes": 335544320,
            },
            id="no-leader",
        ),
        pytest.param(
            {},
            {
                "readyMembers": 3,
                "leader": None,
                "conditions": [cond("Available", "Unknown"), cond("Ready", "Unknown")],
            },
            # Unknown is no 0: nothing was learnt, and an alert on == 0 must not fire.
            {
                "etcd_runbook_cluster_members": 3,
                "etcd_runbook_cluster_quorum": 2,
                "etcd_runbook_cluster_members_ready": 3,
                "etcd_runbook_cluster_has_leader": 0,
            },
            id="default-size-conditions-unknown",
        ),
        pytest.param(
            {"size": 1},
            None,
            {
                "etcd_runbook_cluster_members": 1,
                "etcd_runbook_cluster_quorum": 1,
                "etcd_runbook_cluster_has_leader": 0,
            },
            id="new-cluster-without-status",
        ),
    ],
)
def test_cluster_gauges(spec, status, expected):
    assert by_name(CLUSTER, cluster(spec, status)) == expected


def test_a_new_cluster_without_status_has_its_info_and_alarms_at_zero():
    got = samples(CLUSTER, cluster({"size": 3}))
    assert got[("etcd_runbook_cluster_info", (*NS_NAME, "", "", ""))] == 1
    assert got[("etcd_runbook_cluster_alarms", (*NS_NAME, "NOSPACE"))] == 0
    assert got[("etcd_runbook_cluster_alarms", (*NS_NAME, "CORRUPT"))] == 0
    assert not [m for m, _ in got if "db_size" in m or m.endswith("quota_bytes")]


def test_alarms_are_counted_by_alarm():
    alarms = [
        {"member": "main-0", "alarm": "NOSPACE"},
        {"member": "main-1", "alarm": "NOSPACE"},
        {"member": "main-2", "alarm": "CORRUPT"},
    ]
    got = samples(CLUSTER, cluster(status={**HEALTHY, "alarms": alarms}))
    assert got[("etcd_runbook_cluster_alarms", (*NS_NAME, "NOSPACE"))] == 2
    assert got[("etcd_runbook_cluster_alarms", (*NS_NAME, "CORRUPT"))] == 1


def test_a_member_not_answering_has_no_database_sizes():
    status = {**HEALTHY, "members": [member("main-0", db=4096), member("main-1", ready=False)]}
    got = samples(CLUSTER, cluster(status=status))
    assert [labels[2] for m, labels in got if m == "etcd_runbook_cluster_db_size_bytes"] == [
        "main-0"
    ]


BACKUP_LABELS = ("prod", "nightly", "main")
SNAPSHOT = {"location": "s3://b/prod/main/nightly/a.db", "time": T0, "revision": 7}


def backup(status: dict[str, Any] | None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"namespace": "prod", "name": "nightly"},
        "spec": {"clusterName": "main"},
    }
    if status is not None:
        obj["status"] = status
    return obj


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(
            {
                "lastSnapshot": SNAPSHOT,
                "lastCheck": {
                    "location": SNAPSHOT["location"],
                    "result": "Found",
                    "time": "2026-03-01T13:00:00Z",
                },
                "conditions": [cond("Degraded", "False")],
            },
            {
                "etcd_runbook_backup_last_snapshot_timestamp_seconds": T0_UNIX,
                "etcd_runbook_backup_last_verified_timestamp_seconds": T0_UNIX + 3600,
                "etcd_runbook_backup_failing": 0,
                "etcd_runbook_backup_scheduled": 0,
            },
            id="verified",
        ),
        pytest.param(
            {
                "lastSnapshot": SNAPSHOT,
                "lastCheck": {"location": "s3://b/older.db", "result": "Found", "time": T0},
                "conditions": [cond("Degraded", "True")],
            },
            {
                "etcd_runbook_backup_last_snapshot_timestamp_seconds": T0_UNIX,
                "etcd_runbook_backup_failing": 1,
                "etcd_runbook_backup_scheduled": 0,
            },
            id="a-check-of-an-older-snapshot-verifies-not-this-one",
        ),
        pytest.param(
            {
                "lastSnapshot": SNAPSHOT,
                "lastCheck": {"location": SNAPSHOT["location"], "result": "Missing", "time": T0},
            },
            {
                "etcd_runbook_backup_last_snapshot_timestamp_seconds": T0_UNIX,
                "etcd_runbook_backup_failing": 0,
                "etcd_runbook_backup_scheduled": 0,
            },
            id="snapshot-missing",
        ),
        pytest.param(
            {"lastSnapshot": {"time": "not a time"}, "conditions": [cond("Degraded", "Unknown")]},
            {"etcd_runbook_backup_failing": 0, "etcd_runbook_backup_scheduled": 0},
            id="unreadable-time",
        ),
        pytest.param(
            None,
            {"etcd_runbook_backup_failing": 0, "etcd_runbook_backup_scheduled": 0},
            id="new-backup-without-status",
        ),
    ],
)
def test_backup_gauges(status, expected):
    got = samples(BACKUP, backup(status))
    assert {labels for _, labels in got} == {BACKUP_LABELS}
    assert {m: v for (m, _), v in got.items()} == expected


@pytest.mark.parametrize(
    ("spec", "scheduled"),
    [
        ({}, 0),
        ({"schedule": "0 3 * * *"}, 1),
        # Paused by a person: its snapshots are not expected to be new.
        ({"schedule": "0 3 * * *", "suspend": True}, 0),
        ({"schedule": ""}, 0),
    ],
)
def test_a_backup_s_schedule_is_told_from_a_one_off(spec, scheduled):
    obj = backup(None)
    obj["spec"] |= spec
    assert samples(BACKUP, obj)[("etcd_runbook_backup_scheduled", BACKUP_LABELS)] == scheduled


def test_a_kind_without_gauges_has_no_samples():
    assert object_samples("EtcdRestore", cluster(status=HEALTHY)) == []


@pytest.mark.parametrize(
    ("last", "leader", "expected"),
    [
        ("", "main-0", ("main-0", False)),  # first sight (a restart too): no change seen
        ("main-0", "main-0", ("main-0", False)),
        ("main-0", "main-1", ("main-1", True)),
        ("main-0", "", ("main-0", False)),  # no leader now: counted when the next is named
        ("main-0", None, ("main-0", False)),
    ],
)
def test_leader_change(last, leader, expected):
    assert leader_change(last, leader) == expected


# --- Metrics: label sets follow the object ------------------------------------------------


def value(metrics: Metrics, metric: str, /, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(metric, labels)


def series(metrics: Metrics, prefix: str) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    return {
        (s.name, tuple(sorted(s.labels.items())))
        for family in metrics.registry.collect()
        for s in family.samples
        if s.name.startswith(prefix)
    }


def with_status(**changes: Any) -> dict[str, Any]:
    return cluster(status={**copy.deepcopy(HEALTHY), **changes})


def test_a_changed_version_or_phase_replaces_the_info_label_set():
    metrics = Metrics()
    metrics.observe(CLUSTER, with_status())
    metrics.observe(CLUSTER, with_status(currentVersion="", phase="Upgrading"))
    info = [labels for _, labels in series(metrics, "etcd_runbook_cluster_info")]
    assert info == [
        (
            ("cluster_id", "cdf818194e3a8c32"),
            ("name", "main"),
            ("namespace", "prod"),
            ("phase", "Upgrading"),
            ("version", ""),
        )
    ]


def test_a_member_gone_and_a_condition_turned_unknown_leave_no_sample():
    metrics = Metrics()
    metrics.observe(CLUSTER, with_status())
    unknown = [cond("Available", "Unknown"), cond("Ready", "Unknown")]
    metrics.observe(CLUSTER, with_status(members=HEALTHY["members"][:2], conditions=unknown))
    assert value(metrics, "etcd_runbook_cluster_db_size_bytes", **member_labels("main-2")) is None
    assert value(metrics, "etcd_runbook_cluster_db_size_bytes", **member_labels("main-1")) == 8192
    assert value(metrics, "etcd_runbook_cluster_available", namespace="prod", name="main") is None


def member_labels(name: str) -> dict[str, str]:
    return {"namespace": "prod", "name": "main", "member": name}


def test_leader_changes_are_counted_between_writes():
    metrics = Metrics()
    labels = {"namespace": "prod", "name": "main"}
    counter = "etcd_runbook_cluster_leader_changes_total"
    metrics.observe(CLUSTER, with_status(leader="main-0"))
    assert value(metrics, counter, **labels) == 0, "there from the first write, at 0"
    metrics.observe(CLUSTER, with_status(leader="main-0"))
    metrics.observe(CLUSTER, with_status(leader="main-1"))
    metrics.observe(CLUSTER, with_status(leader=""))
    assert value(metrics, "etcd_runbook_cluster_has_leader", **labels) == 0
    metrics.observe(CLUSTER, with_status(leader="main-2"))
    assert value(metrics, counter, **labels) == 2


def test_forget_removes_every_label_set_of_the_object_and_only_its_own():
    metrics = Metrics()
    other = cluster(status=HEALTHY)
    other["metadata"]["name"] = "other"
    metrics.observe(CLUSTER, with_status())
    metrics.observe(CLUSTER, other)
    metrics.observe(BACKUP, backup({"lastSnapshot": SNAPSHOT}))
    metrics.forget(CLUSTER, "prod", "main")
    metrics.forget(BACKUP, "prod", "nightly")
    left = series(metrics, "etcd_runbook_cluster") | series(metrics, "etcd_runbook_backup")
    assert {dict(labels)["name"] for _, labels in left} == {"other"}
    metrics.forget(CLUSTER, "prod", "never-seen")  # nothing to remove, no error


# --- the exposition ---------------------------------------------------------------------


def exposition() -> str:
    metrics = Metrics()
    alarms = [{"member": "main-0", "alarm": "NOSPACE"}]
    metrics.observe(CLUSTER, with_status(alarms=alarms))
    metrics.observe(CLUSTER, with_status(alarms=alarms, leader="main-1"))
    verified = {
        "lastSnapshot": SNAPSHOT,
        "lastCheck": {"location": SNAPSHOT["location"], "result": "Found", "time": T0},
    }
    metrics.observe(BACKUP, backup(verified))
    return generate_latest(metrics.registry).decode()


def test_the_exposition_carries_the_names_alert_rules_match():
    lines = exposition().splitlines()
    for line in [
        'etcd_runbook_cluster_members{name="main",namespace="prod"} 3.0',
        'etcd_runbook_cluster_members_ready{name="main",namespace="prod"} 3.0',
        'etcd_runbook_cluster_quorum{name="main",namespace="prod"} 2.0',
        'etcd_runbook_cluster_available{name="main",namespace="prod"} 1.0',
        'etcd_runbook_cluster_ready{name="main",namespace="prod"} 1.0',
        'etcd_runbook_cluster_has_leader{name="main",namespace="prod"} 1.0',
        'etcd_runbook_cluster_leader_changes_total{name="main",namespace="prod"} 1.0',
        'etcd_runbook_cluster_db_size_bytes{member="main-1",name="main",namespace="prod"} 8192.0',
        'etcd_runbook_cluster_db_size_in_use_bytes{member="main-1",name="main",namespace="prod"}'
        " 4096.0",
        'etcd_runbook_cluster_quota_bytes{name="main",namespace="prod"} 3.3554432e+08',
        'etcd_runbook_cluster_alarms{alarm="NOSPACE",name="main",namespace="prod"} 1.0',
        'etcd_runbook_cluster_alarms{alarm="CORRUPT",name="main",namespace="prod"} 0.0',
        'etcd_runbook_cluster_info{cluster_id="cdf818194e3a8c32",name="main",namespace="prod",'
        'phase="Running",version="3.6.16"} 1.0',
        'etcd_runbook_backup_last_snapshot_timestamp_seconds{cluster="main",name="nightly",'
        'namespace="prod"} 1.7723664e+09',
        'etcd_runbook_backup_last_verified_timestamp_seconds{cluster="main",name="nightly",'
        'namespace="prod"} 1.7723664e+09',
        'etcd_runbook_backup_failing{cluster="main",name="nightly",namespace="prod"} 0.0',
        "# TYPE etcd_runbook_cluster_leader_changes_total counter",
        "# TYPE etcd_runbook_cluster_db_size_bytes gauge",
    ]:
        assert line in lines, line


def test_promtool_accepts_the_exposition():
    """hack/promtool: `make test-unit` builds it before pytest starts, as for the alert rules."""
    binary = Path(__file__).resolve().parents[2] / "hack" / "promtool"
    checked = subprocess.run(
        [binary, "check", "metrics"],
        input=exposition(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


# --- the watcher sets them where it writes status -----------------------------------------

CLUSTERS = Resource("etcd.runbook.io", "v1alpha1", "etcdclusters", "EtcdCluster")
PATH = CLUSTERS.path("prod", "main")


def controller(kube: FakeKube, runner: FakeRunner) -> tuple[Controller, Metrics]:
    watch = Watch(
        group="etcd.runbook.io",
        version="v1alpha1",
        kind=CLUSTER,
        target=Target(playbook=Path("/pb.yml")),
    )
    metrics = Metrics()
    ctl = Controller(
        kube,  # type: ignore[arg-type]
        watch,
        CLUSTERS,
        runner,  # type: ignore[arg-type]
        EventRecorder(kube),  # type: ignore[arg-type]
        metrics,
        [None],
        runner_timeout=60,
        workers=1,
    )
    return ctl, metrics


def test_the_watcher_sets_the_gauges_during_and_after_a_run_and_forgets_them_when_gone(tmp_path):
    kube = FakeKube()
    meta = {"name": "main", "namespace": "prod", "uid": "u1", "generation": 1}
    kube.put_object(PATH, {"kind": CLUSTER, "metadata": meta, "spec": {"size": 3}})
    labels = {"namespace": "prod", "name": "main"}
    final = {"operator_status": {"readyMembers": 3, "leader": "main-1"}}
    runner = FakeRunner(tmp_path, [result(stats=final)])
    runner.told = [{"operator_progress": {"status": {"readyMembers": 1, "leader": "main-0"}}}]
    ctl, metrics = controller(kube, runner)
    in_flight = threading.Event()
    observe = metrics.observe

    def observe_and_tell(kind: str, obj: dict[str, Any]) -> None:
        observe(kind, obj)
        if value(metrics, "etcd_runbook_cluster_members_ready", **labels) == 1:
            in_flight.set()

    def run_until_written(*args: Any, **kwargs: Any) -> Any:
        # The run's progress thread writes within its interval: the run ends after that.
        done = original_run(*args, **kwargs)
        in_flight.wait(5)
        return done

    metrics.observe = observe_and_tell  # type: ignore[method-assign]
    original_run = runner.run
    runner.run = run_until_written  # type: ignore[method-assign]
    ctl.reconcile(("prod", "main"))
    assert in_flight.is_set(), "a mid-run status write sets them"
    assert value(metrics, "etcd_runbook_cluster_members_ready", **labels) == 3
    assert value(metrics, "etcd_runbook_cluster_available", **labels) == 1
    assert value(metrics, "etcd_runbook_cluster_leader_changes_total", **labels) == 1
    del kube.objects[PATH]
    ctl.reconcile(("prod", "main"))  # the delete event's key: 404
    assert series(metrics, "etcd_runbook_cluster") == set()


def test_a_restarted_watcher_has_the_gauges_from_its_first_look(tmp_path):
    """Before its first run writes anything, the status as read sets them: a cluster whose
    status no run changes still has its gauges after the operator restarts."""
    kube = FakeKube()
    meta = {"name": "main", "namespace": "prod", "uid": "u1", "generation": 1}
    status = {"readyMembers": 3, "leader": "main-1", "observedGeneration": 1}
    kube.put_object(
        PATH, {"kind": CLUSTER, "metadata": meta, "spec": {"size": 3}, "status": status}
    )
    runner = FakeRunner(tmp_path, [result()])
    ctl, metrics = controller(kube, runner)
    labels = {"namespace": "prod", "name": "main"}
    seen_at_start: list[float | None] = []
    original_run = runner.run

    def run(*args: Any, **kwargs: Any) -> Any:
        seen_at_start.append(value(metrics, "etcd_runbook_cluster_members_ready", **labels))
        return original_run(*args, **kwargs)

    runner.run = run  # type: ignore[method-assign]
    ctl.reconcile(("prod", "main"))
    assert seen_at_start == [3]
