"""etcd_cluster_observe against the real local Kubernetes: it sees exactly the objects that
carry the selector, with the credentials of a kubeconfig or of a ServiceAccount token, and a
denied read is a clear failure naming the resource; a wait ends when the run is asked to
stop."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from tests.ansible_adhoc import run_module

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
