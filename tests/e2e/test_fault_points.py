"""The operator killed at each of its fault points (etcd_runbook_operator/faults.py), on one
cluster taken through a bootstrap, a scale-up, a roll and a scale-down under writes, then a
quorum recovery from a survivor. Each point fires once, at its task boundary, and the operator
starts afresh; each step must then end with exactly the voting members asked for, no
duplicate, one cluster ID throughout (the recovery: one new one), every acknowledged write
kept, and a client's writes never stalled for long (quorum kept)."""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

import pytest

from etcd_runbook.names import ANN_RECOVER_QUORUM
from testbed.cluster import K8sCluster
from testbed.operator_incluster import DEPLOYMENT, NAMESPACE
from tests.e2e.helpers import (
    Operator,
    apply,
    etcd_cluster,
    etcdctl,
    get,
    member_list,
    pods,
    put_via_service,
    wait_available,
)

IN_CLUSTER = os.environ.get("E2E_OPERATOR", "in-cluster") != "process"
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.operator_exclusive,
    pytest.mark.timeout(1500),
    pytest.mark.skipif(not IN_CLUSTER, reason="the points are enabled on the in-cluster operator"),
]

ANNOTATION = "etcd.runbook.io/fault-points"
STEP_WITHIN = 420
WRITE_STALL = 60.0


class Writer:
    """Puts keys through the client Service until stopped (at most 2000), remembering each
    acknowledged one and when; also samples the cluster ID status reports."""

    def __init__(self, k8s: K8sCluster, ns: str, name: str) -> None:
        self.k8s, self.ns, self.name = k8s, ns, name
        self.acked: list[tuple[float, str]] = []
        self.cluster_ids: set[str] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Writer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(60)

    def _run(self) -> None:
        for i in range(2000):
            if self.stop.wait(0.2):
                return
            obj = get(self.k8s, self.ns, "etcd", self.name)
            if cid := obj.get("status", {}).get("clusterID"):
                self.cluster_ids.add(cid)
            ready = [p["metadata"]["name"] for p in pods(self.k8s, self.ns, self.name)]
            if not ready:
                continue
            key = f"faults/{i:05d}"
            if put_via_service(self.k8s, self.ns, self.name, ready[i % len(ready)], key, str(i)):
                self.acked.append((time.monotonic(), key))


def _arm(k8s: K8sCluster, ns: str, name: str, *points: str) -> None:
    k8s.kubectl(
        "-n", ns, "annotate", "--overwrite", "etcd", name, f"{ANNOTATION}={','.join(points)}"
    )


def _fired(k8s: K8sCluster) -> str:
    return k8s.kubectl(
        "-n", NAMESPACE, "logs", f"deployment/{DEPLOYMENT}", "--tail=-1", check=False
    ).stdout


def _settled(
    k8s: K8sCluster, ns: str, name: str, size: int, points: tuple[str, ...]
) -> dict[str, Any]:
    """Available with `size` voting members after every point in `points` fired once."""

    def fired() -> bool:
        log = _fired(k8s)
        return all(f"{ns}/{name}: fault point {p} fired" in log for p in points)

    k8s.wait_for(fired, timeout=STEP_WITHIN, interval=2, what=f"fault points {points} fired")
    obj = wait_available(k8s, ns, name, size, STEP_WITHIN)
    names = sorted(m["name"] for m in obj["status"]["members"])
    assert len(names) == size == len(set(names)), names
    members = member_list(k8s, ns, names[0])
    assert sorted(m["name"] for m in members) == names, members
    assert not any(m.get("isLearner") for m in members), members
    assert len({m["ID"] for m in members}) == size
    assert sorted(p["metadata"]["name"] for p in pods(k8s, ns, name)) == names
    for p in points:
        assert _fired(k8s).count(f"{ns}/{name}: fault point {p} fired") == 1, p
    return obj


def test_the_operator_killed_at_each_fault_point_ends_each_step_right(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    k8s, ns, name = k8s_cluster, k8s_namespace, "faults"
    timings: dict[str, float] = {}
    # Two new clusters, each killed at one point of its bootstrap: a bootstrap killed before
    # its Pods (its claims made, as when a person's kill lands mid-way) is finished from its
    # claims, never started over, so one cluster never reaches the later point. The
    # second is created once the first's point fired, and its kill lands in the first's runs.
    other = f"{name}-b"
    start = time.monotonic()
    for cluster_name, point in ((other, "bootstrap-after-pods"), (name, "bootstrap-before-pods")):
        cluster = etcd_cluster(cluster_name, minReadySeconds=5)
        cluster["metadata"]["annotations"] = {ANNOTATION: point}
        apply(k8s, ns, cluster)
        said = f"{ns}/{cluster_name}: fault point {point} fired"

        def fired(said: str = said) -> bool:
            return said in _fired(k8s)

        k8s.wait_for(fired, timeout=STEP_WITHIN, interval=2, what=said)
    _settled(k8s, ns, other, 3, ("bootstrap-after-pods",))
    obj = _settled(k8s, ns, name, 3, ("bootstrap-before-pods",))
    cluster_id = obj["status"]["clusterID"]
    timings["bootstrap"] = time.monotonic() - start
    k8s.kubectl("-n", ns, "delete", "etcd", other, "--wait=false")

    with Writer(k8s, ns, name) as writer:
        steps: list[tuple[str, tuple[str, ...], dict[str, Any], int]] = [
            ("scale 3 -> 4", ("after-member-add", "before-promote"), {"size": 4}, 4),
            (
                "roll",
                ("after-roll-pod-delete",),
                {"pod": {"resources": {"requests": {"memory": "64Mi"}}}},
                4,
            ),
            ("scale 4 -> 3", ("after-member-remove",), {"size": 3}, 3),
        ]
        for what, armed, change, size in steps:
            start = time.monotonic()
            _arm(k8s, ns, name, *armed)
            k8s.kubectl(
                "-n", ns, "patch", "etcd", name, "--type=merge", "-p", json.dumps({"spec": change})
            )
            _settled(k8s, ns, name, size, armed)
            timings[what] = time.monotonic() - start
        # The roll reached every member: each Pod on the new spec.
        for p in pods(k8s, ns, name):
            resources = p["spec"]["containers"][0].get("resources") or {}
            assert resources.get("requests", {}).get("memory") == "64Mi", p["metadata"]["name"]

    for what, seconds in timings.items():
        print(f"{what}: {seconds:.1f}s")
    assert writer.cluster_ids == {cluster_id}, writer.cluster_ids
    assert len(writer.acked) > 30, len(writer.acked)
    stalls = [b - a for (a, _), (b, _) in zip(writer.acked, writer.acked[1:], strict=False)]
    assert max(stalls) < WRITE_STALL, f"writes stalled {max(stalls):.1f}s"
    names = sorted(p["metadata"]["name"] for p in pods(k8s, ns, name))
    stored = set(etcdctl(k8s, ns, names[0], "get", "faults/", "--prefix", "--keys-only").split())
    missing = sorted({k for _, k in writer.acked} - stored)
    assert not missing, f"acknowledged writes lost: {missing[:5]}"
    _recovered_despite_kills(k8s, ns, name, names[0], cluster_id, stored)


def _recovered_despite_kills(
    k8s: K8sCluster, ns: str, name: str, survivor: str, cluster_id: str, stored: set[str]
) -> None:
    """A quorum recovery from `survivor`, the operator killed after it fenced the claims and
    after it made the first member's claim and Job: one new cluster, grown back to three
    voting members, holding every key the survivor held."""
    start = time.monotonic()
    doomed = [
        p["metadata"]["name"]
        for p in members_of(k8s, ns, name)
        if p["metadata"]["name"] != survivor
    ]
    k8s.kubectl(
        "-n",
        ns,
        "delete",
        *[f"pod/{n}" for n in doomed],
        *[f"pvc/{n}-data" for n in doomed],
        "--wait=false",
    )
    k8s.wait_for(
        lambda: get(k8s, ns, "etcd", name).get("status", {}).get("majorityDataLost"),
        timeout=120,
        interval=1,
        what="MajorityDataLost",
    )
    points = ("recovery-after-fence", "recovery-after-create")
    _arm(k8s, ns, name, *points)
    request = f"member={survivor} clusterID={cluster_id}"
    k8s.kubectl(
        "-n", ns, "annotate", "--overwrite", "etcd", name, f"{ANN_RECOVER_QUORUM}={request}"
    )

    def done() -> dict[str, Any]:
        o = get(k8s, ns, "etcd", name)
        recovery = o.get("status", {}).get("recovery") or {}
        assert recovery.get("phase") != "Failed", recovery
        ready = o.get("status", {}).get("readyMembers") == 3
        return o if recovery.get("phase") == "Done" and ready else {}

    obj = k8s.wait_for(done, timeout=STEP_WITHIN, interval=2, what="the recovery done")
    print(f"recovery: {time.monotonic() - start:.1f}s")
    log = _fired(k8s)
    for p in points:
        assert log.count(f"{ns}/{name}: fault point {p} fired") == 1, p
    assert obj["status"]["clusterID"] not in ("", cluster_id), obj["status"]
    names = sorted(p["metadata"]["name"] for p in members_of(k8s, ns, name))
    members = member_list(k8s, ns, names[0])
    assert sorted(m["name"] for m in members) == names and len(names) == 3, (members, names)
    assert not any(m.get("isLearner") for m in members), members
    recovered = set(etcdctl(k8s, ns, names[0], "get", "faults/", "--prefix", "--keys-only").split())
    assert stored <= recovered, f"lost in the recovery: {sorted(stored - recovered)[:5]}"


def members_of(k8s: K8sCluster, ns: str, name: str) -> list[dict[str, Any]]:
    """The member Pods (the recovery Job's Pod carries the cluster's label too)."""
    return [
        p
        for p in pods(k8s, ns, name)
        if p["metadata"]["labels"].get("app.kubernetes.io/name") == "etcd"
    ]
