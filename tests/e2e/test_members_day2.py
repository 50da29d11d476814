"""Member volumes and health, end to end: spec.storage.size raised on a class that allows
expansion grows every member's claim and the backend quota follows (the members rolled onto
it, the data kept); on a class that does not, the runbook says VolumeExpansionFailed naming the
field, and nothing else changes. And a member without quorum: unready, never restarted; its
Pod requests resources by default."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from etcd_runbook.rules.cluster.spec import quota_limit
from testbed.cluster import K8sCluster
from tests.e2e.helpers import (
    Operator,
    apply,
    condition,
    etcd_cluster,
    etcdctl,
    events,
    get,
    pods,
    wait_available,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

GiB = 1024**3
AVAILABLE_WITHIN = 300


def quota_flag(k8s: K8sCluster, ns: str, member: str) -> int:
    pod = get(k8s, ns, "pod", member)
    (arg,) = [
        a for a in pod["spec"]["containers"][0]["args"] if a.startswith("--quota-backend-bytes=")
    ]
    return int(arg.split("=", 1)[1])


def claim_of(k8s: K8sCluster, ns: str, member: str) -> dict[str, Any]:
    return get(k8s, ns, "pvc", f"{member}-data")


def grow(k8s: K8sCluster, ns: str, name: str, size: str) -> None:
    k8s.kubectl(
        "-n", ns, "patch", "etcd", name, "--type=merge",
        "-p", f'{{"spec": {{"storage": {{"size": "{size}"}}}}}}',
    )  # fmt: skip


@pytest.fixture
def fixed_class(k8s_cluster: K8sCluster, k8s_namespace: str) -> Iterator[str]:
    """A StorageClass like the local one that does not allow expansion (cluster-scoped, so
    named after the test's namespace and deleted after it)."""
    name = f"{k8s_namespace}-fixed"
    apply(
        k8s_cluster,
        k8s_namespace,
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": name},
            "provisioner": "erop.local/hostdir",
            "reclaimPolicy": "Delete",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowVolumeExpansion": False,
        },
    )
    yield name
    k8s_cluster.kubectl("delete", "storageclass", name, "--ignore-not-found", check=False)


def test_a_grown_volume_brings_a_larger_quota_and_a_fixed_one_is_refused(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator, fixed_class: str
) -> None:
    k8s, ns = k8s_cluster, k8s_namespace
    apply(k8s, ns, etcd_cluster("grow", size=1, storage={"size": "1Gi"}))
    apply(
        k8s,
        ns,
        etcd_cluster("fixed", size=1, storage={"size": "1Gi", "storageClassName": fixed_class}),
    )
    started = wait_available(k8s, ns, "grow", 1, AVAILABLE_WITHIN)
    wait_available(k8s, ns, "fixed", 1, AVAILABLE_WITHIN)
    small = quota_limit(GiB)
    assert started["status"]["space"]["quota"] == small
    assert quota_flag(k8s, ns, "grow-0") == small
    etcdctl(k8s, ns, "grow-0", "put", "kept", "before the growth")
    first_pod = get(k8s, ns, "pod", "grow-0")["metadata"]["uid"]

    # Grown: the claim asks for 2Gi, the class grows it, and the quota follows the capacity
    # the claim really got (the member rolled onto it, its data kept).
    grow(k8s, ns, "grow", "2Gi")
    large = quota_limit(2 * GiB)

    def quota_followed() -> dict[str, Any]:
        obj = get(k8s, ns, "etcd", "grow")
        claim = claim_of(k8s, ns, "grow-0")
        done = (
            claim["spec"]["resources"]["requests"]["storage"] == "2Gi"
            and claim.get("status", {}).get("capacity", {}).get("storage") == "2Gi"
            and obj.get("status", {}).get("space", {}).get("quota") == large
            and quota_flag(k8s, ns, "grow-0") == large
        )
        return obj if done else {}

    k8s.wait_for(quota_followed, timeout=AVAILABLE_WITHIN, interval=2, what="the quota at 2Gi")
    wait_available(k8s, ns, "grow", 1, AVAILABLE_WITHIN)
    assert get(k8s, ns, "pod", "grow-0")["metadata"]["uid"] != first_pod, "rolled onto it"
    assert etcdctl(k8s, ns, "grow-0", "get", "kept", "--print-value-only").strip() == (
        "before the growth"
    )
    assert [e for e in events(k8s, ns, "VolumesExpanding") if "grow-0" in str(e.get("message"))]

    # Fixed: the API server refuses the claim's growth; the runbook says so, naming the field,
    # and the member, its claim and its quota stay as they were.
    fixed_pod = get(k8s, ns, "pod", "fixed-0")["metadata"]["uid"]
    grow(k8s, ns, "fixed", "2Gi")

    def refused() -> dict[str, Any]:
        obj = get(k8s, ns, "etcd", "fixed")
        degraded = condition(obj, "Degraded")
        # Raised, not returned: the timeout then says what the status said instead.
        assert degraded.get("reason") == "VolumeExpansionFailed", (
            degraded,
            claim_of(k8s, ns, "fixed-0")["spec"]["resources"],
        )
        return obj

    obj = k8s.wait_for(refused, timeout=180, interval=2, what="VolumeExpansionFailed")
    message = condition(obj, "Degraded")["message"]
    assert "spec.storage.size" in message and "fixed-0-data" in message, message
    assert condition(obj, "Available")["status"] == "True"
    assert [e for e in events(k8s, ns, "VolumeExpansionFailed")], "an Event names it too"
    claim = claim_of(k8s, ns, "fixed-0")
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert claim["status"]["capacity"]["storage"] == "1Gi"
    (member,) = pods(k8s, ns, "fixed")
    assert member["metadata"]["uid"] == fixed_pod
    assert quota_flag(k8s, ns, "fixed-0") == small
    assert obj["status"]["space"]["quota"] == small


def test_a_member_without_quorum_turns_unready_and_is_never_restarted(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    """etcd's health split in the Pod: with its peers gone, the last member fails /readyz (no
    linearizable read without quorum) and turns unready, while /livez (a serializable read)
    keeps answering, so the kubelet never restarts it; its peers back, it is Ready again."""
    k8s, ns, name = k8s_cluster, k8s_namespace, "alone"
    apply(k8s, ns, etcd_cluster(name, size=3))
    wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
    survivor = f"{name}-0"
    container = get(k8s, ns, "pod", survivor)["spec"]["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/livez"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz?exclude=non_learner"
    # No resources in the spec: the default requests, so the member is not BestEffort.
    assert container["resources"] == {"requests": {"cpu": "100m", "memory": "256Mi"}}
    assert get(k8s, ns, "pod", survivor)["status"]["qosClass"] == "Burstable"
    # Paused, the operator leaves the Pods gone: the survivor stays without quorum.
    k8s.kubectl("-n", ns, "patch", "etcd", name, "--type=merge", "-p", '{"spec":{"paused":true}}')
    k8s.kubectl("-n", ns, "delete", "pod", f"{name}-1", f"{name}-2", "--wait=true")

    def unready() -> bool:
        pod = get(k8s, ns, "pod", survivor)
        return any(
            c.get("type") == "Ready" and c.get("status") == "False"
            for c in pod.get("status", {}).get("conditions", [])
        )

    k8s.wait_for(unready, timeout=60, interval=1, what=f"{survivor} unready without quorum")
    # Three liveness periods and more without quorum.
    k8s.wait_for(
        lambda: [
            e
            for e in events(k8s, ns, "Unhealthy")
            if survivor in str(e.get("involvedObject", {}).get("name"))
            and "Readiness probe failed" in str(e.get("message"))
        ],
        timeout=60,
        interval=2,
        what="the kubelet saying the readiness probe failed",
    )
    time.sleep(35)
    pod = get(k8s, ns, "pod", survivor)
    (status,) = pod["status"]["containerStatuses"]
    assert status["restartCount"] == 0, status
    liveness_failed = [
        e
        for e in events(k8s, ns, "Unhealthy")
        if survivor in str(e.get("involvedObject", {}).get("name"))
        and "Liveness" in str(e.get("message"))
    ]
    assert not liveness_failed, liveness_failed

    k8s.kubectl("-n", ns, "patch", "etcd", name, "--type=merge", "-p", '{"spec":{"paused":false}}')
    wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
    assert get(k8s, ns, "pod", survivor)["metadata"]["uid"] == pod["metadata"]["uid"]


def test_a_cluster_s_conventions_reach_its_member_pods(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    """Its own user and fsGroup from the start (etcd writes its data under them), then the
    image pinned by the digest the node holds, registry credentials and a spread: one roll,
    the member Ready on the pinned image, the data kept."""
    k8s, ns, name = k8s_cluster, k8s_namespace, "conventions"
    ids = {"runAsUser": 1001, "runAsGroup": 1001, "fsGroup": 2000}
    apply(k8s, ns, etcd_cluster(name, size=1, pod={"securityContext": ids}))
    wait_available(k8s, ns, name, 1, AVAILABLE_WITHIN)
    (first,) = pods(k8s, ns, name)
    member = first["metadata"]["name"]
    context = first["spec"]["securityContext"]
    assert {k: context[k] for k in ids} == ids and context["runAsNonRoot"] is True
    assert etcdctl(k8s, ns, member, "put", "/e2e/kept", "yes").strip() == "OK"
    # The digest of the image the node runs for this tag (the kubelet reports it).
    image_id = first["status"]["containerStatuses"][0]["imageID"]
    digest = image_id[image_id.index("sha256:") :]

    spread = {
        "maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "ScheduleAnyway",
    }
    conventions = {
        "imageDigests": {"3.6.16": digest},
        "pod": {
            "imagePullSecrets": [{"name": "mirror-creds"}],
            "topologySpreadConstraints": [spread],
        },
    }
    k8s.kubectl(
        "-n", ns, "patch", "etcd", name, "--type=merge", "-p", json.dumps({"spec": conventions})
    )

    def rolled() -> dict[str, Any]:
        now = pods(k8s, ns, name)
        if not now or now[0]["metadata"]["uid"] == first["metadata"]["uid"]:
            return {}
        ready = any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in now[0].get("status", {}).get("conditions", [])
        )
        return now[0] if ready else {}

    pod = k8s.wait_for(rolled, timeout=240, interval=2, what="the member rolled onto its digest")
    spec = pod["spec"]
    assert spec["containers"][0]["image"] == f"gcr.io/etcd-development/etcd:v3.6.16@{digest}"
    assert spec["imagePullSecrets"] == [{"name": "mirror-creds"}]
    (constraint,) = spec["topologySpreadConstraints"]
    assert constraint["labelSelector"]["matchLabels"]["etcd.runbook.io/cluster"] == name
    assert {k: spec["securityContext"][k] for k in ids} == ids
    got = etcdctl(k8s, ns, member, "get", "/e2e/kept", "--print-value-only")
    assert got.strip() == "yes"
    obj = wait_available(k8s, ns, name, 1, AVAILABLE_WITHIN)
    assert obj["status"]["currentVersion"] == "3.6.16"
