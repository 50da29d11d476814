"""Any cluster's conventions (issue 27): images pinned by digest per version, registry
credentials, spread and the Pods' user and group, carried onto member, restore, recovery and
backup Pods alike; a cluster that sets none of them keeps the Pods it had (no roll)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from etcd_runbook.rules import etcd_backup_jobs as bj
from etcd_runbook.rules import etcd_manifests as em
from etcd_runbook.rules import etcd_plan as ep
from etcd_runbook.rules import etcd_restore_plan as rp
from etcd_runbook.rules.cluster.spec import member_image, pod_hash
from tests.unit.test_etcd_backup_jobs import IMAGE, backup, pod_of
from tests.unit.test_etcd_manifests import a_plan, seed_claim
from tests.unit.test_etcd_restore_plan import restore, target, volume_backup

D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64
REPO = "gcr.io/etcd-development/etcd"


def normalized(**spec: Any) -> dict[str, Any]:
    obj = {"metadata": {"name": "e"}, "spec": {"version": "3.6.16", **spec}}
    return ep.normalize_spec(obj, {})


@pytest.mark.parametrize(
    "digests, version, image",
    [
        ({}, "3.6.16", f"{REPO}:v3.6.16"),
        ({"3.6.16": D1}, "3.6.16", f"{REPO}:v3.6.16@{D1}"),
        # In an upgrade each member keeps its own version's digest until it is rolled.
        ({"3.5.35": D1, "3.6.16": D2}, "3.5.35", f"{REPO}:v3.5.35@{D1}"),
        ({"3.5.35": D1, "3.6.16": D2}, "3.6.16", f"{REPO}:v3.6.16@{D2}"),
        # A version no digest names runs by its tag.
        ({"3.6.16": D2}, "3.5.35", f"{REPO}:v3.5.35"),
    ],
)
def test_a_member_s_image_is_its_version_s_pinned_by_that_version_s_digest(digests, version, image):
    spec = normalized(imageDigests=digests)
    assert spec["problems"] == []
    assert member_image(spec, version) == image


@pytest.mark.parametrize(
    "digests, version, wrong",
    [
        ({"3.6.16": "sha256:abc"}, "3.6.16", "'3.6.16': 'sha256:abc'"),
        ({"3.6.16": "md5:" + "1" * 32}, "3.6.16", "md5:"),
        ({"v3.6.16": D1}, "3.6.16", "'v3.6.16'"),
        ({"3.5.35": D1}, "3.6.16", "no digest for spec.version 3.6.16"),
        ("sha256:x", "3.6.16", "must be a map"),
    ],
)
def test_a_digest_that_cannot_pin_spec_version_is_refused_naming_the_field(digests, version, wrong):
    spec = normalized(version=version, imageDigests=digests)
    assert [p["field"] for p in spec["problems"]] == ["spec.imageDigests"]
    assert wrong in spec["problems"][0]["message"]


def test_none_of_the_new_settings_rolls_a_cluster_that_sets_none_of_them():
    """Their keys join the Pod's hash only when set: an operator upgrade rolls nobody."""
    plain = normalized()
    assert set(plain["pod"]) == {
        "labels",
        "annotations",
        "resources",
        "affinity",
        "anti_affinity",
        "node_selector",
        "tolerations",
        "priority_class",
    }
    empty = normalized(
        imageDigests={}, pod={"imagePullSecrets": [], "topologySpreadConstraints": []}
    )
    assert pod_hash(empty, "3.6.16") == pod_hash(plain, "3.6.16")
    pinned = normalized(imageDigests={"3.6.16": D1})
    assert pod_hash(pinned, "3.6.16") != pod_hash(plain, "3.6.16")
    # Another version's digest does not touch a member of this one.
    other = normalized(imageDigests={"3.6.16": D1, "3.5.35": D2})
    assert pod_hash(other, "3.6.16") == pod_hash(pinned, "3.6.16")


SPREAD = {
    "maxSkew": 1,
    "topologyKey": "topology.kubernetes.io/zone",
    "whenUnsatisfiable": "DoNotSchedule",
}


def test_the_member_pod_carries_pull_secrets_spread_and_the_user_s_ids():
    p = a_plan(
        imageDigests={"3.6.16": D1},
        pod={
            "imagePullSecrets": [{"name": "mirror-creds"}],
            "topologySpreadConstraints": [
                SPREAD,
                {**SPREAD, "labelSelector": {"matchLabels": {"tier": "etcd"}}},
            ],
            "securityContext": {"fsGroup": 2000, "runAsUser": 1000700000},
        },
    )
    pod = em.member_pod(p, "e-0", seed_claim(p))["spec"]
    assert pod["containers"][0]["image"] == f"{REPO}:v3.6.16@{D1}"
    assert pod["imagePullSecrets"] == [{"name": "mirror-creds"}]
    first, second = pod["topologySpreadConstraints"]
    # Spread among this cluster's members, unless the constraint says among what.
    assert first["labelSelector"] == {"matchLabels": em.selector_labels(p)}
    assert first["topologyKey"] == "topology.kubernetes.io/zone"
    assert second["labelSelector"] == {"matchLabels": {"tier": "etcd"}}
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 1000700000,
        "runAsGroup": 65532,
        "fsGroup": 2000,
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def test_a_member_pod_without_them_is_as_before():
    p = a_plan()
    pod = em.member_pod(p, "e-0", seed_claim(p))["spec"]
    assert "imagePullSecrets" not in pod and "topologySpreadConstraints" not in pod
    assert pod["securityContext"]["fsGroup"] == 65532
    assert pod["securityContext"]["runAsNonRoot"] is True


def test_restore_and_recovery_pods_pull_and_run_as_the_cluster_says():
    obj = restore()
    obj["spec"]["cluster"]["spec"] |= {
        "imageDigests": {"3.6.16": D2},
        "pod": {"imagePullSecrets": [{"name": "mirror-creds"}], "securityContext": {"fsGroup": 7}},
    }
    goal = target(obj)
    found = {"type": "Available", "status": "True", "reason": "SnapshotTaken"}
    saved = volume_backup()
    saved["status"]["conditions"] = [found]
    source = rp.restore_source(obj, saved)
    for job in (
        rp.restore_job(obj, source, goal, "operator:dev"),
        rp.recovery_job(
            {"metadata": {"name": "again", "namespace": "prod", "uid": "u"}},
            "f" * 16,
            source,
            goal,
            "operator:dev",
        ),
    ):
        pod = job["spec"]["template"]["spec"]
        assert pod["imagePullSecrets"] == [{"name": "mirror-creds"}]
        assert pod["containers"][0]["image"] == f"{REPO}:v3.6.16@{D2}"
        assert pod["securityContext"]["fsGroup"] == 7
        assert pod["securityContext"]["runAsNonRoot"] is True


def test_backup_jobs_pull_the_operator_s_image_with_the_cluster_s_credentials():
    cluster = {"metadata": {"name": "e"}, "spec": {"pod": {"imagePullSecrets": [{"name": "r"}]}}}
    secrets = bj.pull_secrets(cluster)
    assert secrets == [{"name": "r"}]
    pod = pod_of(bj.workload(backup(), IMAGE, {"image_pull_secrets": secrets}))
    assert pod["imagePullSecrets"] == [{"name": "r"}]
    assert "imagePullSecrets" not in pod_of(bj.workload(backup(), IMAGE))
    assert bj.pull_secrets(None) == [] and bj.pull_secrets({"spec": {}}) == []
    assert bj.pull_secrets(copy.deepcopy(cluster) | {"spec": {"pod": {}}}) == []
