"""Break-glass quorum recovery: playbooks/etcd-recover-quorum.yml, run as a person runs it (a
kubeconfig, the cluster paused so the operator stays out), on a cluster whose majority lost its
data. Its check run writes nothing, a request for another cluster is refused before anything is
written, and the run carries the recovery out to the end; unpaused, the operator keeps it."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from etcd_runbook.names import ANN_RECOVER_QUORUM
from testbed.cluster import K8sCluster
from testbed.operator_incluster import DEPLOYMENT, NAMESPACE
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
from tests.e2e.test_etcdbackup import playbook_by_hand

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]

AVAILABLE_WITHIN = 300


def annotation(k8s: K8sCluster, ns: str, name: str) -> str | None:
    return get(k8s, ns, "etcd", name)["metadata"].get("annotations", {}).get(ANN_RECOVER_QUORUM)


def test_a_lost_majority_is_recovered_by_the_break_glass_playbook(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    k8s, ns, name = k8s_cluster, k8s_namespace, "glass"
    apply(k8s, ns, etcd_cluster(name))
    obj = wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
    survivor = sorted(m["name"] for m in obj["status"]["members"])[0]
    assert etcdctl(k8s, ns, survivor, "put", "glass/key", "kept").strip() == "OK"
    doomed = [m["name"] for m in obj["status"]["members"] if m["name"] != survivor]
    k8s.kubectl(
        "-n",
        ns,
        "delete",
        *[f"pod/{n}" for n in doomed],
        *[f"pvc/{n}-data" for n in doomed],
        "--wait=false",
    )
    obj = k8s.wait_for(
        lambda: (o := get(k8s, ns, "etcd", name)).get("status", {}).get("majorityDataLost") and o,
        timeout=60,
        interval=0.5,
        what="MajorityDataLost",
    )
    cluster_id = obj["status"]["clusterID"]
    k8s.kubectl("-n", ns, "patch", "etcd", name, "--type=merge", "-p", '{"spec":{"paused":true}}')
    deployment = get(k8s, NAMESPACE, "deployment", DEPLOYMENT)
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    base = ["-e", f"name={name}", "-e", f"namespace={ns}", "-e", f"image={image}"]
    args = [*base, "-e", f"member={survivor}", "-e", f"cluster_id={cluster_id}"]
    survivor_claim = get(k8s, ns, "pvc", f"{survivor}-data")

    # Another cluster's ID: refused by the runbook's own rule, in check mode, nothing written.
    wrong = playbook_by_hand(
        k8s,
        "playbooks/etcd-recover-quorum.yml",
        *base,
        "-e",
        f"member={survivor}",
        "-e",
        "cluster_id=b0b",
        "--check",
    )
    assert wrong.returncode != 0 and "ClusterIDMismatch" in wrong.stdout, wrong.stdout[-3000:]
    # The plan a person reads first: the decision, and nothing written.
    checked = playbook_by_hand(k8s, "playbooks/etcd-recover-quorum.yml", *args, "--check", "--diff")
    assert checked.returncode == 0, checked.stdout[-3000:]
    assert "FromNewestSurvivor" in checked.stdout, checked.stdout[-3000:]
    assert annotation(k8s, ns, name) is None
    after_check = get(k8s, ns, "pvc", f"{survivor}-data")
    assert after_check["metadata"].get("annotations") == survivor_claim["metadata"].get(
        "annotations"
    )
    assert [p["metadata"]["name"] for p in pods(k8s, ns, name)] == [survivor]

    started = time.monotonic()
    ran = playbook_by_hand(k8s, "playbooks/etcd-recover-quorum.yml", *args)
    assert ran.returncode == 0, ran.stdout[-4000:]
    print(f"recovered by the playbook in {time.monotonic() - started:.1f}s")
    assert annotation(k8s, ns, name), "the request is written, as the record of what was asked"
    fenced = get(k8s, ns, "pvc", f"{survivor}-data")["metadata"]["annotations"]
    assert fenced["etcd.runbook.io/fenced"].endswith(" source"), fenced

    # Unpaused, the operator finds the recovery done and keeps the cluster as it is.
    k8s.kubectl("-n", ns, "patch", "etcd", name, "--type=merge", "-p", '{"spec":{"paused":false}}')

    def kept() -> dict[str, Any]:
        o = get(k8s, ns, "etcd", name)
        recovery = o.get("status", {}).get("recovery") or {}
        ok = (
            condition(o, "Available").get("status") == "True"
            and o.get("status", {}).get("readyMembers") == 3
            and recovery.get("phase") == "Done"
        )
        return o if ok else {}

    obj = k8s.wait_for(kept, timeout=300, interval=1, what="the recovered cluster Available")
    assert obj["status"]["clusterID"] != cluster_id, obj["status"]
    members = sorted(
        p["metadata"]["name"]
        for p in pods(k8s, ns, name)
        if p["metadata"]["labels"].get("app.kubernetes.io/name") == "etcd"
    )
    assert survivor not in members and len(members) == 3, members
    got = etcdctl(k8s, ns, members[0], "get", "glass/key", "-w", "json")
    kv = json.loads(got)
    assert int(kv["header"]["revision"]) > 1_000_000_000, kv["header"]
    assert etcdctl(k8s, ns, members[-1], "get", "glass/key", "--print-value-only").strip() == "kept"
