"""Create-or-merge, merge-patch and status merge-patch of the few kinds the runbooks write
(etcd_kube_object).

Decisions are pure functions (`contains`, `merge_patch`, `object_path`), tested without a
server; `put_objects` carries them out with a `KubeReader`. A write is sent only when the
object would change: `changed` is the comparison, and check mode answers from it without
writing anything.
"""

from __future__ import annotations

import base64
import copy
from typing import Any, Protocol

from ansible.module_utils.etcd_errors import EtcdInputError
from ansible.module_utils.etcd_kube import namespaced

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
MERGE_PATCH = "application/merge-patch+json"


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


def object_path(obj: dict[str, Any], namespace: str | None = None) -> tuple[str, str]:
    """The collection path and name of `obj`; its kind must be one of KINDS."""
    if not isinstance(obj, dict):
        raise EtcdInputError(f"an object must be a mapping, got {type(obj).__name__}")
    api_version, kind = obj.get("apiVersion", "v1"), obj.get("kind")
    plural = KINDS.get((api_version, kind))  # type: ignore[arg-type]
    if plural is None:
        known = ", ".join(f"{k} ({v})" for v, k in KINDS)
        raise EtcdInputError(f"cannot write {kind!r} ({api_version}): only {known}")
    meta = obj.get("metadata") or {}
    name, ns = meta.get("name"), meta.get("namespace") or namespace
    if not name or not ns:
        raise EtcdInputError(f"a {kind} needs metadata.name and a namespace")
    return namespaced(api_version, ns, plural), str(name)


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


def put_objects(
    client: Client, objects: list[dict[str, Any]], state: str, check: bool
) -> dict[str, Any]:
    """Write each of `objects` in turn. `present`: create it when missing, else merge-patch
    it; `created`: create it when missing, else leave it; `patched`: merge-patch an object
    that must exist; `status`: merge-patch the status subresource of an object that must
    exist (only its `status` is sent). Returns the objects as they are after (as they would
    be, in check mode), `changed`, and a before/after diff."""
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
    for obj, (path, name) in zip([stored(o) for o in objects], paths, strict=True):
        current = client.get(f"{path}/{name}")
        if current is None and state in ("patched", "status"):
            raise EtcdInputError(f"{obj['kind']} {name} does not exist, so it cannot be patched")
        if state == "status":
            body = {"status": obj.get("status") or {}}
        else:
            body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        # `created`: an object that exists already is left as it is, whatever it says (a
        # restore never overwrites a cluster someone made meanwhile).
        if current is not None and (state == "created" or contains(current, body)):
            results.append(current)
            continue
        changed = True
        before.append(current or {})
        if check:
            result = merge_patch(current or obj, body) if current else copy.deepcopy(obj)
        elif current is None:
            result = client.send("POST", path, obj)
        else:
            target = f"{path}/{name}/status" if state == "status" else f"{path}/{name}"
            result = client.send("PATCH", target, body, MERGE_PATCH)
        after.append(result)
        results.append(result)
    return {
        "objects": [shown(o) for o in results],
        "changed": changed,
        "diff": {"before": [shown(o) for o in before], "after": [shown(o) for o in after]},
    }
