"""etcd_kube_object against the real local Kubernetes: creates what is missing, writes
nothing when all is as given, merge-patches, reads only in check mode, refuses what it may not
write; writes and deletes only what the run owns (NameTaken otherwise, nothing changed), each
with the uid read as a precondition the API server enforces."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from testbed.ansible_adhoc import run_module

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


def _service(ns: str, owner: dict[str, Any] | None = None, name: str = "k") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if owner:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {"clusterIP": "None", "ports": [{"name": "client", "port": 2379}]},
    }


def _owner(k8s_cluster, ns: str, name: str = "owner") -> dict[str, Any]:
    """A real object to stand for the resource a run acts for (an owner that does not exist
    would have its dependents collected): its controller ownerReference."""
    k8s_cluster.kubectl("-n", ns, "create", "configmap", name)
    made = _read(k8s_cluster, ns, f"configmap/{name}")
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": name,
        "uid": made["metadata"]["uid"],
        "controller": True,
    }


def _read(k8s_cluster, ns: str, what: str) -> dict[str, Any]:
    return json.loads(k8s_cluster.kubectl("-n", ns, "get", what, "-o", "json").stdout)


def test_creates_then_leaves_alone_then_patches(k8s_cluster, k8s_namespace, kubeconfig):
    ns = k8s_namespace
    owner = _owner(k8s_cluster, ns)
    args = {"objects": [_claim(ns, a="1"), _service(ns, owner)], "owner": {"labels": {"a": "1"}}}
    made = run_module("etcd_kube_object", args)
    assert not made.get("failed"), made
    assert made["changed"] is True
    assert [o["kind"] for o in made["objects"]] == ["PersistentVolumeClaim", "Service"]
    claim = _read(k8s_cluster, ns, "pvc/k-0-data")
    assert claim["metadata"]["labels"] == {"a": "1"}

    # The API server filled in defaults (ports' protocol, the claim's volumeMode): no change.
    again = run_module("etcd_kube_object", args)
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
    mine = {"labels": {"a": "1"}}
    checked = run_module(
        "etcd_kube_object", {"objects": [label], "state": "patched", "owner": mine}, check=True
    )
    assert checked["changed"] is True
    assert checked["objects"][0]["metadata"]["labels"] == {"a": "1", "b": "2"}
    assert _read(k8s_cluster, ns, "pvc/k-0-data")["metadata"]["labels"] == {"a": "1"}

    patched = run_module(
        "etcd_kube_object", {"objects": [label], "state": "patched", "owner": mine}, diff=True
    )
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
    owner = _owner(k8s_cluster, ns)
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": "k-client-tls", "namespace": ns, "ownerReferences": [owner]},
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


def _fingerprint(k8s_cluster, ns: str, what: str) -> tuple[str, str, Any]:
    obj = _read(k8s_cluster, ns, what)
    meta = obj["metadata"]
    return meta["uid"], meta["resourceVersion"], {k: v for k, v in obj.items() if k != "status"}


def test_what_the_run_does_not_own_is_never_written_nor_deleted(
    k8s_cluster, k8s_namespace, kubeconfig
):
    """Another app's Service, Secret and claim under the names a cluster's run writes, and a
    Service of another owner: each refused as NameTaken, naming it and its owner, with nothing
    written (the first object, missing, is not created either) or deleted."""
    ns = k8s_namespace
    ours, theirs = _owner(k8s_cluster, ns), _owner(k8s_cluster, ns, "theirs")
    k8s_cluster.kubectl("-n", ns, "create", "service", "clusterip", "web", "--tcp=80:8080")
    k8s_cluster.kubectl("-n", ns, "create", "secret", "generic", "k-ca", "--from-literal=x=1")
    k8s_cluster.kubectl("-n", ns, "apply", "-f", "-", input=json.dumps(_claim(ns, app="db")))
    k8s_cluster.kubectl(
        "-n", ns, "apply", "-f", "-", input=json.dumps(_service(ns, theirs, "other"))
    )
    what = ["service/web", "secret/k-ca", "pvc/k-0-data", "service/other"]
    before = [_fingerprint(k8s_cluster, ns, w) for w in what]
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "k-ca", "namespace": ns, "ownerReferences": [ours]},
        "stringData": {"ca.key": "KEY"},
    }
    marks = {"uid": ours["uid"], "labels": {"app.kubernetes.io/name": "etcd"}}
    claim, web, other = "PersistentVolumeClaim", "Service", "Service"
    patched, absent = {"state": "patched", "owner": marks}, {"state": "absent", "owner": marks}
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"objects": [_service(ns, ours, "new"), _service(ns, ours, "web")]}, web, "web"),
        ({"objects": [secret], "state": "created"}, "Secret", "k-ca"),
        ({"objects": [_claim(ns)], "owner": marks}, claim, "k-0-data"),
        ({"objects": [_service(ns, ours, "other")]}, other, "other"),
        ({"objects": [_service(ns, name="web")], **patched}, web, "web"),
        ({"objects": [_claim(ns)], **absent}, claim, "k-0-data"),
        ({"objects": [_service(ns, name="other")], **absent}, other, "other"),
    ]  # fmt: skip
    for args, kind, name in cases:
        refused = run_module("etcd_kube_object", args)
        assert refused.get("failed") and refused["reason"] == "NameTaken", (args, refused)
        assert refused["object"] == {"kind": kind, "namespace": ns, "name": name}
        assert f"{kind} {ns}/{name} exists and is not this resource's" in refused["msg"]
        # (The task's own arguments echo the input: the role's task is no_log.)
        assert "KEY" not in json.dumps([refused["msg"], refused["object"], refused["owner"]])
    assert _read(k8s_cluster, ns, "service/other") and refused["owner"].startswith(
        f"ConfigMap theirs (uid {theirs['uid']})"
    )
    assert [_fingerprint(k8s_cluster, ns, w) for w in what] == before
    names = [s["metadata"]["name"] for s in _read(k8s_cluster, ns, "services")["items"]]
    assert sorted(names) == ["other", "web"], "nothing was created either"


def test_deletion_takes_only_the_runs_own_and_waits_until_it_is_gone(
    k8s_cluster, k8s_namespace, kubeconfig
):
    ns = k8s_namespace
    ours = _owner(k8s_cluster, ns)
    labels = {"app.kubernetes.io/name": "etcd"}
    mine = _service(ns, ours, "mine")
    mine["metadata"]["labels"] = labels
    lookalike = _service(ns, name="lookalike")
    lookalike["metadata"]["labels"] = labels
    for obj in (mine, lookalike, _claim(ns, **labels)):
        k8s_cluster.kubectl("-n", ns, "apply", "-f", "-", input=json.dumps(obj))
    owner = {"uid": ours["uid"], "labels": labels}
    every = [
        {"apiVersion": "v1", "kind": kind, "metadata": {"namespace": ns}}
        for kind in ("Service", "PersistentVolumeClaim")
    ]
    args = {
        "objects": every,
        "state": "absent",
        "owner": owner,
        "selector": "app.kubernetes.io/name=etcd",
    }
    checked = run_module("etcd_kube_object", args, check=True)
    assert checked["changed"] is True
    assert sorted(o["metadata"]["name"] for o in checked["objects"]) == ["k-0-data", "mine"]
    assert len(_read(k8s_cluster, ns, "services")["items"]) == 2, "check mode deletes nothing"

    done = run_module("etcd_kube_object", {**args, "wait_timeout": 60})
    assert not done.get("failed"), done
    assert done["kept"] == [{"kind": "Service", "name": "lookalike", "why": "it has no controller"}]
    names = [s["metadata"]["name"] for s in _read(k8s_cluster, ns, "services")["items"]]
    assert names == ["lookalike"]
    # The claim carried the marks; with wait_timeout it is gone when the module returns (the
    # pvc-protection finalizer lets an unused claim go at once).
    assert _read(k8s_cluster, ns, "pvc")["items"] == []
    again = run_module("etcd_kube_object", {**args, "wait_timeout": 60})
    assert again["changed"] is False and again["objects"] == []


class _Replacing:
    """A client over the real API server that, just before each write, deletes the object
    the run read and makes another of the same name: what a tenant racing the run does."""

    def __init__(self, client: Any, k8s_cluster: Any, ns: str, manifest: dict[str, Any]):
        self.client, self.k8s, self.ns, self.manifest = client, k8s_cluster, ns, manifest

    def get(self, path: str, query: dict[str, str] | None = None) -> Any:
        return self.client.get(path, query)

    def send(self, method: str, path: str, body: Any, content_type: str = "", query: Any = None):
        name = self.manifest["metadata"]["name"]
        self.k8s.kubectl("-n", self.ns, "delete", "service", name, "--wait=true")
        self.k8s.kubectl("-n", self.ns, "apply", "-f", "-", input=json.dumps(self.manifest))
        return self.client.send(method, path, body, content_type or "application/json", query)


def test_an_object_made_again_meanwhile_is_never_the_one_written(k8s_cluster, k8s_namespace):
    """The uid read goes with every patch and deletion; kube-apiserver refuses either when the
    object under that name is another by then."""
    from etcd_runbook.clients.etcd_errors import EtcdModuleError
    from etcd_runbook.clients.etcd_kube import KubeReader, credentials
    from etcd_runbook.operations.etcd_kube_objects import delete_objects, put_objects

    ns = k8s_namespace
    ours = _owner(k8s_cluster, ns)
    k8s_cluster.kubectl("-n", ns, "apply", "-f", "-", input=json.dumps(_service(ns, ours)))
    client = KubeReader(credentials(str(k8s_cluster.kubeconfig), None), 30)
    # The replacement says the same owner: only its uid tells it from the one read.
    racing = _Replacing(client, k8s_cluster, ns, _service(ns, ours))
    patch = {
        **_service(ns, ours),
        "metadata": {**_service(ns, ours)["metadata"], "labels": {"b": "2"}},
    }
    with pytest.raises(EtcdModuleError) as refused:
        put_objects(racing, [patch], "present", False)
    assert "uid" in str(refused.value).lower(), refused.value
    assert "labels" not in _read(k8s_cluster, ns, "service/k")["metadata"]

    replaced = _read(k8s_cluster, ns, "service/k")["metadata"]["uid"]
    with pytest.raises(EtcdModuleError, match="UID in the precondition") as conflict:
        delete_objects(racing, [_service(ns)], False, {"uid": ours["uid"]})
    assert conflict.value.reason == "Conflict"
    assert _read(k8s_cluster, ns, "service/k")["metadata"]["uid"] != replaced
