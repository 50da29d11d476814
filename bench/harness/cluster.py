"""What the cluster benchmarks read and write in the local Kubernetes (testbed.cluster brings it
up and holds kubectl, waits and port-forwards): the API through the watcher's own layer,
EtcdCluster manifests, and small readers of what runs there.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

from etcd_runbook_operator.kube import ApiException, Kube, load_api_client
from testbed.cluster import K8sCluster, wait_for

GROUP_PATH = "/apis/etcd.runbook.io/v1alpha1"


def admin_kube(k8s: K8sCluster) -> Kube:
    """The watcher's own API layer, with the cluster's admin kubeconfig."""
    return Kube(load_api_client(str(k8s.kubeconfig)))


def etcd_cluster(name: str, **spec: Any) -> dict[str, Any]:
    """An EtcdCluster of `spec`, on a volume of 1Gi unless `spec` says otherwise."""
    return {
        "apiVersion": "etcd.runbook.io/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": name},
        "spec": {"storage": {"size": "1Gi"}, **spec},
    }


def member_image(kube: Kube, etcd_path: str, manifest: dict[str, Any]) -> str:
    """The image the operator's member Pods run for `manifest`: the server-defaulted
    spec.repository and version (a dry-run create), laid out as etcd_manifests.member_pod does."""
    obj = kube.request("POST", etcd_path, {"dryRun": "All"}, manifest)
    return f"{obj['spec']['repository']}:v{obj['spec']['version']}"


def available(obj: dict[str, Any], size: int) -> bool:
    """The EtcdCluster says Available with `size` ready members for its current generation."""
    status = obj.get("status", {})
    return (
        any(
            c["type"] == "Available" and c["status"] == "True" for c in status.get("conditions", [])
        )
        and status.get("readyMembers") == size
        and status.get("observedGeneration") == obj.get("metadata", {}).get("generation")
    )


def pod_ready(pod: dict[str, Any]) -> bool:
    conds = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


def gone(kube: Kube, path: str) -> bool:
    try:
        kube.get(path)
    except ApiException as exc:
        if exc.status == 404:
            return True
        raise
    return False


def proxy(kube: Kube, ns: str, pod: str, port: int, path: str) -> str:
    """GET through the API server's pod proxy; the body, or an exception unless 2xx."""
    resp = kube._call("GET", f"/api/v1/namespaces/{ns}/pods/{pod}:{port}/proxy/{path}", timeout=5)
    body = resp.read().decode(errors="replace")
    if not 200 <= resp.status <= 299:
        raise RuntimeError(f"{pod}:{port}/{path}: HTTP {resp.status} {body[:200]}")
    return str(body)


def healthy(kube: Kube, ns: str, pod: str, port: int) -> bool:
    """etcd's own /health: true once the member sees a leader and serves a read."""
    try:
        return bool(json.loads(proxy(kube, ns, pod, port, "health")).get("health") == "true")
    except Exception:
        return False


def delete_claims(kube: Kube, ns: str, cluster: str, timeout: float) -> None:
    """Claims are kept when an EtcdCluster goes: delete its claims, then wait until they and
    its Pods are gone."""
    core = f"/api/v1/namespaces/{ns}"
    selector = {"labelSelector": f"etcd.runbook.io/cluster={cluster}"}
    kube.request("DELETE", f"{core}/persistentvolumeclaims", selector)
    wait_for(
        lambda: (
            not kube.get(f"{core}/persistentvolumeclaims", selector)["items"]
            and not kube.get(f"{core}/pods", selector)["items"]
        ),
        timeout,
        1,
        f"{cluster}'s claims and Pods gone",
    )


def stamp(iso: str) -> float:
    return datetime.datetime.fromisoformat(iso).timestamp()
