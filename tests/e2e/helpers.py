"""Small helpers over kubectl for the end-to-end tests (every wait is bounded)."""

from __future__ import annotations

import json
from typing import Any

from testbed.cluster import K8sCluster
from testbed.operator_incluster import InClusterOperator
from testbed.operator_process import OperatorProcess

# The e2e tests drive either; both have start, kill, stop, wait_running and log_tail.
Operator = InClusterOperator | OperatorProcess

TLS_ARGS = [
    "--cacert=/etc/etcd/tls/server/ca.crt",
    "--cert=/etc/etcd/tls/server/tls.crt",
    "--key=/etc/etcd/tls/server/tls.key",
]


def etcd_cluster(name: str, size: int = 3, version: str = "3.6.16", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "etcd.runbook.io/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": name},
        "spec": {"size": size, "version": version, "storage": {"size": "1Gi"}, **spec},
    }


def apply(k8s: K8sCluster, ns: str, obj: dict[str, Any], check: bool = True) -> Any:
    return k8s.kubectl("-n", ns, "apply", "-f", "-", input=json.dumps(obj), check=check)


def get(k8s: K8sCluster, ns: str, *what: str) -> dict[str, Any]:
    return json.loads(k8s.kubectl("-n", ns, "get", *what, "-o", "json").stdout)


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    for cond in obj.get("status", {}).get("conditions", []):
        if cond.get("type") == type_:
            return dict(cond)
    return {}


def wait_available(
    k8s: K8sCluster,
    ns: str,
    name: str,
    size: int,
    timeout: float,
    seen: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The object once Available with `size` ready members and its run over (Progressing
    False: status shows a run's looks while it goes on, and the run may still have its own
    bookkeeping to do, such as labelling a promoted member voting); `seen` collects each
    status read on the way (what `kubectl get -w` would have shown)."""

    last: list[dict[str, Any]] = [{}]

    def ready() -> dict[str, Any]:
        obj = get(k8s, ns, "etcd", name)
        status = obj.get("status", {})
        last[0] = status
        if seen is not None:
            seen.append(status)
        ok = (
            condition(obj, "Available").get("status") == "True"
            and status.get("readyMembers") == size
            and status.get("size") == size
            and status.get("phase") == "Running"
            and condition(obj, "Progressing").get("status") == "False"
        )
        return obj if ok else {}

    try:
        return k8s.wait_for(
            ready,
            timeout=timeout,
            interval=1 if seen is not None else 2,
            what=f"{name} Available with {size}",
        )
    except TimeoutError as timeout_error:
        # The operator's artifacts go with the test's teardown: what status said is the clue.
        raise TimeoutError(f"{timeout_error}; status said {said(last[0])}") from timeout_error


def said(status: dict[str, Any]) -> str:
    """A status, short: phase, ready of size, each condition's reason and message, members."""
    conditions = [
        f"{c.get('type')}={c.get('status')} {c.get('reason')}: {str(c.get('message'))[:400]}"
        for c in status.get("conditions", [])
    ]
    members = [
        f"{m.get('name')}({m.get('id')}{', learner' if m.get('learner') else ''})"
        for m in status.get("members") or []
    ]
    return (
        f"phase {status.get('phase')}, {status.get('readyMembers')} of {status.get('size')} "
        f"ready; {'; '.join(conditions)}; members {', '.join(members)}"
    )


def pods(k8s: K8sCluster, ns: str, name: str) -> list[dict[str, Any]]:
    items = get(k8s, ns, "pods", "-l", f"etcd.runbook.io/cluster={name}")["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def etcdctl(k8s: K8sCluster, ns: str, pod: str, *args: str, endpoint: str = "") -> str:
    target = endpoint or "https://127.0.0.1:2379"
    out = k8s.kubectl(
        "-n",
        ns,
        "exec",
        pod,
        "-c",
        "etcd",
        "--",
        "/usr/local/bin/etcdctl",
        f"--endpoints={target}",
        *TLS_ARGS,
        *args,
    )
    return out.stdout


def put_via_service(k8s: K8sCluster, ns: str, name: str, pod: str, key: str, value: str) -> bool:
    """One put through cluster `name`'s client Service, by etcdctl in `pod`: True when
    acknowledged (a failed or unanswered put is not)."""
    svc = f"https://{name}-client.{ns}.svc.cluster.local:2379"
    try:
        return etcdctl(k8s, ns, pod, "put", key, value, endpoint=svc).strip() == "OK"
    except Exception:
        return False


def member_list(k8s: K8sCluster, ns: str, pod: str) -> list[dict[str, Any]]:
    data = json.loads(etcdctl(k8s, ns, pod, "member", "list", "-w", "json"))
    return list(data.get("members", []))


def events(k8s: K8sCluster, ns: str, reason: str) -> list[dict[str, Any]]:
    items = get(k8s, ns, "events", "--field-selector", f"reason={reason}")["items"]
    return list(items)
