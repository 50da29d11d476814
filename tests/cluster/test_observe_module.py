"""etcd_cluster_observe against the real local Kubernetes: it sees exactly the objects that
carry the selector, with the credentials of a kubeconfig or of a ServiceAccount token, and a
denied read is a clear failure naming the resource; a wait ends when the run is asked to
stop."""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from etcd_runbook.rules import etcd_plan
from testbed.ansible_adhoc import run_module
from tests.kubelet_less import force_delete, kubelet_less_node, renew, run_there

pytestmark = pytest.mark.cluster

SELECTOR = "app.kubernetes.io/name=etcd,etcd.runbook.io/cluster=obs"


def _apply(k8s_cluster, ns: str, *docs: dict) -> None:
    for doc in docs:
        doc["metadata"]["namespace"] = ns
        k8s_cluster.kubectl("apply", "-f", "-", input=json.dumps(doc))


def _labels(cluster: str = "obs") -> dict[str, str]:
    return {"app.kubernetes.io/name": "etcd", "etcd.runbook.io/cluster": cluster}


def _run(kubeconfig: Path, args: dict) -> dict:
    old = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(kubeconfig)
    try:
        return run_module("etcd_cluster_observe", args)
    finally:
        if old is None:
            del os.environ["KUBECONFIG"]
        else:
            os.environ["KUBECONFIG"] = old


def test_sees_the_labelled_objects_and_nothing_else(k8s_cluster, k8s_namespace):
    ns = k8s_namespace
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque"}
    _apply(
        k8s_cluster,
        ns,
        {**secret, "metadata": {"name": "obs-ca", "labels": _labels()}, "stringData": {"a": "1"}},
        {**secret, "metadata": {"name": "other", "labels": _labels("x")}, "stringData": {"b": "2"}},
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "obs", "labels": _labels()},
            "spec": {"clusterIP": "None", "ports": [{"name": "client", "port": 2379}]},
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "obs", "labels": _labels()},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": _labels()}},
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "obs-0-data", "labels": _labels()},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Mi"}},
            },
        },
    )
    result = _run(
        k8s_cluster.kubeconfig,
        {"namespace": ns, "selector": SELECTOR, "secret_selector": SELECTOR},
    )
    assert not result.get("failed"), result
    assert result["changed"] is False
    assert [s["metadata"]["name"] for s in result["secrets"]] == ["obs-ca"]
    assert result["secrets"][0]["kind"] == "Secret"
    assert [s["metadata"]["name"] for s in result["services"]] == ["obs"]
    assert [(b["kind"], b["metadata"]["name"]) for b in result["budgets"]] == [
        ("PodDisruptionBudget", "obs")
    ]
    assert [c["metadata"]["name"] for c in result["claims"]] == ["obs-0-data"]
    assert result["pods"] == []
    # No Pod runs, so etcd had nothing to ask; that is a fact, not a failure.
    assert result["info"] == {} and result["endpoints"] == {}
    assert result["info_error"] == "etcd was not asked"

    asked = _run(
        k8s_cluster.kubeconfig,
        {"namespace": ns, "selector": SELECTOR, "etcd": {"enabled": True, "dns_suffix": "x"}},
    )
    assert not asked.get("failed"), asked
    assert asked["secrets"] == []  # no secret_selector: no Secret read
    assert asked["info_error"] == "no member Pod is running"


def test_a_token_without_rights_fails_naming_what_was_denied(k8s_cluster, k8s_namespace, tmp_path):
    ns = k8s_namespace
    k8s_cluster.kubectl("-n", ns, "create", "serviceaccount", "nobody")
    token = k8s_cluster.kubectl("-n", ns, "create", "token", "nobody").stdout.strip()
    admin = k8s_cluster.api_client().configuration
    kubeconfig = tmp_path / "nobody.kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": admin.host,
                            "certificate-authority": admin.ssl_ca_cert,
                        },
                    }
                ],
                "users": [{"name": "u", "user": {"token": token}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    args = {"namespace": ns, "selector": SELECTOR, "kubeconfig": str(kubeconfig)}
    result = run_module("etcd_cluster_observe", args)
    assert result.get("failed"), result
    assert result["reason"] == "Forbidden"
    assert f"/namespaces/{ns}/pods" in result["msg"] and "HTTP 403" in result["msg"]
    assert f"system:serviceaccount:{ns}:nobody" in result["msg"]

    # The same token with the rights reads: the failure above came from RBAC, not the client.
    k8s_cluster.kubectl(
        "-n",
        ns,
        "create",
        "role",
        "reader",
        "--verb=list",
        "--resource=pods,persistentvolumeclaims,services,poddisruptionbudgets.policy",
    )
    k8s_cluster.kubectl(
        "-n",
        ns,
        "create",
        "rolebinding",
        "reader",
        "--role=reader",
        f"--serviceaccount={ns}:nobody",
    )
    granted = k8s_cluster.wait_for(
        lambda: (lambda r: None if r.get("failed") else r)(
            run_module("etcd_cluster_observe", args)
        ),
        timeout=30,
        what="the granted read",
    )
    assert granted["pods"] == [] and granted["secrets"] == []


def _held_pod(name: str) -> dict:
    """A member Pod that no node takes and a finalizer keeps once it is deleted."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": _labels(), "finalizers": ["example.com/hold"]},
        "spec": {
            "nodeSelector": {"example.com/no-such-node": "true"},
            "containers": [{"name": "etcd", "image": "example.invalid/etcd:none"}],
        },
    }


@pytest.mark.parametrize("waiting_on", ["member", "pods_gone"])
def test_a_stop_file_ends_a_wait_that_would_last_minutes(
    k8s_cluster, k8s_namespace, tmp_path, waiting_on
):
    """member: a member with no Pod yet is waited for (a Pod no node takes would end the wait
    at once); pods_gone: a Pod a finalizer keeps is waited for until it goes."""
    ns = k8s_namespace
    if waiting_on == "pods_gone":
        _apply(k8s_cluster, ns, _held_pod("obs-0"))
        k8s_cluster.kubectl("-n", ns, "delete", "pod", "obs-0", "--wait=false")
    try:
        stop = tmp_path / "stop"
        wait: dict = {"timeout": 300, "stop_file": str(stop)}
        wait[waiting_on] = "obs-0" if waiting_on == "member" else ["obs-0"]
        asking = threading.Timer(3, stop.touch)
        asking.start()
        started = time.monotonic()
        result = _run(
            k8s_cluster.kubeconfig,
            {
                "namespace": ns,
                "selector": SELECTOR,
                "etcd": {"enabled": True, "dns_suffix": f"obs.{ns}.svc.cluster.local"},
                "wait_for": wait,
            },
        )
        took = time.monotonic() - started
        asking.join()
        assert result.get("failed") and result["reason"] == "Stopped", result
        assert "asked to stop" in result["msg"]
        # The facts of the last look go back with it, as on a timeout.
        held = ["obs-0"] if waiting_on == "pods_gone" else []
        assert [p["metadata"]["name"] for p in result["pods"]] == held
        assert 3 <= took < 30, took
    finally:
        if waiting_on == "pods_gone":
            unhold = '{"metadata":{"finalizers":null}}'
            k8s_cluster.kubectl("-n", ns, "patch", "pod", "obs-0", "--type=merge", "-p", unhold)


def _member_info(names: list[str], ns: str) -> dict:
    """What etcd_cluster_info answers for a cluster whose members `names` are all down."""
    members = [
        {
            "id": f"{i + 1:x}",
            "name": name,
            "peer_urls": [f"https://{name}.obs.{ns}.svc.cluster.local:2380"],
            "client_urls": [],
            "is_learner": False,
            "healthy": False,
        }
        for i, name in enumerate(names)
    ]
    quorum = {"voters": len(names), "healthy_voters": 0, "needed": len(names) // 2 + 1}
    return {
        "cluster_id": "c1d",
        "members": members,
        "leader": None,
        "quorum": {**quorum, "ok": False},
        "status": [],
        "views": [],
        "alarms": [],
    }


def _static_volume(name: str, node: str, claim: str, ns: str) -> dict:
    """A PersistentVolume pre-bound to `claim`, mountable only on `node` (by its hostname)."""
    term = {
        "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]
    }
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Mi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "local": {"path": "/nonexistent"},
            "claimRef": {"kind": "PersistentVolumeClaim", "namespace": ns, "name": claim},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
        },
    }


def test_a_look_judges_nodes_on_one_clock_members_by_their_volumes_and_dials_no_lost_pod(
    k8s_cluster, k8s_namespace
):
    """Issue 23, items 6 and 8 on a real API server, with two nodes no kubelet serves
    (tests/kubelet_less.py): `ready`, whose kubelet's clock is an hour behind (its Lease
    renewed just now, with a renewTime an hour old), and `down`, Not Ready. obs-0 runs on
    `ready`, obs-1 on `down`; obs-2 has no Pod and a volume on erop-node0; obs-3 has no Pod
    and a volume on a node that is gone; both claims still name that node as the scheduler's
    first pick. The plan, from this look: obs-0 is not lost (its kubelet was heard from,
    whatever its clock says), obs-2 gets its Pod back on its claim, obs-1 and obs-3 are lost;
    obs-1, on a node not Ready, is never dialled. (etcd is not really asked: every member is
    down, and its answer is written here as etcd_cluster_info gives it.)"""
    k8s, ns = k8s_cluster, k8s_namespace
    gone = f"{ns}-gone"
    volumes = [f"{ns}-2", f"{ns}-3"]
    behind = datetime.now(UTC) - timedelta(hours=1)
    an_hour_ago = behind.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    an_hour_later_still = (behind + timedelta(seconds=20)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    with (
        kubelet_less_node(k8s, f"{ns}-ready", ready=True, renew_time=an_hour_ago) as ready,
        kubelet_less_node(k8s, f"{ns}-down", ready=False) as down,
    ):
        try:
            for i, node in ((0, ready), (1, down)):
                member = {**_labels(), "etcd.runbook.io/member": f"obs-{i}"}
                pod = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"obs-{i}", "labels": member},
                    "spec": {"containers": [{"name": "etcd", "image": "example.invalid/e:0"}]},
                }
                run_there(k8s, ns, pod, node, f"192.0.2.{10 + i}")
            for i, (volume, node) in enumerate(zip(volumes, ("erop-node0", gone), strict=True), 2):
                pv = _static_volume(volume, node, f"obs-{i}-data", ns)
                k8s.kubectl("create", "-f", "-", input=json.dumps(pv))
            for i in range(4):
                spec = {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Mi"}},
                }
                if i >= 2:
                    spec.update(storageClassName="", volumeName=volumes[i - 2])
                claim = {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {
                        "name": f"obs-{i}-data",
                        "labels": {**_labels(), "etcd.runbook.io/member": f"obs-{i}"},
                        # The scheduler's pick when it was first bound: rotated out since.
                        "annotations": {"volume.kubernetes.io/selected-node": gone},
                    },
                    "spec": spec,
                }
                _apply(k8s, ns, claim)

            def bound() -> bool:
                got = k8s.kubectl("-n", ns, "get", "pvc", "-o", "json").stdout
                phases = {
                    c["metadata"]["name"]: c["status"]["phase"] for c in json.loads(got)["items"]
                }
                return phases["obs-2-data"] == phases["obs-3-data"] == "Bound"

            k8s.wait_for(bound, timeout=60, what="the claims bound to their volumes")

            # The kubelet renews just before the look, its clock still an hour behind.
            renew(k8s, ready, an_hour_later_still)
            dns = f"obs.{ns}.svc.cluster.local"
            seen = _run(
                k8s.kubeconfig,
                {
                    "namespace": ns,
                    "selector": SELECTOR,
                    "etcd": {"enabled": True, "dns_suffix": dns, "timeout": 1},
                },
            )
            assert not seen.get("failed"), seen
            # obs-1's node is not Ready: its Pod is never dialled.
            assert sorted(seen["endpoints"]) == ["obs-0"], seen["endpoints"]
            # Silence on the API server's clock: the renewal was stored just now.
            assert seen["nodes"][ready]["renewed"] == an_hour_later_still
            assert 0 <= seen["nodes"][ready]["silent_for"] < 10, seen["nodes"][ready]
            assert seen["volumes"]["obs-2-data"]["nodes"] == ["erop-node0"], seen["volumes"]
            assert seen["volumes"]["obs-3-data"]["nodes"] == [], seen["volumes"]

            cluster = {
                "metadata": {"name": "obs", "namespace": ns, "uid": "u"},
                "spec": {"size": 4, "nodeLossTimeout": "1h"},
                "status": {"clusterID": "c1d"},
            }
            facts = {
                **seen,
                "object": cluster,
                "info": _member_info([f"obs-{i}" for i in range(4)], ns),
                "options": {"name": "obs", "namespace": ns},
            }
            plan = etcd_plan.plan(facts)
            assert sorted(plan["node_lost"]) == ["obs-1", "obs-3"], plan["node_lost"]
            assert plan["node_lost"]["obs-3"]["why"] == f"its node {gone} no longer exists"
            # obs-0's Pod is on a node that runs: left to that node's kubelet (an outdated Pod
            # that has not failed is the roll's, never re-made behind its back); obs-2 gets
            # its Pod back on its own claim.
            assert plan["heal"] == ["obs-2"], plan["heal"]
        finally:
            force_delete(k8s, ns, "obs-0", "obs-1")
            k8s.kubectl("-n", ns, "delete", "pvc", "--all", "--wait=false", check=False)
            k8s.kubectl("delete", "pv", *volumes, "--wait=false", check=False)
