"""The local Kubernetes the cluster benchmarks run on (hack/cluster, docs/local-cluster.md):
bringing it up, kubectl and the API, bounded waits, and small readers of what runs there.

Every wait is bounded. A failing `hack/cluster` ends the benchmark with its output's tail.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import re
import select
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from etcd_runbook_operator.kube import ApiException, Kube, load_api_client

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "hack" / "cluster"
UP_TIMEOUT = 3600  # a cold start builds Kubernetes from source
GROUP_PATH = "/apis/etcd.runbook.io/v1alpha1"
FORWARDING = re.compile(r"Forwarding from 127\.0\.0\.1:(\d+) ->")

T = TypeVar("T")


@dataclass(frozen=True)
class K8sCluster:
    kubeconfig: Path
    bin_dir: Path

    @property
    def kubectl_path(self) -> Path:
        return self.bin_dir / "kubectl"

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run the pinned kubectl against this cluster; output captured as text."""
        cmd = [str(self.kubectl_path), "--kubeconfig", str(self.kubeconfig), *args]
        proc = subprocess.run(
            cmd, input=input, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and proc.returncode != 0:
            raise RuntimeError(
                f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}"
            )
        return proc

    def kube(self) -> Kube:
        """The watcher's own API layer, with this cluster's admin kubeconfig."""
        return Kube(load_api_client(str(self.kubeconfig)))


def hack_cluster(*args: str, timeout: float) -> str:
    """`hack/cluster ARGS`; its answer (stdout)."""
    proc = subprocess.run(
        [str(CLUSTER), *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.splitlines()[-40:])
        raise SystemExit(f"hack/cluster {' '.join(args)} failed ({proc.returncode}):\n{tail}")
    return proc.stdout.strip()


def cluster_up(nodes: int | None = None) -> K8sCluster:
    """The local cluster, reused when it runs, with `nodes` nodes (hack/cluster's default, one,
    when not given); nodes beyond them are removed."""
    count = ["--nodes", str(nodes)] if nodes is not None else []
    kubeconfig = hack_cluster("up", *count, timeout=UP_TIMEOUT)
    return K8sCluster(kubeconfig=Path(kubeconfig), bin_dir=Path(hack_cluster("bin", timeout=30)))


def wait_for(
    cond: Callable[[], T], timeout: float = 120, interval: float = 0.5, what: str = ""
) -> T:
    """Poll cond until it returns a truthy value (returned); exceptions count as not yet."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = cond()
            if value:
                return value
            last = value
        except Exception as exc:
            last = exc
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"timed out after {timeout}s waiting for {what or cond}: last {last!r}"
            )
        time.sleep(interval)


def stop_process(proc: subprocess.Popen[Any], grace: float = 10) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds; always reaped."""
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def port_forward(k8s: K8sCluster, ns: str, target: str, port: int) -> Iterator[int]:
    """kubectl port-forward on 127.0.0.1; yields the local port, always stopped."""
    proc = subprocess.Popen(
        [
            str(k8s.kubectl_path),
            "--kubeconfig",
            str(k8s.kubeconfig),
            "-n",
            ns,
            "port-forward",
            "--address",
            "127.0.0.1",
            target,
            f":{port}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        deadline = time.monotonic() + 30
        local = 0
        while not local:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([proc.stdout], [], [], max(left, 0))
            if not ready:
                raise TimeoutError(f"port-forward {target}: no local port within 30 s")
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"port-forward {target} failed: {proc.stderr.read()}")
            if match := FORWARDING.search(line):
                local = int(match.group(1))
        yield local
    finally:
        stop_process(proc, grace=5)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


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
