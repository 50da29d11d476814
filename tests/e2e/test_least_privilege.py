"""Least privilege, end to end: the operator deployed in the cluster (conftest.py) runs under an
administrator's allow-lists (testbed.operator_incluster.ALLOW_LISTS); an EtcdCluster asking for an
image repository or a PriorityClass outside them is refused naming the field, and nothing is made
for it (the rights of each install: tests/operator/test_labelled_namespaces.py and
test_etcdcluster.py's namespaced-mode test)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from testbed.cluster import K8sCluster
from tests.e2e.helpers import Operator, apply, condition, etcd_cluster, events, get

pytestmark = pytest.mark.e2e


def test_a_cluster_outside_the_allow_lists_is_refused_and_nothing_is_made(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    k8s, ns = k8s_cluster, k8s_namespace
    asked: dict[str, tuple[str, dict[str, Any]]] = {
        # An image of the tenant's choosing, run by the operator's hand.
        "foreign": ("spec.repository", {"repository": "registry.evil.example/etcd"}),
        # Scheduling above everyone else's workloads (and preempting them).
        "favoured": (
            "spec.pod.priorityClassName",
            {"pod": {"priorityClassName": "system-cluster-critical"}},
        ),
    }
    started = time.monotonic()
    for name, (_, spec) in asked.items():
        apply(k8s, ns, etcd_cluster(name, size=1, **spec))

    for name, (field, _) in asked.items():

        def refused(name: str = name) -> dict[str, str]:
            degraded = condition(get(k8s, ns, "etcd", name), "Degraded")
            return degraded if degraded.get("reason") == "NotAllowed" else {}

        degraded = k8s.wait_for(refused, timeout=120, interval=1, what=f"{name} refused")
        assert degraded["status"] == "True" and degraded["message"].startswith(field), degraded
        # A new cluster refused reads Failed, not Creating for ever.
        assert get(k8s, ns, "etcd", name)["status"]["phase"] == "Failed"

        # The run's Events go out when it ends; status may say it a moment before.
        def told(name: str = name) -> list[dict[str, Any]]:
            return [e for e in events(k8s, ns, "NotAllowed") if e["involvedObject"]["name"] == name]

        said = k8s.wait_for(told, timeout=30, interval=1, what=f"{name}'s NotAllowed Event")
        assert said[0]["type"] == "Warning" and said[0]["message"].startswith(field), said
    print(f"both refused {time.monotonic() - started:.1f} s after their creation")

    # Nothing of either exists: no member Pod, claim, Service, Secret or budget.
    for kind in ("pods", "persistentvolumeclaims", "services", "secrets", "poddisruptionbudgets"):
        assert get(k8s, ns, kind)["items"] == [], kind
