"""One read-only look at what the operator's side of an EtcdRestore decides on
(etcd_restore_observe): the EtcdCluster of the target name, the EtcdBackup it restores from,
the key names of the credentials Secret (never their values), the target cluster's claims
(and the first member's, by name), the Job of the restore's name and its Pods, and the image
the operator itself runs. Read by name and label: which are the restore's own is the plan's
decision (etcd_restore_plan.py, by controller uid)."""

from __future__ import annotations

from typing import Any

from etcd_runbook.clients.etcd_kube import namespaced
from etcd_runbook.names import (
    API_VERSION,
    LABEL_CLUSTER,
    LABEL_RESTORE,
)
from etcd_runbook.observe.etcd_backup_observe import Reader, own_image, secret_key_names


def observe_restore(reader: Reader, params: dict[str, Any]) -> dict[str, Any]:
    """What `params` asks for, as plain facts. The credentials Secret and the claim holding
    the snapshot are the ones given, else the ones the EtcdBackup's destination names."""
    ns, name, cluster = params["namespace"], params["name"], params["cluster"]
    facts: dict[str, Any] = {
        "cluster": reader.get(namespaced(API_VERSION, ns, "etcdclusters", cluster)),
        "claims": reader.items(
            namespaced("v1", ns, "persistentvolumeclaims"),
            f"{LABEL_CLUSTER}={cluster}",
            "PersistentVolumeClaim",
            "v1",
        ),
        "first_claim": (
            reader.get(namespaced("v1", ns, "persistentvolumeclaims", params["first_claim"]))
            if params.get("first_claim")
            else None
        ),
        "job": reader.get(namespaced("batch/v1", ns, "jobs", f"{name}-restore")),
        "pods": reader.items(namespaced("v1", ns, "pods"), f"{LABEL_RESTORE}={name}", "Pod", "v1"),
        "backup": None,
        "secret_keys": None,
        "source_claim_found": None,
        "image": "",
    }
    secret = params.get("credentials_secret") or ""
    claim = params.get("source_claim") or ""
    if params.get("backup"):
        backup = reader.get(namespaced(API_VERSION, ns, "etcdbackups", params["backup"]))
        facts["backup"] = backup
        destination = ((backup or {}).get("spec") or {}).get("destination") or {}
        secret = secret or str((destination.get("s3") or {}).get("credentialsSecret") or "")
        claim = claim or str((destination.get("volume") or {}).get("claimName") or "")
    if secret:
        facts["secret_keys"] = secret_key_names(reader, ns, secret)
    if claim:
        path = namespaced("v1", ns, "persistentvolumeclaims", claim)
        facts["source_claim_found"] = reader.get(path) is not None
    facts["image"] = own_image(reader, params.get("own_pod"))
    return facts
