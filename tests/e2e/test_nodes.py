"""Members over three nodes (hack/cluster up --nodes 3): one member per node, a required spread
that leaves a member without a node, and drains that the PodDisruptionBudget keeps within
quorum. Run by `make test-nodes`, after the other suites, on the same local Kubernetes."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.e2e.helpers import (
    Operator,
    apply,
    condition,
    etcd_cluster,
    etcdctl,
    get,
    pods,
    wait_available,
)
from tests.k8s_cluster import K8sCluster

pytestmark = [pytest.mark.e2e, pytest.mark.nodes, pytest.mark.timeout(1200)]

AVAILABLE_WITHIN = 300
ETCD_PODS = "app.kubernetes.io/name=etcd"


def node_of(k8s: K8sCluster, ns: str, name: str) -> dict[str, str]:
    """Member Pod name -> the node it runs on."""
    return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in pods(k8s, ns, name)}


def drain(k8s: K8sCluster, node: str, timeout: int) -> subprocess.CompletedProcess[str]:
    """Evict the etcd member Pods of `node` and cordon it (only those Pods: the operator and
    CoreDNS are not what is tested). Not checked: a drain the budget blocks fails."""
    return k8s.kubectl(
        "drain",
        node,
        f"--pod-selector={ETCD_PODS}",
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        f"--timeout={timeout}s",
        check=False,
        timeout=timeout + 30,
    )


def wait_degraded(k8s: K8sCluster, ns: str, name: str, reason: str, timeout: float) -> Any:
    def degraded() -> dict[str, Any]:
        obj = get(k8s, ns, "etcd", name)
        return obj if condition(obj, "Degraded").get("reason") == reason else {}

    return k8s.wait_for(degraded, timeout=timeout, interval=2, what=f"{name} Degraded {reason}")


def test_members_spread_over_nodes_and_drains_keep_quorum(
    three_nodes: list[str], k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    k8s, ns, name = k8s_cluster, k8s_namespace, "spread"
    apply(k8s, ns, etcd_cluster(name))
    wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
    placed = node_of(k8s, ns, name)
    # Preferred anti-affinity: with three nodes free, one member on each.
    assert sorted(placed.values()) == three_nodes, placed
    first, second = sorted(placed)[1], sorted(placed)[2]
    etcdctl(k8s, ns, first, "put", "/nodes/before", "drain")

    # One drain: its member is evicted (the budget allows one), the cluster keeps quorum, and
    # its Pod, made again on the same claim, waits for the node its volume is on.
    out = drain(k8s, placed[first], 120)
    assert out.returncode == 0, out.stderr
    obj = wait_degraded(k8s, ns, name, "MemberUnschedulable", 120)
    assert condition(obj, "Available")["status"] == "True", obj["status"]
    assert first in condition(obj, "Degraded")["message"]

    # A second drain at the same time: the budget refuses to take a second member.
    blocked = drain(k8s, placed[second], 20)
    assert blocked.returncode != 0
    assert "disruption budget" in (blocked.stderr + blocked.stdout), blocked.stderr
    assert second in node_of(k8s, ns, name)
    assert get(k8s, ns, "pod", second)["status"]["phase"] == "Running"

    # The first node back: its member returns on its own data, then the second drain goes.
    k8s.kubectl("uncordon", placed[first])
    wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
    assert node_of(k8s, ns, name)[first] == placed[first]
    out = drain(k8s, placed[second], 120)
    assert out.returncode == 0, out.stderr
    k8s.kubectl("uncordon", placed[second])
    obj = wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
    assert etcdctl(k8s, ns, second, "get", "/nodes/before", "--print-value-only").strip() == "drain"
    # Every member came back under its own identity, on its own node.
    assert node_of(k8s, ns, name) == placed
    ids = {m["name"]: m["id"] for m in obj["status"]["members"]}
    assert sorted(ids) == sorted(placed)


def test_a_required_spread_leaves_a_fourth_member_without_a_node_and_says_why(
    three_nodes: list[str], k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    k8s, ns, name = k8s_cluster, k8s_namespace, "strict"
    apply(k8s, ns, etcd_cluster(name, pod={"antiAffinity": "required"}))
    wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
    k8s.kubectl(
        "-n", ns, "patch", "etcd", name, "--type=merge", "-p", json.dumps({"spec": {"size": 4}})
    )
    obj = wait_degraded(k8s, ns, name, "MemberUnschedulable", 180)
    degraded = condition(obj, "Degraded")
    assert f"{name}-3's Pod cannot be scheduled" in degraded["message"], degraded
    assert "anti-affinity" in degraded["message"], degraded
    # Quorum never depended on it: a learner that never started.
    assert condition(obj, "Available")["status"] == "True"
    pending = get(k8s, ns, "pod", f"{name}-3")
    assert pending["status"]["phase"] == "Pending"
    assert obj["status"]["readyMembers"] == 3
    events = get(k8s, ns, "events", "--field-selector", "reason=MemberUnschedulable")["items"]
    assert any("spec.pod.antiAffinity" in e["message"] for e in events), events

    # Back to three: the learner that never ran is removed, and the cluster is as it was.
    k8s.kubectl(
        "-n", ns, "patch", "etcd", name, "--type=merge", "-p", json.dumps({"spec": {"size": 3}})
    )
    obj = wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
    assert sorted(m["name"] for m in obj["status"]["members"]) == [f"{name}-{i}" for i in range(3)]
    assert sorted(node_of(k8s, ns, name).values()) == three_nodes
