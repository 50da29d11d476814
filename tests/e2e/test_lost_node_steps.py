"""Cleanups of Pods on a lost node (issue 23, item 8): a graceful delete there never ends (no
kubelet confirms it), and a run that waited for one failed, as did every run after it. On one
node, with a node no kubelet serves (tests/kubelet_less.py) standing for the lost one."""

from __future__ import annotations

import json
import time

import pytest

from tests.e2e.helpers import Operator, apply, etcd_cluster, events, get, wait_available
from tests.k8s_cluster import K8sCluster
from tests.kubelet_less import force_delete, kubelet_less_node, run_there

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

AVAILABLE_WITHIN = 300


def test_a_removed_member_s_pod_on_a_lost_node_is_deleted_at_once_and_runs_go_on(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    """A member etcd no longer lists (its removal finished, its cleanup did not) whose Pod is
    on a node gone Not Ready: the cleanup deletes its Pod at once (grace period 0: its member
    is no member, whatever the node does) and its claim, and the run goes on to what the spec
    asks next (a second member)."""
    k8s, ns, name = k8s_cluster, k8s_namespace, "cleaned"
    apply(k8s, ns, etcd_cluster(name, size=1))
    obj = wait_available(k8s, ns, name, 1, AVAILABLE_WITHIN)
    owner = {
        "apiVersion": "etcd.runbook.io/v1alpha1",
        "kind": "EtcdCluster",
        "name": name,
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    stale = f"{name}-1"
    labels = {
        "app.kubernetes.io/name": "etcd",
        "app.kubernetes.io/managed-by": "etcd-runbook-operator",
        "etcd.runbook.io/cluster": name,
        "etcd.runbook.io/member": stale,
    }
    meta = {"labels": labels, "ownerReferences": [owner]}
    with kubelet_less_node(k8s, f"{ns}-lost", ready=False) as lost:
        try:
            claim = {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": f"{stale}-data", **meta},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }
            k8s.kubectl("-n", ns, "create", "-f", "-", input=json.dumps(claim))
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": stale, **meta},
                "spec": {"containers": [{"name": "etcd", "image": "example.invalid/e:0"}]},
            }
            run_there(k8s, ns, pod, lost, "192.0.2.21")
            started = time.monotonic()
            # Two members asked for: the second is added only once the cleanup is done.
            k8s.kubectl(
                "-n", ns, "patch", "etcd", name, "--type=merge", "-p", '{"spec":{"size":2}}'
            )

            def cleaned() -> bool:
                names = {p["metadata"]["name"] for p in get(k8s, ns, "pods")["items"]}
                claims = {c["metadata"]["name"] for c in get(k8s, ns, "pvc")["items"]}
                return stale not in names and f"{stale}-data" not in claims

            k8s.wait_for(cleaned, timeout=90, interval=1, what=f"{stale}'s Pod and claim gone")
            took = time.monotonic() - started
            said = [e["message"] for e in events(k8s, ns, "StaleMemberCleaned")]
            assert any(stale in m for m in said), said
            obj = wait_available(k8s, ns, name, 2, AVAILABLE_WITHIN)
            print(f"{stale}'s Pod and claim gone after {took:.1f}s")
            # The new member runs on a node that runs, the lost one holds nothing.
            placed = {p["spec"].get("nodeName") for p in get(k8s, ns, "pods")["items"]}
            assert lost not in placed, placed
            assert len(obj["status"]["members"]) == 2
        finally:
            force_delete(k8s, ns, stale)
