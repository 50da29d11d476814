"""Cleanups of Pods on a lost node (issue 23, item 8): a graceful delete there never ends (no
kubelet confirms it), and a run that waited for one failed, as did every run after it; and a
repair step that fails no longer keeps the independent ones from running. On one node, with a
node no kubelet serves (tests/kubelet_less.py) standing for the lost one."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from testbed.cluster import K8sCluster
from tests.e2e.helpers import (
    Operator,
    apply,
    condition,
    etcd_cluster,
    events,
    get,
    wait_available,
)
from tests.kubelet_less import force_delete, kubelet_less_node, run_there

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

AVAILABLE_WITHIN = 300
ACCOUNT = "system:serviceaccount:etcd-operator-system:etcd-runbook-operator"


def _freeze(k8s: K8sCluster, ns: str, claim: str) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy (and its binding) refusing the operator's writes to `claim`:
    a repair step that patches it (the record of who the member is) fails every time."""
    name = f"{ns}-freeze"
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["UPDATE"],
                        "resources": ["persistentvolumeclaims"],
                    }
                ]
            },
            "matchConditions": [
                {"name": "the-operator", "expression": f"request.userInfo.username == '{ACCOUNT}'"}
            ],
            "validations": [
                {"expression": f"object.metadata.name != '{claim}'", "message": "claim frozen"}
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}
            },
        },
    }
    return [policy, binding]


def test_a_removed_member_s_pod_on_a_lost_node_is_deleted_at_once_and_runs_go_on(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    """A member etcd no longer lists (its removal finished, its cleanup did not) whose Pod is
    on a node gone Not Ready: the cleanup deletes its Pod at once (grace period 0: its member
    is no member, whatever the node does) and its claim. Meanwhile an earlier repair step fails
    every time (the record of the other member's claim, which an admission policy refuses):
    the cleanup is done all the same, and the run says what failed. Once the claim may be
    written again, the run goes on to what the spec asks next (a second member)."""
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
    stale, kept = f"{name}-1", f"{name}-0-data"
    labels = {
        "app.kubernetes.io/name": "etcd",
        "app.kubernetes.io/managed-by": "etcd-runbook-operator",
        "etcd.runbook.io/cluster": name,
        "etcd.runbook.io/member": stale,
    }
    meta = {"labels": labels, "ownerReferences": [owner]}
    frozen = _freeze(k8s, ns, kept)
    with kubelet_less_node(k8s, f"{ns}-lost", ready=False) as lost:
        try:
            k8s.kubectl(
                "create",
                "-f",
                "-",
                input=json.dumps({"kind": "List", "apiVersion": "v1", "items": frozen}),
            )

            def refused() -> bool:
                probe = k8s.kubectl(
                    "-n", ns, "label", "pvc", kept, "probe=1", "--dry-run=server",
                    f"--as={ACCOUNT}", check=False,
                )  # fmt: skip
                return "claim frozen" in probe.stderr

            # In force once a write of the operator's is refused (tried without writing).
            k8s.wait_for(refused, timeout=30, what="the admission policy in force")
            # The record on kept's claim is to be written again (its voting label gone).
            k8s.kubectl("-n", ns, "label", "pvc", kept, "etcd.runbook.io/voter-")
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

            def cleaned() -> bool:
                names = {p["metadata"]["name"] for p in get(k8s, ns, "pods")["items"]}
                claims = {c["metadata"]["name"] for c in get(k8s, ns, "pvc")["items"]}
                return stale not in names and f"{stale}-data" not in claims

            k8s.wait_for(cleaned, timeout=90, interval=1, what=f"{stale}'s Pod and claim gone")
            took = time.monotonic() - started
            # The Event goes out when the run that cleaned up ends, which may be after the look.
            k8s.wait_for(
                lambda: any(stale in e["message"] for e in events(k8s, ns, "StaleMemberCleaned")),
                timeout=60,
                interval=1,
                what=f"the StaleMemberCleaned Event naming {stale}",
            )
            print(f"{stale}'s Pod and claim gone after {took:.1f}s")

            # The failed step is said, and nothing was written on the frozen claim.
            # (The step's own words, the policy's message among them, are cut to 300 characters.)
            def failed_step() -> dict[str, Any]:
                degraded = condition(get(k8s, ns, "etcd", name), "Degraded")
                return degraded if degraded.get("reason") == "StepFailed" else {}

            failed = k8s.wait_for(failed_step, timeout=60, interval=1, what="the failed record")
            assert failed["message"].startswith("Repair | Steps failed: Record | "), failed
            kept_labels = get(k8s, ns, "pvc", kept)["metadata"]["labels"]
            assert "etcd.runbook.io/voter" not in kept_labels

            for doc in frozen:
                k8s.kubectl("delete", doc["kind"], doc["metadata"]["name"])
            # Two members asked for: a new generation runs at once, past the failures' backoff.
            k8s.kubectl(
                "-n", ns, "patch", "etcd", name, "--type=merge", "-p", '{"spec":{"size":2}}'
            )
            obj = wait_available(k8s, ns, name, 2, AVAILABLE_WITHIN)
            assert (
                get(k8s, ns, "pvc", kept)["metadata"]["labels"]["etcd.runbook.io/voter"] == "true"
            )
            # The new member runs on a node that runs, the lost one holds nothing.
            placed = {p["spec"].get("nodeName") for p in get(k8s, ns, "pods")["items"]}
            assert lost not in placed, placed
            assert len(obj["status"]["members"]) == 2
        finally:
            force_delete(k8s, ns, stale)
            for doc in frozen:
                k8s.kubectl("delete", doc["kind"], doc["metadata"]["name"], check=False)
