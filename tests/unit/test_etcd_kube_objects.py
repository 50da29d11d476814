"""The decisions of etcd_kube_object: what counts as a change, what a merge patch makes, which
kinds may be written; and the order of calls put_objects makes (a fake API server)."""

from __future__ import annotations

from typing import Any

import pytest
from ansible.module_utils.etcd_errors import EtcdInputError
from ansible.module_utils.etcd_kube_objects import contains, merge_patch, object_path, put_objects


@pytest.mark.parametrize(
    ("current", "patch", "same"),
    [
        ({"a": 1, "b": 2}, {"a": 1}, True),
        ({"a": 1}, {"a": 2}, False),
        ({"a": 1}, {"b": None}, True),
        ({"a": 1, "b": 2}, {"b": None}, False),
        ({"m": {"x": "1", "y": "2"}}, {"m": {"x": "1"}}, True),
        ({"m": {"x": "1"}}, {"m": {"x": "1", "z": "3"}}, False),
        # Defaults the API server adds inside list items are no change of ours.
        (
            {"c": [{"name": "etcd", "terminationMessagePath": "/dev/x"}]},
            {"c": [{"name": "etcd"}]},
            True,
        ),
        ({"c": [{"name": "etcd"}, {"name": "b"}]}, {"c": [{"name": "etcd"}]}, False),
        ({"c": [{"name": "etcd"}]}, {"c": [{"name": "other"}]}, False),
        ({"a": "1"}, {"a": 1}, False),
        ({}, {"m": {}}, False),
        ({"m": None}, {"m": {"x": 1}}, False),
    ],
)
def test_contains(current: Any, patch: Any, same: bool) -> None:
    assert contains(current, patch) is same


@pytest.mark.parametrize(
    ("current", "patch", "merged"),
    [
        ({"a": 1}, {"b": 2}, {"a": 1, "b": 2}),
        ({"a": 1, "b": 2}, {"b": None}, {"a": 1}),
        ({"m": {"x": 1, "y": 2}}, {"m": {"y": 3}}, {"m": {"x": 1, "y": 3}}),
        ({"l": [1, 2]}, {"l": [3]}, {"l": [3]}),
        ({"a": "s"}, {"a": {"b": 1}}, {"a": {"b": 1}}),
    ],
)
def test_merge_patch(current: Any, patch: Any, merged: Any) -> None:
    before = repr(current)
    assert merge_patch(current, patch) == merged
    assert repr(current) == before, "the input is left as it was"


def _pod(name: str = "e-0", **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", **meta},
    }


def test_paths_of_the_kinds_written():
    assert object_path(_pod()) == ("/api/v1/namespaces/ns/pods", "e-0")
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "e"}}
    assert object_path(budget, "ns") == ("/apis/policy/v1/namespaces/ns/poddisruptionbudgets", "e")


@pytest.mark.parametrize(
    ("obj", "words"),
    [
        (
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}},
            "cannot write 'ConfigMap'",
        ),
        (
            {"apiVersion": "apps/v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"}},
            "cannot write 'Pod' (apps/v1)",
        ),
        (
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "n"}},
            "needs metadata.name",
        ),
        ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}, "and a namespace"),
        ("not an object", "must be a mapping"),
    ],
)
def test_refused_objects(obj: Any, words: str) -> None:
    with pytest.raises(EtcdInputError, match=words.replace("(", r"\(").replace(")", r"\)")):
        object_path(obj)


class FakeApi:
    def __init__(self, objects: dict[str, dict[str, Any]]) -> None:
        self.objects = objects
        self.calls: list[tuple[str, str]] = []

    def get(self, path: str, query: dict[str, str] | None = None) -> dict[str, Any] | None:
        self.calls.append(("GET", path))
        return self.objects.get(path)

    def send(self, method: str, path: str, body: Any, content_type: str = "", query: Any = None):
        self.calls.append((method, path))
        if method == "POST":
            self.objects[f"{path}/{body['metadata']['name']}"] = body
            return body
        # A status subresource stores into its object, as the API server does.
        path = path.removesuffix("/status")
        self.objects[path] = merge_patch(self.objects[path], body)
        return self.objects[path]


PODS = "/api/v1/namespaces/ns/pods"


def test_an_object_as_wanted_is_not_written():
    api = FakeApi({f"{PODS}/e-0": _pod(labels={"a": "1", "b": "2"})})
    result = put_objects(api, [_pod(labels={"a": "1"})], "present", check=False)
    assert result["changed"] is False
    assert api.calls == [("GET", f"{PODS}/e-0")]
    assert result["objects"][0]["metadata"]["labels"] == {"a": "1", "b": "2"}


def test_missing_objects_are_created_and_others_patched_in_order():
    api = FakeApi({f"{PODS}/e-1": _pod("e-1", labels={"a": "1"})})
    result = put_objects(api, [_pod("e-0"), _pod("e-1", labels={"a": "2"})], "present", False)
    assert result["changed"] is True
    assert api.calls == [
        ("GET", f"{PODS}/e-0"),
        ("POST", PODS),
        ("GET", f"{PODS}/e-1"),
        ("PATCH", f"{PODS}/e-1"),
    ]
    assert [o["metadata"]["name"] for o in result["objects"]] == ["e-0", "e-1"]
    assert result["diff"]["before"][1]["metadata"]["labels"] == {"a": "1"}
    assert result["diff"]["after"][1]["metadata"]["labels"] == {"a": "2"}


def test_created_makes_what_is_missing_and_never_touches_what_exists():
    api = FakeApi({f"{PODS}/e-1": _pod("e-1", labels={"a": "1"})})
    result = put_objects(api, [_pod("e-0"), _pod("e-1", labels={"a": "2"})], "created", False)
    assert result["changed"] is True
    assert api.calls == [("GET", f"{PODS}/e-0"), ("POST", PODS), ("GET", f"{PODS}/e-1")]
    assert api.objects[f"{PODS}/e-1"]["metadata"]["labels"] == {"a": "1"}
    assert result["objects"][1]["metadata"]["labels"] == {"a": "1"}


def test_check_mode_only_reads():
    api = FakeApi({f"{PODS}/e-1": _pod("e-1", labels={"a": "1"})})
    result = put_objects(api, [_pod("e-0"), _pod("e-1", labels={"a": "2"})], "present", True)
    assert result["changed"] is True
    assert [c[0] for c in api.calls] == ["GET", "GET"]
    assert result["objects"][1]["metadata"]["labels"] == {"a": "2"}
    assert api.objects[f"{PODS}/e-1"]["metadata"]["labels"] == {"a": "1"}


def test_patching_a_missing_object_is_refused():
    with pytest.raises(EtcdInputError, match="e-0 does not exist"):
        put_objects(FakeApi({}), [_pod(labels={"a": "1"})], "patched", False)


def test_one_refused_object_means_nothing_is_written():
    api = FakeApi({})
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"}}
    with pytest.raises(EtcdInputError, match="ConfigMap"):
        put_objects(api, [_pod(), other], "present", False)
    assert api.calls == []


@pytest.mark.parametrize("check", [False, True])
def test_a_secret_is_written_but_its_values_never_come_back(check):
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "e-client-tls", "namespace": "ns"},
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": "Q0VSVA==", "tls.key": "S0VZ"},
    }
    api = FakeApi({})
    result = put_objects(api, [secret], "present", check)
    assert result["changed"] is True
    if not check:
        assert api.objects["/api/v1/namespaces/ns/secrets/e-client-tls"]["data"] == secret["data"]
    shown = result["objects"][0]
    assert shown["data"] == {"tls.crt": "(hidden)", "tls.key": "(hidden)"}
    assert "S0VZ" not in repr(result) and "Q0VSVA" not in repr(result)


def test_a_secret_given_as_string_data_is_compared_as_stored():
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "e-ca", "namespace": "ns"},
        "stringData": {"ca.crt": "CERT"},
    }
    api = FakeApi({})
    assert put_objects(api, [secret], "present", False)["changed"] is True
    assert api.objects["/api/v1/namespaces/ns/secrets/e-ca"]["data"] == {"ca.crt": "Q0VSVA=="}
    assert put_objects(api, [secret], "present", False)["changed"] is False


BACKUPS = "/apis/etcd.runbook.io/v1alpha1/namespaces/ns/etcdbackups"


def _backup(status: dict | None = None, **spec: Any) -> dict:
    obj = {
        "apiVersion": "etcd.runbook.io/v1alpha1",
        "kind": "EtcdBackup",
        "metadata": {"name": "b", "namespace": "ns"},
        "spec": spec,
    }
    if status is not None:
        obj["status"] = status
    return obj


def test_status_is_written_through_the_subresource_and_nothing_else_is_sent():
    api = FakeApi({f"{BACKUPS}/b": _backup({"phase": "Running"}, clusterName="c")})
    wanted = _backup({"lastSnapshot": {"revision": 7}}, clusterName="other")
    result = put_objects(api, [wanted], "status", False)
    assert result["changed"] is True
    assert api.calls == [("GET", f"{BACKUPS}/b"), ("PATCH", f"{BACKUPS}/b/status")]
    stored = api.objects[f"{BACKUPS}/b"]
    assert stored["spec"] == {"clusterName": "c"}  # the spec given was not sent
    assert stored["status"] == {"phase": "Running", "lastSnapshot": {"revision": 7}}


def test_a_status_already_so_is_not_written():
    api = FakeApi({f"{BACKUPS}/b": _backup({"phase": "Running", "lastSnapshot": {"revision": 7}})})
    result = put_objects(api, [_backup({"lastSnapshot": {"revision": 7}})], "status", False)
    assert result["changed"] is False
    assert api.calls == [("GET", f"{BACKUPS}/b")]


@pytest.mark.parametrize(
    ("objects", "match"),
    [
        ([_pod()], "cannot write the status of 'Pod'"),
        ([_backup({"phase": "x"})], "b does not exist"),
    ],
)
def test_status_of_other_kinds_or_missing_objects_is_refused(objects, match):
    api = FakeApi({})
    with pytest.raises(EtcdInputError, match=match):
        put_objects(api, objects, "status", False)
    assert [c for c in api.calls if c[0] != "GET"] == []
