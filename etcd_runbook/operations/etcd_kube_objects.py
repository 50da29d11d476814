"""Create-or-merge, merge-patch, status merge-patch and deletion of the few kinds the
runbooks write (etcd_kube_object), each only of objects the run owns.

Decisions are pure functions (`contains`, `merge_patch`, `object_path`, `not_owned`), tested
without a server; `put_objects` and `delete_objects` carry them out with a `KubeReader`. A
write is sent only when the object would change: `changed` is the comparison, and check mode
answers from it without writing anything.

Ownership (docs/design-decisions.md, "The operator writes only what it owns"): an object
that exists is written or deleted only when its controller ownerReference is the resource the
run acts for (by uid), or, for the kinds the runbooks make without an owner on purpose (a
member's claim outlives its EtcdCluster; a restored EtcdCluster its EtcdRestore), when it
carries the marks the run was given. Anything else is refused as `NameTaken` before the first
write. Every write to an object read carries that object's uid as a precondition, so an
object deleted and made again under the same name in between is never the one written.
"""

from __future__ import annotations

import base64
import copy
import time
from collections.abc import Callable
from typing import Any, Protocol

from etcd_runbook.clients.etcd_errors import EtcdInputError, EtcdModuleError
from etcd_runbook.clients.etcd_kube import namespaced

# (apiVersion, kind) -> plural: no discovery round trip, and nothing else can be written.
KINDS = {
    ("v1", "Pod"): "pods",
    ("v1", "PersistentVolumeClaim"): "persistentvolumeclaims",
    ("v1", "Service"): "services",
    ("v1", "Secret"): "secrets",
    ("v1", "ServiceAccount"): "serviceaccounts",
    ("policy/v1", "PodDisruptionBudget"): "poddisruptionbudgets",
    ("batch/v1", "Job"): "jobs",
    ("batch/v1", "CronJob"): "cronjobs",
    ("rbac.authorization.k8s.io/v1", "Role"): "roles",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "rolebindings",
    ("etcd.runbook.io/v1alpha1", "EtcdCluster"): "etcdclusters",
    ("etcd.runbook.io/v1alpha1", "EtcdBackup"): "etcdbackups",
    ("etcd.runbook.io/v1alpha1", "EtcdRestore"): "etcdrestores",
}
# Kinds whose status a runbook may write (state `status`): a backup Job records its snapshot.
STATUS_KINDS = {
    ("etcd.runbook.io/v1alpha1", "EtcdBackup"),
    ("etcd.runbook.io/v1alpha1", "EtcdRestore"),
}
# Kinds the runbooks make without a controller on purpose, so they are matched by the marks
# the run gives (`owner.labels`, `owner.annotations`) instead: a member's claim (deleting an
# EtcdCluster keeps its data, and an EtcdCluster made again under that name takes the claims
# back) and the EtcdCluster a restore makes (it must outlive its EtcdRestore).
UNOWNED_KINDS = {
    ("v1", "PersistentVolumeClaim"),
    ("etcd.runbook.io/v1alpha1", "EtcdCluster"),
}
MERGE_PATCH = "application/merge-patch+json"
NAME_TAKEN = "NameTaken"


class Client(Protocol):
    def get(self, path: str, query: dict[str, str] | None = None) -> dict[str, Any] | None: ...

    def send(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        content_type: str = ...,
        query: dict[str, str] | None = ...,
    ) -> dict[str, Any]: ...


def object_path(
    obj: dict[str, Any], namespace: str | None = None, named: bool = True
) -> tuple[str, str]:
    """The collection path and name of `obj`; its kind must be one of KINDS. With `named`
    false the name may be missing (every object of the kind a selector matches)."""
    if not isinstance(obj, dict):
        raise EtcdInputError(f"an object must be a mapping, got {type(obj).__name__}")
    api_version, kind = obj.get("apiVersion", "v1"), obj.get("kind")
    plural = KINDS.get((api_version, kind))  # type: ignore[arg-type]
    if plural is None:
        known = ", ".join(f"{k} ({v})" for v, k in KINDS)
        raise EtcdInputError(f"cannot write {kind!r} ({api_version}): only {known}")
    meta = obj.get("metadata") or {}
    name, ns = meta.get("name"), meta.get("namespace") or namespace
    if (named and not name) or not ns:
        raise EtcdInputError(f"a {kind} needs metadata.name and a namespace")
    return namespaced(api_version, ns, plural), str(name or "")


def contains(current: Any, patch: Any) -> bool:
    """Whether `current` already says all that `patch` says (RFC 7386 merge patch, where
    null removes a key). A list says the same when each item does, item by item: the API
    server adds defaults inside list items (a container's terminationMessagePath), which are
    no change of ours."""
    if isinstance(patch, list):
        return (
            isinstance(current, list)
            and len(current) == len(patch)
            and all(contains(c, p) for c, p in zip(current, patch, strict=True))
        )
    if not isinstance(patch, dict):
        return bool(current == patch)
    if not isinstance(current, dict):
        return False
    for key, value in patch.items():
        if value is None:
            if key in current:
                return False
        elif key not in current or not contains(current[key], value):
            return False
    return True


def merge_patch(current: Any, patch: Any) -> Any:
    """`current` merge-patched with `patch` (RFC 7386): what the API server would store."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    merged = copy.deepcopy(current) if isinstance(current, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def shown(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as the module returns it: a Secret without its values (the key names stay),
    so no registered result, diff or log ever holds the key material it wrote."""
    if not isinstance(obj, dict) or obj.get("kind") != "Secret":
        return obj
    hidden = {k: v for k, v in obj.items() if k not in ("data", "stringData")}
    for field in ("data", "stringData"):
        if isinstance(obj.get(field), dict):
            hidden[field] = dict.fromkeys(obj[field], "(hidden)")
    return hidden


def stored(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` as the API server stores it: a Secret's stringData becomes base64 data, so a
    Secret already so compares as unchanged."""
    if obj.get("kind") != "Secret" or not isinstance(obj.get("stringData"), dict):
        return obj
    encoded = {k: base64.b64encode(str(v).encode()).decode() for k, v in obj["stringData"].items()}
    kept = {k: v for k, v in obj.items() if k != "stringData"}
    return {**kept, "data": {**(obj.get("data") or {}), **encoded}}


class NameTakenError(EtcdModuleError):
    """An object of the name the run writes or deletes exists and is not the run's."""

    reason = NAME_TAKEN

    def __init__(self, message: str, *, obj: dict[str, str], owner: str) -> None:
        super().__init__(message)
        self.obj, self.owner = obj, owner

    def as_result(self) -> dict[str, Any]:
        return {**super().as_result(), "object": self.obj, "owner": self.owner}


def _meta(obj: dict[str, Any] | None) -> dict[str, Any]:
    meta = (obj or {}).get("metadata")
    return meta if isinstance(meta, dict) else {}


def controller(obj: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ownerReference of `obj` that says `controller: true`, or None."""
    for ref in _meta(obj).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


def owner_words(obj: dict[str, Any] | None) -> str:
    """Who owns `obj`, in words for a refusal."""
    ref = controller(obj)
    if ref is None:
        return "no controller"
    return f"{ref.get('kind')} {ref.get('name')} (uid {ref.get('uid')})"


def owner_uid(desired: dict[str, Any], owner: dict[str, Any]) -> str:
    """The uid an existing object of `desired`'s name must be controlled by: the one of
    `desired`'s own controller ownerReference, else `owner.uid`. Both given must agree."""
    given = str(owner.get("uid") or "")
    ref = controller(desired)
    if ref is None:
        return given
    uid = str(ref.get("uid") or "")
    if given and uid != given:
        raise EtcdInputError(
            f"{desired.get('kind')} {_meta(desired).get('name')}: its ownerReferences name uid "
            f"{uid!r}, owner.uid is {given!r}"
        )
    return uid


def not_owned(current: dict[str, Any], desired: dict[str, Any], owner: dict[str, Any]) -> str:
    """Why `current`, the object that exists under `desired`'s name, is not the run's to
    write or delete; empty when it is. Its controller ownerReference must be the resource
    the run acts for (by uid). Only a claim or an EtcdCluster without any controller is
    matched instead by the marks the run was given (`owner.labels`, `owner.annotations`):
    none given, nothing without a controller is the run's. The resource the run acts for
    (its own uid is `owner.uid`) is the run's too: a record written on it."""
    uid = owner_uid(desired, owner)
    if owner.get("uid") and _meta(current).get("uid") == owner["uid"]:
        return ""
    ref = controller(current)
    if ref is not None:
        if uid and ref.get("uid") == uid:
            return ""
        return f"its controller is {owner_words(current)}"
    key = (current.get("apiVersion") or desired.get("apiVersion"), desired.get("kind"))
    labels = owner.get("labels") or {}
    annotations = owner.get("annotations") or {}
    if key not in UNOWNED_KINDS or not (labels or annotations):
        return "it has no controller"
    meta = _meta(current)
    missing = [
        f"{k}={v}"
        for marks, have in ((labels, meta.get("labels")), (annotations, meta.get("annotations")))
        for k, v in marks.items()
        if (have or {}).get(k) != v
    ]
    if missing:
        return f"it has no controller and is not marked {', '.join(missing)}"
    return ""


def _refuse(current: dict[str, Any], desired: dict[str, Any], why: str, doing: str) -> None:
    meta = _meta(desired)
    kind, ns, name = str(desired.get("kind")), str(meta.get("namespace")), str(meta.get("name"))
    raise NameTakenError(
        f"NameTaken: {kind} {ns}/{name} exists and is not this resource's to {doing} ({why}). "
        f"Nothing was changed: choose another name, or remove that {kind} once sure it is not "
        "needed",
        obj={"kind": kind, "namespace": ns, "name": name},
        owner=owner_words(current),
    )


def _unowned(obj: dict[str, Any]) -> dict[str, Any]:
    """A patch of an existing object: without ownerReferences (a merge patch would replace
    the object's list whole, and the controller is already checked to be ours)."""
    meta = {k: v for k, v in _meta(obj).items() if k != "ownerReferences"}
    return {**obj, "metadata": meta} if "metadata" in obj else obj


def _with_uid(body: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """`body` with the uid of the object read as a precondition: the API server refuses a
    patch whose uid is not the stored object's (an object made again under that name)."""
    uid = _meta(current).get("uid")
    if not uid:
        return body
    return {**body, "metadata": {**_meta(body), "uid": uid}}


def put_objects(
    client: Client,
    objects: list[dict[str, Any]],
    state: str,
    check: bool,
    owner: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write each of `objects` in turn. `present`: create it when missing, else merge-patch
    it; `created`: create it when missing, else leave it; `patched`: merge-patch an object
    that must exist; `status`: merge-patch the status subresource of an object that must
    exist (only its `status` is sent). An object that exists must be the run's (`not_owned`,
    `owner`), except for `status`, which writes the resource the run acts for itself. Every
    object is read and checked before the first write. Returns the objects as they are after
    (as they would be, in check mode), `changed`, and a before/after diff."""
    owner = owner or {}
    results, before, after, changed = [], [], [], False
    # Every object is checked before the first write: a refused one changes nothing.
    paths = [object_path(obj) for obj in objects]
    if state == "status":
        for obj in objects:
            if (obj.get("apiVersion"), obj.get("kind")) not in STATUS_KINDS:
                known = ", ".join(k for _v, k in sorted(STATUS_KINDS))
                raise EtcdInputError(
                    f"cannot write the status of {obj.get('kind')!r}: only {known}"
                )
    wanted = [stored(o) for o in objects]
    currents = [client.get(f"{path}/{name}") for path, name in paths]
    for obj, (_path, name), current in zip(wanted, paths, currents, strict=True):
        if current is None and state in ("patched", "status"):
            raise EtcdInputError(f"{obj['kind']} {name} does not exist, so it cannot be patched")
        if current is not None and state != "status":
            why = not_owned(current, obj, owner)
            if why:
                _refuse(current, obj, why, "write")
    for obj, (path, name), current in zip(wanted, paths, currents, strict=True):
        if state == "status":
            body = {"status": obj.get("status") or {}}
        else:
            body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
            if current is not None:
                body = _unowned(body)
        # `created`: an object of the run's that exists already is left as it is, whatever
        # it says (a restore never overwrites a cluster someone made meanwhile).
        if current is not None and (state == "created" or contains(current, body)):
            results.append(current)
            continue
        changed = True
        before.append(current or {})
        if check:
            result = merge_patch(current, body) if current else copy.deepcopy(obj)
        elif current is None:
            result = client.send("POST", path, obj)
        else:
            target = f"{path}/{name}/status" if state == "status" else f"{path}/{name}"
            sent = body if state == "status" else _with_uid(body, current)
            result = client.send("PATCH", target, sent, MERGE_PATCH)
        after.append(result)
        results.append(result)
    return {
        "objects": [shown(o) for o in results],
        "changed": changed,
        "diff": {"before": [shown(o) for o in before], "after": [shown(o) for o in after]},
    }


def _mark(obj: dict[str, Any]) -> dict[str, Any]:
    """What a deletion writes first: the labels and annotations given with the object (a
    Pod the runbook deletes says so, and the watcher does not take it for a lost one)."""
    meta = {k: v for k, v in _meta(obj).items() if k in ("labels", "annotations") and v}
    return {"metadata": meta} if meta else {}


def delete_objects(
    client: Client,
    objects: list[dict[str, Any]],
    check: bool,
    owner: dict[str, Any] | None = None,
    *,
    selector: str = "",
    force: list[str] | None = None,
    wait_timeout: float = 0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Delete each of `objects` that exists and is the run's (`not_owned`), in turn: its
    labels and annotations given are written first (a mark), then it is deleted with its
    uid as a precondition, and with `wait_timeout` waited for until no object of that uid is
    left. One named but not the run's fails the call as NameTaken before anything is
    written. With `selector`, an object given without a name stands for every object of its
    kind and namespace that the selector matches: those that are not the run's are left and
    returned in `kept`. `force`: names deleted at once (grace period 0)."""
    owner = owner or {}
    paths = [object_path(obj, named=not selector) for obj in objects]
    targets: list[tuple[dict[str, Any], str, dict[str, Any]]] = []
    kept: list[dict[str, str]] = []
    for obj, (path, name) in zip(objects, paths, strict=True):
        if name:
            current = client.get(f"{path}/{name}")
            if current is None:
                continue
            why = not_owned(current, obj, owner)
            if why:
                _refuse(current, obj, why, "delete")
            targets.append((obj, path, current))
            continue
        listed = client.get(path, {"labelSelector": selector}) or {}
        for item in listed.get("items") or []:
            found = {"apiVersion": obj.get("apiVersion", "v1"), "kind": obj.get("kind"), **item}
            wanted = {**obj, "metadata": {**_meta(obj), "name": _meta(item).get("name")}}
            why = not_owned(found, wanted, owner)
            if why:
                kept.append(
                    {"kind": str(obj.get("kind")), "name": str(_meta(item).get("name")), "why": why}
                )
            else:
                targets.append((wanted, path, found))
    force = force or []
    deleted = []
    for obj, path, current in targets:
        meta = _meta(current)
        name, uid = str(meta.get("name")), str(meta.get("uid") or "")
        deleted.append(current)
        if check:
            continue
        mark = _mark(obj)
        if mark and not contains(current, mark):
            client.send("PATCH", f"{path}/{name}", _with_uid(mark, current), MERGE_PATCH)
        options: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {"uid": uid},
            # Jobs and CronJobs would otherwise leave their Pods and Jobs behind.
            "propagationPolicy": "Background",
        }
        if name in force:
            options["gracePeriodSeconds"] = 0
        try:
            client.send("DELETE", f"{path}/{name}", options)
        except EtcdModuleError as error:
            # Gone meanwhile: what was asked is so.
            if error.reason != "NotFound":
                raise
        if wait_timeout > 0:
            _wait_gone(client, f"{path}/{name}", uid, wait_timeout, sleep, clock)
    return {
        "objects": [shown(o) for o in deleted],
        "kept": kept,
        "changed": bool(deleted),
        "diff": {"before": [shown(o) for o in deleted], "after": [{} for _ in deleted]},
    }


def _wait_gone(
    client: Client,
    path: str,
    uid: str,
    timeout: float,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> None:
    """Until no object of `uid` is at `path` (one of that name made since is another)."""
    deadline = clock() + timeout
    while True:
        current = client.get(path)
        if current is None or str(_meta(current).get("uid") or "") != uid:
            return
        if clock() >= deadline:
            raise EtcdModuleError(
                f"{path} was still there {timeout:g} s after its deletion", reason="Timeout"
            )
        sleep(0.25)
