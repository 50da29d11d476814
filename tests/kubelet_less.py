"""Nodes no kubelet serves, for tests of what the operator does with a node that is lost or
whose kubelet's clock is off: a Node object whose Ready condition and Lease a test writes,
and Pods bound to it whose status the test writes. The Node is unschedulable and tainted
NoExecute, so nothing but the test's own Pods (which tolerate the taint) is ever placed
there; all of it is deleted afterwards, the Pods at once (no kubelet would confirm a graceful
end)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from testbed.cluster import K8sCluster

TAINT = "example.com/no-kubelet"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@contextmanager
def kubelet_less_node(
    k8s: K8sCluster, name: str, ready: bool, renew_time: str = ""
) -> Iterator[str]:
    """Node `name`, Ready or not as the kubelet would say it now; with `renew_time`, its Lease
    renewed now by the API server's clock, saying `renew_time` (the kubelet's clock)."""
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"unschedulable": True, "taints": [{"key": TAINT, "effect": "NoExecute"}]},
    }
    try:
        k8s.kubectl("create", "-f", "-", input=json.dumps(node))
        condition = {
            "type": "Ready",
            "status": "True" if ready else "False",
            "reason": "KubeletLess",
            "lastHeartbeatTime": _now(),
            "lastTransitionTime": _now(),
        }
        status = {"status": {"conditions": [condition]}}
        k8s.kubectl(
            "patch", "node", name, "--subresource=status", "--type=merge", "-p", json.dumps(status)
        )
        if renew_time:
            lease = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "namespace": "kube-node-lease"},
                "spec": {
                    "holderIdentity": name,
                    "leaseDurationSeconds": 40,
                    "renewTime": renew_time,
                },
            }
            k8s.kubectl("create", "-f", "-", input=json.dumps(lease))
        yield name
    finally:
        k8s.kubectl("-n", "kube-node-lease", "delete", "lease", name, check=False)
        k8s.kubectl("delete", "node", name, "--wait=false", check=False)


def renew(k8s: K8sCluster, name: str, renew_time: str) -> None:
    """The node's kubelet renews its Lease now (the API server's clock), writing `renew_time`
    (its own clock)."""
    body = {"spec": {"renewTime": renew_time}}
    k8s.kubectl(
        "-n", "kube-node-lease", "patch", "lease", name, "--type=merge", "-p", json.dumps(body)
    )


def run_there(k8s: K8sCluster, ns: str, pod: dict[str, Any], node: str, ip: str) -> None:
    """Creates `pod` bound to `node` and says it Running at `ip`, as a kubelet would."""
    spec = pod.setdefault("spec", {})
    spec["nodeName"] = node
    spec.setdefault("tolerations", []).append({"key": TAINT, "operator": "Exists"})
    k8s.kubectl("-n", ns, "create", "-f", "-", input=json.dumps(pod))
    running = {"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}}
    k8s.kubectl(
        "-n", ns, "patch", "pod", pod["metadata"]["name"], "--subresource=status",
        "--type=merge", "-p", json.dumps(running),
    )  # fmt: skip


def force_delete(k8s: K8sCluster, ns: str, *pods: str) -> None:
    for pod in pods:
        k8s.kubectl("-n", ns, "delete", "pod", pod, "--grace-period=0", "--force", check=False)
