"""One read-only look at what the operator's side of an EtcdBackup decides on
(etcd_backup_observe): the EtcdCluster it names (whose TLS Secrets its Jobs' Role names), the
names of its credentials Secret's keys (never their values), its claim and the claim's labels
(the mark that it is meant for backups), its Jobs, their Pods, its CronJob and RoleBinding,
and the image the operator itself runs. One module process instead of one per object."""

from __future__ import annotations

from typing import Any, Protocol

from etcd_runbook.clients.etcd_kube import namespaced
from etcd_runbook.names import (
    API_VERSION,
    LABEL_BACKUP,
)


class Reader(Protocol):
    def get(self, path: str, query: dict[str, str] | None = None) -> dict[str, Any] | None: ...

    def items(self, path: str, label_selector: str, kind: str, api_version: str) -> list[Any]: ...


def own_pod_argument_spec() -> dict[str, Any]:
    """The option naming the operator's own Pod (doc fragment etcd_own_pod), shared by the
    observe modules of the runbooks that run Jobs in the operator's image."""
    return {
        "own_pod": {
            "type": "dict",
            "options": {
                "namespace": {"type": "str", "required": True},
                "name": {"type": "str", "required": True},
                "container": {"type": "str", "default": "manager"},
            },
        },
    }


def api_timeout_argument_spec() -> dict[str, Any]:
    """The API timeout of the backup and restore looks (doc fragment etcd_own_pod.timeout).
    Apart from own_pod: the cluster look takes own_pod but bounds its reads itself, and has
    timeouts of its own under etcd and wait_for."""
    return {"timeout": {"type": "float", "default": 30}}


def container_image(pod: dict[str, Any] | None, container: str) -> str:
    containers = ((pod or {}).get("spec") or {}).get("containers") or []
    chosen = [c for c in containers if c.get("name") == container] or containers[:1]
    return str(chosen[0].get("image") or "") if chosen else ""


def own_image(reader: Reader, own_pod: dict[str, Any] | None) -> str:
    """The image of the operator's own Pod's container (the option own_pod), which the Jobs
    it makes run too; '' when no Pod is named."""
    own = own_pod or {}
    if not (own.get("name") and own.get("namespace")):
        return ""
    pod = reader.get(namespaced("v1", own["namespace"], "pods", own["name"]))
    return container_image(pod, own.get("container") or "manager")


def secret_key_names(reader: Reader, namespace: str, name: str) -> list[str] | None:
    """The key names a Secret holds, None when it does not exist: its values stay here."""
    secret = reader.get(namespaced("v1", namespace, "secrets", name))
    return sorted((secret or {}).get("data") or {}) if secret else None


def observe_backup(reader: Reader, params: dict[str, Any]) -> dict[str, Any]:
    """What `params` asks for, as plain facts. A Secret is reduced to its key names here,
    inside the module: its values never reach the run."""
    ns, name = params["namespace"], params["name"]
    selector = f"{LABEL_BACKUP}={name}"
    facts: dict[str, Any] = {
        "jobs": reader.items(namespaced("batch/v1", ns, "jobs"), selector, "Job", "batch/v1"),
        "pods": reader.items(namespaced("v1", ns, "pods"), selector, "Pod", "v1"),
        "cronjob": reader.get(namespaced("batch/v1", ns, "cronjobs", name)),
        # Read after the Jobs: a backup Job records its snapshot in this status before it
        # exits, so a Job seen finished here always comes with the lastSnapshot it wrote. The
        # object the watcher handed over may be older than that write.
        "status": (reader.get(namespaced(API_VERSION, ns, "etcdbackups", name)) or {}).get(
            "status"
        ),
        # The RoleBinding of the backup's account: one an earlier release made points at a
        # shared ClusterRole and is replaced.
        "binding": reader.get(
            namespaced("rbac.authorization.k8s.io/v1", ns, "rolebindings", f"etcd-backup-{name}")
        ),
        "cluster_found": None,
        "cluster": None,
        "secret_keys": None,
        "claim_found": None,
        "claim_labels": None,
        "image": "",
    }
    if params.get("cluster"):
        path = namespaced(API_VERSION, ns, "etcdclusters", params["cluster"])
        cluster = reader.get(path)
        facts["cluster_found"] = cluster is not None
        if cluster is not None:
            # What the backup's Role is made from: its name and spec.tls.
            facts["cluster"] = {
                "metadata": {"name": (cluster.get("metadata") or {}).get("name")},
                "spec": {"tls": (cluster.get("spec") or {}).get("tls") or {}},
            }
    if params.get("credentials_secret"):
        facts["secret_keys"] = secret_key_names(reader, ns, params["credentials_secret"])
    if params.get("claim"):
        path = namespaced("v1", ns, "persistentvolumeclaims", params["claim"])
        claim = reader.get(path)
        facts["claim_found"] = claim is not None
        if claim is not None:
            facts["claim_labels"] = dict((claim.get("metadata") or {}).get("labels") or {})
    facts["image"] = own_image(reader, params.get("own_pod"))
    return facts
