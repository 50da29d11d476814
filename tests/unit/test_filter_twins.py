"""Decisions the filter plugins each keep a copy of. Ansible loads a filter
plugin by its path, and on the controller it can import neither the project's module_utils
(outside a collection) nor another filter plugin, so the copies stay; these tables keep them
saying the same."""

from __future__ import annotations

import base64

import pytest

from etcd_runbook.observe import etcd_observe
from etcd_runbook.observe.etcd_observe import (
    QUESTION_SILENCE,
    cannot_run,
    client_material,
    unschedulable,
)
from etcd_runbook.rules import etcd_backup_jobs as backup_jobs
from etcd_runbook.rules import etcd_backup_plan as backup_plan
from etcd_runbook.rules import etcd_manifests as manifests
from etcd_runbook.rules import etcd_plan as cluster_plan
from etcd_runbook.rules import etcd_restore_plan as restore_plan


@pytest.mark.parametrize(
    ("endpoint", "aws"),
    [
        ("https://s3.amazonaws.com", True),
        ("https://s3.eu-west-1.amazonaws.com", True),
        ("https://bucket.s3.amazonaws.com:443", True),
        ("https://amazonaws.com", True),
        ("https://notamazonaws.com", False),
        ("https://amazonaws.com.example.org", False),
        ("http://127.0.0.1:9000", False),
        ("http://minio", False),
    ],
)
def test_both_plans_tell_an_aws_endpoint_alike(endpoint, aws):
    assert backup_plan._aws_host(endpoint) == restore_plan._aws_host(endpoint) == aws


@pytest.mark.parametrize("ca_secret", ["", "store-ca"])
def test_the_backup_and_restore_jobs_get_the_store_credentials_alike(ca_secret):
    s3 = {"endpoint": "http://s3:9000", "bucket": "etcd", "credentialsSecret": "creds"}
    if ca_secret:
        s3["caSecret"] = ca_secret
    backup = {
        "metadata": {"name": "nightly", "namespace": "prod", "uid": "u-1"},
        "spec": {"clusterName": "example", "destination": {"s3": s3}},
    }
    pod = backup_jobs.pod_spec(backup, "image", {})
    env: list[dict] = []
    volumes: list[dict] = []
    restore_plan._fetch_from_s3(restore_plan._store(s3, "spec.source.s3"), env, [], volumes)

    def credentials(entries: list[dict]) -> list[dict]:
        return [e for e in entries if e["name"].startswith("AWS_")]

    assert credentials(pod["containers"][0]["env"]) == credentials(env)
    assert len(credentials(env)) == 2
    # The CA: the same Secret key, as a volume of the same name (each Job mounts it where
    # its own steps look).
    assert [v for v in pod["volumes"] if v["name"] == "s3-ca"] == volumes


@pytest.mark.parametrize(
    "conditions",
    [
        [],
        [{"type": "PodScheduled", "status": "True"}],
        [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}],
        [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": " m "}],
    ],
)
def test_the_plan_and_the_wait_read_the_scheduler_alike(conditions):
    # The wait (etcd_runbook/observe/etcd_observe.py) stops on what the plan reports as unschedulable.
    pod = {"metadata": {"name": "e-0"}, "status": {"conditions": conditions}}
    assert unschedulable([pod], "e-0") == cluster_plan.unschedulable(pod)


MINE = {"namespace": "ns", "name": "nightly", "uid": "u-1"}
OWNER = {"name": "nightly", "uid": "u-1", "cluster_id": "c1"}


@pytest.mark.parametrize(
    "entry",
    [
        {"verified": True, "sha256": "a" * 64, "backup": MINE, "clusterID": "c1"},
        {"verified": True, "sha256": "", "backup": MINE, "clusterID": "c1"},
        {"verified": False, "sha256": "a" * 64, "backup": MINE, "clusterID": "c1"},
        {"verified": "yes", "sha256": "a" * 64, "backup": MINE, "clusterID": "c1"},
        {"verified": True, "sha256": "a" * 64, "clusterID": "c1"},
        {"verified": True, "sha256": "a" * 64, "backup": "nightly", "clusterID": "c1"},
        {"verified": True, "sha256": "a" * 64, "backup": {**MINE, "uid": "u-2"}, "clusterID": "c1"},
        {"verified": True, "sha256": "a" * 64, "backup": {**MINE, "name": "x"}, "clusterID": "c1"},
        {"verified": True, "sha256": "a" * 64, "backup": MINE, "clusterID": "c2"},
        {"verified": True, "sha256": "a" * 64, "backup": MINE},
    ],
)
def test_the_plan_and_the_module_that_deletes_tell_a_backups_own_snapshots_alike(entry):
    # The plan decides what to prune; etcd_snapshot_store refuses to delete anything else.
    from etcd_runbook.rules.etcd_snapshot_catalog import ownership

    assert backup_plan.ownership(entry, OWNER) == ownership(entry, OWNER)


@pytest.mark.parametrize(
    "tls",
    [
        None,
        {},
        {"enabled": True},
        {"secrets": {"server": "s", "client": "c", "peer": "p"}},
        {"secrets": {"server": "s"}},
    ],
)
def test_the_backup_role_grants_the_tls_secrets_the_cluster_plan_names(tls):
    cluster = {"metadata": {"name": "e"}, "spec": {} if tls is None else {"tls": tls}}
    names = cluster_plan.normalize_spec(cluster, {})["secrets"]
    assert backup_jobs.tls_secret_names(cluster) == sorted({names["server"], names["client"]})


def _tls_secret(name: str, type_: str, *fields: str) -> dict:
    data = {f: base64.b64encode(f"{name}:{f}".encode()).decode() for f in fields}
    return {"metadata": {"name": name}, "type": type_, "data": data}


_ALL = ("tls.crt", "tls.key", "ca.crt")


@pytest.mark.parametrize(
    "secrets",
    [
        [],
        [_tls_secret("e-ca", "Opaque", *_ALL)],
        [
            _tls_secret(f"e-{p}-tls", "kubernetes.io/tls", *_ALL)
            for p in ("peer", "server", "client")
        ],
        [
            _tls_secret("e-ca", "Opaque", *_ALL),
            _tls_secret("e-peer-tls", "kubernetes.io/tls", *_ALL),
        ],
        [_tls_secret("e-server-tls", "kubernetes.io/tls", "tls.crt", "tls.key")],
        [
            _tls_secret("e-server-tls", "kubernetes.io/tls", "tls.crt", "tls.key"),
            _tls_secret("e-client-tls", "Opaque", *_ALL),
        ],
        [_tls_secret("e-peer-tls", "kubernetes.io/tls", "tls.crt", "ca.crt")],
    ],
)
def test_the_look_and_the_role_connect_to_etcd_with_the_same_material(secrets):
    # The look asks etcd with what client_material picks; the role's modules with tls_client.
    obj = {"metadata": {"name": "e", "namespace": "ns"}, "spec": {}}
    picked = client_material(secrets, "e-server-tls", "e-client-tls")
    decoded = (
        dict(
            zip(("ca", "cert", "key"), (base64.b64decode(v).decode() for v in picked), strict=True)
        )
        if picked
        else {}
    )
    assert cluster_plan.tls_client(secrets, obj) == decoded


@pytest.mark.parametrize(
    "status",
    [
        {"state": {"running": {}}},
        {"state": {"running": {}}, "restartCount": 1},
        {
            "state": {"running": {}},
            "restartCount": 1,
            "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
        },
        {"state": {"waiting": {"reason": "ContainerCreating"}}},
        {"state": {"waiting": {"reason": "ErrImagePull"}}},
        {"state": {"waiting": {"reason": "ImagePullBackOff"}}},
        {"state": {"waiting": {"reason": "InvalidImageName"}}},
        {"state": {"waiting": {"reason": "CreateContainerConfigError"}}},
        {
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "restartCount": 3,
            "lastState": {"terminated": {"reason": "Error", "exitCode": 1}},
        },
        {"state": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}},
        {"state": {"terminated": {"reason": "Completed", "exitCode": 0}}},
        {},
    ],
)
def test_the_plan_and_the_roll_s_wait_tell_a_pod_that_cannot_run_alike(status):
    # The roll's wait (etcd_runbook/observe/etcd_observe.py) stops on what the plan halts the roll for.
    pod = {
        "metadata": {"name": "e-0"},
        "status": {"containerStatuses": [{"name": "etcd", **status}]},
    }
    halts = cluster_plan.container_trouble(pod) or cluster_plan.restart_trouble(pod)
    assert bool(cannot_run([pod], "e-0")) == bool(halts)


def test_the_plan_and_the_wait_know_the_same_kubelet_reasons():
    assert cluster_plan.IMAGE_FAILURES == etcd_observe.IMAGE_FAILURES
    assert cluster_plan.START_FAILURES == etcd_observe.START_FAILURES


def test_the_plan_and_the_manifests_mark_pods_under_the_same_names():
    assert manifests.ANN_HEALTHY_SINCE == cluster_plan.ANN_HEALTHY_SINCE
    assert manifests.ANN_HEALTHY_RUN == cluster_plan.ANN_HEALTHY_RUN


def test_the_look_reads_the_volume_of_every_member_the_plan_may_judge_lost():
    # A node the look still counts usable is one the plan never counts lost for its silence:
    # else the plan would judge a member whose volume nobody read (and never move it).
    assert QUESTION_SILENCE < cluster_plan.NODE_SILENCE


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        ("2026-11-27T02:10:00Z", "2026-11-27T02:10:30Z"),
        ("2026-11-27T02:10:00.500000Z", "2026-11-27T02:10:00Z"),
        ("2026-11-27T02:10:00+00:00", "2026-11-27T03:10:00Z"),
        ("", "2026-11-27T02:10:00Z"),
        ("yesterday", "2026-11-27T02:10:00Z"),
    ],
)
def test_the_look_and_the_plan_count_seconds_between_two_times_alike(earlier, later):
    # The look counts a node's silence; the plan, a settling member's and a lost node's time.
    assert etcd_observe.seconds_between(earlier, later) == cluster_plan._seconds_between(
        earlier, later
    )
