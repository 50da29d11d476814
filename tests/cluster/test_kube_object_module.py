"""etcd_kube_object against the real local Kubernetes: creates what is missing, writes
nothing when all is as given, merge-patches, reads only in check mode, refuses what it may not
write."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.ansible_adhoc import run_module

pytestmark = pytest.mark.cluster


@pytest.fixture
def kubeconfig(k8s_cluster) -> Iterator[None]:
    old = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(k8s_cluster.kubeconfig)
    yield
    if old is None:
        del os.environ["KUBECONFIG"]
    else:
        os.environ["KUBECONFIG"] = old


def _claim(ns: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "k-0-data", "namespace": ns, "labels": labels},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}},
    }


def _service(ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "k", "namespace": ns},
        "spec": {"clusterIP": "None", "ports": [{"name": "client", "port": 2379}]},
    }


def _read(k8s_cluster, ns: str, what: str) -> dict[str, Any]:
    return json.loads(k8s_cluster.kubectl("-n", ns, "get", what, "-o", "json").stdout)


def test_creates_then_leaves_alone_then_patches(k8s_cluster, k8s_namespace, kubeconfig):
    ns = k8s_namespace
    made = run_module("etcd_kube_object", {"objects": [_claim(ns, a="1"), _service(ns)]})
    assert not made.get("failed"), made
    assert made["changed"] is True
    assert [o["kind"] for o in made["objects"]] == ["PersistentVolumeClaim", "Service"]
    claim = _read(k8s_cluster, ns, "pvc/k-0-data")
    assert claim["metadata"]["labels"] == {"a": "1"}

    # The API server filled in defaults (ports' protocol, the claim's volumeMode): no change.
    again = run_module("etcd_kube_object", {"objects": [_claim(ns, a="1"), _service(ns)]})
    assert again["changed"] is False, again
    assert (
        _read(k8s_cluster, ns, "pvc/k-0-data")["metadata"]["resourceVersion"]
        == (claim["metadata"]["resourceVersion"])
    )

    label = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "k-0-data", "namespace": ns, "labels": {"b": "2"}},
    }
    checked = run_module("etcd_kube_object", {"objects": [label], "state": "patched"}, check=True)
    assert checked["changed"] is True
    assert checked["objects"][0]["metadata"]["labels"] == {"a": "1", "b": "2"}
    assert _read(k8s_cluster, ns, "pvc/k-0-data")["metadata"]["labels"] == {"a": "1"}

    patched = run_module("etcd_kube_object", {"objects": [label], "state": "patched"}, diff=True)
    assert patched["changed"] is True
    assert _read(k8s_cluster, ns, "pvc/k-0-data")["metadata"]["labels"] == {"a": "1", "b": "2"}
    assert patched["diff"]["before"][0]["metadata"]["labels"] == {"a": "1"}


def test_refusals_change_nothing(k8s_cluster, k8s_namespace, kubeconfig):
    ns = k8s_namespace
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": ns}}
    refused = run_module("etcd_kube_object", {"objects": [_claim(ns), other]})
    assert refused.get("failed") and refused["reason"] == "InvalidInput", refused
    assert "cannot write 'ConfigMap'" in refused["msg"]

    missing = run_module("etcd_kube_object", {"objects": [_claim(ns)], "state": "patched"})
    assert missing.get("failed") and "does not exist" in missing["msg"], missing
    assert _read(k8s_cluster, ns, "pvc")["items"] == []

    bad = _claim(ns)
    bad["spec"]["accessModes"] = ["NoSuchMode"]
    invalid = run_module("etcd_kube_object", {"objects": [bad]})
    assert invalid.get("failed") and "HTTP 422" in invalid["msg"], invalid


def test_a_secret_is_written_and_its_values_never_come_back(k8s_cluster, k8s_namespace, kubeconfig):
    ns = k8s_namespace
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": "k-client-tls", "namespace": ns},
        "stringData": {"tls.crt": "CERT-PEM", "tls.key": "KEY-PEM"},
    }
    for attempt in ("created", "unchanged"):
        result = run_module("etcd_kube_object", {"objects": [secret]}, diff=True)
        assert not result.get("failed"), result
        assert result["changed"] is (attempt == "created")
        assert result["objects"][0]["data"] == {"tls.crt": "(hidden)", "tls.key": "(hidden)"}
        # (The task's own arguments echo the input: the role's task is no_log.)
        returned = repr([result["objects"], result.get("diff")])
        assert "KEY-PEM" not in returned and "S0VZLVBFTQ" not in returned, returned
    stored = _read(k8s_cluster, ns, "secret/k-client-tls")["data"]
    assert base64.b64decode(stored["tls.key"]) == b"KEY-PEM"
