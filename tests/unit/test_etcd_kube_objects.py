"""The decisions of etcd_kube_object: what counts as a change, what a merge patch makes, which
kinds may be written, which existing objects are the run's; and the calls put_objects and
delete_objects make (a fake API server)."""

from __future__ import annotations

from typing import Any

import pytest

from etcd_runbook.clients.etcd_errors import EtcdInputError, EtcdModuleError
from etcd_runbook.operations.etcd_kube_objects import (
    NameTakenError,
    contains,
    delete_objects,
    merge_patch,
    not_owned,
    object_path,
    put_objects,
)


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


def _ref(uid: str = "u1", kind: str = "EtcdCluster", controller: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "etcd.runbook.io/v1alpha1",
        "kind": kind,
        "name": "e",
        "uid": uid,
        "controller": controller,
    }


def _ours(name: str = "e-0", **meta: Any) -> dict[str, Any]:
    """A Pod of the cluster of uid u1, as the API server holds it."""
    return _pod(name, uid=f"pod-{name}", ownerReferences=[_ref()], **meta)


OWNER = {"uid": "u1"}
CLUSTER_MARKS = {"app.kubernetes.io/name": "etcd", "etcd.runbook.io/cluster": "e"}


def _claim(**meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "e-0-data", "namespace": "ns", **meta},
    }


def _restored(**meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "etcd.runbook.io/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": "e", "namespace": "ns", **meta},
    }


@pytest.mark.parametrize(
    ("current", "desired", "owner", "why"),
    [
        # Controlled by the resource the run acts for: the desired object's own reference...
        (_pod(ownerReferences=[_ref()]), _pod(ownerReferences=[_ref()]), {}, ""),
        # ... or owner.uid, for a patch that gives none.
        (_pod(ownerReferences=[_ref()]), _pod(), OWNER, ""),
        (_pod(ownerReferences=[_ref(controller=False), _ref()]), _pod(), OWNER, ""),
        # Another controller: another app's object, or a former EtcdCluster of that name's.
        (
            _pod(ownerReferences=[_ref("u9", kind="StatefulSet")]),
            _pod(ownerReferences=[_ref()]),
            OWNER,
            "its controller is StatefulSet e (uid u9)",
        ),
        (_pod(ownerReferences=[_ref("u9")]), _pod(), OWNER, "its controller is EtcdCluster e"),
        # An owner that is no controller does not make it ours.
        (_pod(ownerReferences=[_ref(controller=False)]), _pod(), OWNER, "has no controller"),
        (_pod(), _pod(ownerReferences=[_ref()]), OWNER, "it has no controller"),
        # Marks count only for the kinds made without a controller: a Pod carrying the
        # cluster's labels is still nobody's the run may write.
        (_pod(labels=CLUSTER_MARKS), _pod(), {**OWNER, "labels": CLUSTER_MARKS}, "no controller"),
        # No uid known (the EtcdCluster is gone): nothing controlled is ours.
        (_pod(ownerReferences=[_ref()]), _pod(), {}, "its controller is EtcdCluster e"),
        # A member claim: the cluster's labels (kept claims re-attach to a new EtcdCluster
        # of the same name, whatever its uid).
        (_claim(labels=CLUSTER_MARKS), _claim(), {**OWNER, "labels": CLUSTER_MARKS}, ""),
        (
            _claim(labels={**CLUSTER_MARKS, "etcd.runbook.io/member": "e-0"}),
            _claim(),
            {"labels": CLUSTER_MARKS},
            "",
        ),
        # Another app's claim of the member's name.
        (
            _claim(labels={"app": "db"}),
            _claim(),
            {**OWNER, "labels": CLUSTER_MARKS},
            "not marked app.kubernetes.io/name=etcd, etcd.runbook.io/cluster=e",
        ),
        # Another cluster's claim.
        (
            _claim(labels={**CLUSTER_MARKS, "etcd.runbook.io/cluster": "f"}),
            _claim(),
            {"labels": CLUSTER_MARKS},
            "not marked etcd.runbook.io/cluster=e",
        ),
        # A claim some controller owns (a StatefulSet's) is never taken by labels.
        (
            _claim(labels=CLUSTER_MARKS, ownerReferences=[_ref("u9", kind="StatefulSet")]),
            _claim(),
            {**OWNER, "labels": CLUSTER_MARKS},
            "its controller is StatefulSet",
        ),
        # No marks given: nothing without a controller is the run's.
        (_claim(labels=CLUSTER_MARKS), _claim(), OWNER, "it has no controller"),
        # The EtcdCluster a restore made: by the restore's uid in its annotation.
        (
            _restored(annotations={"etcd.runbook.io/restore-uid": "r1"}),
            _restored(),
            {"uid": "r1", "annotations": {"etcd.runbook.io/restore-uid": "r1"}},
            "",
        ),
        # The resource the run acts for: a record on the EtcdCluster itself.
        (_restored(uid="u1"), _restored(), {**OWNER, "labels": CLUSTER_MARKS}, ""),
        (_restored(uid="u2"), _restored(), {**OWNER, "labels": CLUSTER_MARKS}, "not marked"),
        (
            _restored(annotations={"etcd.runbook.io/restore-uid": "r0"}),
            _restored(),
            {"uid": "r1", "annotations": {"etcd.runbook.io/restore-uid": "r1"}},
            "not marked etcd.runbook.io/restore-uid=r1",
        ),
    ],
)
def test_which_existing_objects_are_the_runs(current, desired, owner, why) -> None:
    found = not_owned(current, desired, owner)
    assert (found == "") if not why else (why in found), found


def test_an_owner_uid_that_contradicts_the_objects_own_reference_is_refused() -> None:
    with pytest.raises(EtcdInputError, match=r"owner\.uid is 'u2'"):
        not_owned(_ours(), _pod(ownerReferences=[_ref()]), {"uid": "u2"})


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
        self.bodies: list[Any] = []

    def get(self, path: str, query: dict[str, str] | None = None) -> dict[str, Any] | None:
        self.calls.append(("GET", path))
        if query and "labelSelector" in query:
            wanted = dict(term.split("=") for term in query["labelSelector"].split(","))
            return {
                "items": [
                    obj
                    for key, obj in self.objects.items()
                    if key.rsplit("/", 1)[0] == path
                    and wanted.items() <= (obj["metadata"].get("labels") or {}).items()
                ]
            }
        return self.objects.get(path)

    def send(self, method: str, path: str, body: Any, content_type: str = "", query: Any = None):
        self.calls.append((method, path))
        self.bodies.append(body)
        if method == "DELETE":
            current = self.objects.get(path)
            if current is None:
                raise EtcdModuleError(f"{path} not found", reason="NotFound")
            if current["metadata"].get("uid") != body["preconditions"]["uid"]:
                raise EtcdModuleError(
                    "HTTP 409: the UID in the precondition does not match the UID in record",
                    reason="Conflict",
                )
            return self.objects.pop(path)
        if method == "POST":
            self.objects[f"{path}/{body['metadata']['name']}"] = body
            return body
        # A status subresource stores into its object, as the API server does.
        path = path.removesuffix("/status")
        self.objects[path] = merge_patch(self.objects[path], body)
        return self.objects[path]


PODS = "/api/v1/namespaces/ns/pods"


def test_an_object_as_wanted_is_not_written():
    api = FakeApi({f"{PODS}/e-0": _ours(labels={"a": "1", "b": "2"})})
    result = put_objects(api, [_pod(labels={"a": "1"})], "present", check=False, owner=OWNER)
    assert result["changed"] is False
    assert api.calls == [("GET", f"{PODS}/e-0")]
    assert result["objects"][0]["metadata"]["labels"] == {"a": "1", "b": "2"}


def test_missing_objects_are_created_and_others_patched_in_order():
    api = FakeApi({f"{PODS}/e-1": _ours("e-1", labels={"a": "1"})})
    wanted = [_pod("e-0"), _pod("e-1", labels={"a": "2"})]
    result = put_objects(api, wanted, "present", False, owner=OWNER)
    assert result["changed"] is True
    # Every object is read and checked before the first write.
    assert api.calls == [
        ("GET", f"{PODS}/e-0"),
        ("GET", f"{PODS}/e-1"),
        ("POST", PODS),
        ("PATCH", f"{PODS}/e-1"),
    ]
    # The patch carries the uid read, as a precondition.
    assert api.bodies[-1]["metadata"]["uid"] == "pod-e-1"
    assert [o["metadata"]["name"] for o in result["objects"]] == ["e-0", "e-1"]
    assert result["diff"]["before"][1]["metadata"]["labels"] == {"a": "1"}
    assert result["diff"]["after"][1]["metadata"]["labels"] == {"a": "2"}


def test_created_makes_what_is_missing_and_never_touches_what_exists():
    api = FakeApi({f"{PODS}/e-1": _ours("e-1", labels={"a": "1"})})
    wanted = [_pod("e-0"), _pod("e-1", labels={"a": "2"})]
    result = put_objects(api, wanted, "created", False, owner=OWNER)
    assert result["changed"] is True
    assert api.calls == [("GET", f"{PODS}/e-0"), ("GET", f"{PODS}/e-1"), ("POST", PODS)]
    assert api.objects[f"{PODS}/e-1"]["metadata"]["labels"] == {"a": "1"}
    assert result["objects"][1]["metadata"]["labels"] == {"a": "1"}


def test_check_mode_only_reads():
    api = FakeApi({f"{PODS}/e-1": _ours("e-1", labels={"a": "1"})})
    wanted = [_pod("e-0"), _pod("e-1", labels={"a": "2"})]
    result = put_objects(api, wanted, "present", True, owner=OWNER)
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
        "metadata": {"name": "e-ca", "namespace": "ns", "ownerReferences": [_ref()]},
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


@pytest.mark.parametrize("state", ["present", "created", "patched"])
def test_an_object_of_another_owner_is_refused_and_nothing_is_written(state):
    """Another app's Service of the cluster's name, given second: the first object is not
    written either."""
    services = "/api/v1/namespaces/ns/services"
    foreign = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "e", "namespace": "ns", "uid": "s9", "labels": {"app": "web"}},
    }
    api = FakeApi({f"{services}/e": foreign, f"{PODS}/e-0": _ours()})
    mine = {**foreign, "metadata": {"name": "e", "namespace": "ns", "ownerReferences": [_ref()]}}
    first = _pod("e-0", labels={"a": "1"}, ownerReferences=[_ref()])
    with pytest.raises(NameTakenError) as refused:
        put_objects(api, [first, mine], state, False)
    assert [c[0] for c in api.calls] == ["GET", "GET"]
    assert refused.value.reason == "NameTaken"
    assert "Service ns/e exists and is not this resource's to write (it has no controller)" in (
        str(refused.value)
    )
    result = refused.value.as_result()
    assert result["object"] == {"kind": "Service", "namespace": "ns", "name": "e"}
    assert result["owner"] == "no controller"


def test_a_patch_never_replaces_the_owner_references():
    """The object's own list (a second, non-controller owner included) stays as it is."""
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "c1"}
    api = FakeApi({f"{PODS}/e-0": _ours(labels={"a": "1"})})
    api.objects[f"{PODS}/e-0"]["metadata"]["ownerReferences"].append(other)
    wanted = _pod(labels={"a": "2"}, ownerReferences=[_ref()])
    result = put_objects(api, [wanted], "present", False)
    assert "ownerReferences" not in api.bodies[-1]["metadata"]
    assert result["objects"][0]["metadata"]["ownerReferences"] == [_ref(), other]
    # Only the references differ: nothing to write.
    api.calls.clear()
    again = put_objects(api, [_pod(labels={"a": "2"}, ownerReferences=[_ref()])], "present", False)
    assert again["changed"] is False and api.calls == [("GET", f"{PODS}/e-0")]


def test_a_member_claim_is_written_by_the_clusters_marks():
    claims = "/api/v1/namespaces/ns/persistentvolumeclaims"
    api = FakeApi({f"{claims}/e-0-data": _claim(uid="c1", labels=dict(CLAIM_LABELS))})
    patch = _claim(annotations={"etcd.runbook.io/member-id": "7"})
    result = put_objects(api, [patch], "patched", False, owner={"labels": CLUSTER_MARKS})
    assert result["changed"] is True
    assert api.objects[f"{claims}/e-0-data"]["metadata"]["annotations"] == {
        "etcd.runbook.io/member-id": "7"
    }
    api.objects[f"{claims}/e-0-data"]["metadata"]["labels"] = {"app": "db"}
    with pytest.raises(NameTakenError, match="PersistentVolumeClaim ns/e-0-data"):
        put_objects(api, [patch], "present", False, owner={"labels": CLUSTER_MARKS})


CLAIM_LABELS = {**CLUSTER_MARKS, "etcd.runbook.io/member": "e-0"}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_deleting_marks_first_then_deletes_with_the_uid_and_waits():
    api = FakeApi({f"{PODS}/e-0": _ours(), f"{PODS}/e-2": _ours("e-2")})
    mark = {"etcd.runbook.io/deleted-by-runbook": "roll"}
    doomed = [_pod("e-0", annotations=mark), _pod("e-1", annotations=mark), _pod("e-2")]
    clock = Clock()
    result = delete_objects(
        api, doomed, False, OWNER, force=["e-2"], wait_timeout=5, sleep=clock.sleep, clock=clock
    )
    assert result["changed"] is True
    assert [o["metadata"]["name"] for o in result["objects"]] == ["e-0", "e-2"]
    assert api.calls == [
        ("GET", f"{PODS}/e-0"),
        ("GET", f"{PODS}/e-1"),  # gone already: nothing to do
        ("GET", f"{PODS}/e-2"),
        ("PATCH", f"{PODS}/e-0"),
        ("DELETE", f"{PODS}/e-0"),
        ("GET", f"{PODS}/e-0"),
        ("DELETE", f"{PODS}/e-2"),
        ("GET", f"{PODS}/e-2"),
    ]
    patch, delete, force = api.bodies[0], api.bodies[1], api.bodies[2]
    assert patch == {"metadata": {"annotations": mark, "uid": "pod-e-0"}}
    assert delete["preconditions"] == {"uid": "pod-e-0"} and "gracePeriodSeconds" not in delete
    assert delete["propagationPolicy"] == "Background"
    assert force["gracePeriodSeconds"] == 0


def test_deleting_an_object_of_another_owner_is_refused_and_nothing_is_written():
    foreign = _pod("e-1", uid="p9", ownerReferences=[_ref("u9", kind="ReplicaSet")])
    api = FakeApi({f"{PODS}/e-0": _ours(), f"{PODS}/e-1": foreign})
    with pytest.raises(NameTakenError, match=r"Pod ns/e-1 .* to delete \(its controller is Rep"):
        delete_objects(api, [_pod("e-0"), _pod("e-1")], False, OWNER)
    assert [c[0] for c in api.calls] == ["GET", "GET"]
    assert set(api.objects) == {f"{PODS}/e-0", f"{PODS}/e-1"}


def test_an_object_made_again_under_the_name_is_never_deleted():
    """Read as ours, then replaced by another before the DELETE: its uid differs, the API
    server refuses (the fake does what kube-apiserver does with preconditions.uid)."""

    class Replacing(FakeApi):
        def send(self, method, path, body, content_type="", query=None):
            if method == "DELETE":
                self.objects[path] = _pod("e-0", uid="other")
            return super().send(method, path, body, content_type, query)

    api = Replacing({f"{PODS}/e-0": _ours()})
    with pytest.raises(EtcdModuleError, match="UID in the precondition"):
        delete_objects(api, [_pod("e-0")], False, OWNER)
    assert api.objects[f"{PODS}/e-0"]["metadata"]["uid"] == "other"


def test_a_wait_that_outlasts_its_timeout_fails():
    class Lingering(FakeApi):
        def send(self, method, path, body, content_type="", query=None):
            self.calls.append((method, path))
            return {}

    api = Lingering({f"{PODS}/e-0": _ours()})
    clock = Clock()
    with pytest.raises(EtcdModuleError, match="still there 2 s") as late:
        delete_objects(
            api, [_pod("e-0")], False, OWNER, wait_timeout=2, sleep=clock.sleep, clock=clock
        )
    assert late.value.reason == "Timeout"


def test_a_selector_finds_what_to_delete_and_leaves_what_is_not_the_runs():
    services = "/api/v1/namespaces/ns/services"
    labels = {"etcd.runbook.io/cluster": "e"}
    ours = {"metadata": {"name": "e", "uid": "s1", "labels": labels, "ownerReferences": [_ref()]}}
    copied = {"metadata": {"name": "e-copy", "uid": "s2", "labels": labels}}
    api = FakeApi({f"{services}/e": ours, f"{services}/e-copy": copied})
    every = {"apiVersion": "v1", "kind": "Service", "metadata": {"namespace": "ns"}}
    checked = delete_objects(api, [every], True, OWNER, selector="etcd.runbook.io/cluster=e")
    assert [o["metadata"]["name"] for o in checked["objects"]] == ["e"]
    assert [c[0] for c in api.calls] == ["GET"]
    result = delete_objects(api, [every], False, OWNER, selector="etcd.runbook.io/cluster=e")
    assert result["kept"] == [{"kind": "Service", "name": "e-copy", "why": "it has no controller"}]
    assert set(api.objects) == {f"{services}/e-copy"}
