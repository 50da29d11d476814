"""The operator a benchmark measures, and `Bench`, which reads its figures and times what it
does to EtcdClusters.

The operator runs either in the local Kubernetes as users deploy it (`InCluster`: config/default
and the image hack/build-operator-image builds, both from a committed tree, so others' edits in
progress stay out of the measured operator; testbed.operator_incluster deploys it), or as a host
process with its ServiceAccount's rights (testbed.operator_process's OperatorProcess:
hack/run-operator-as-sa), watching one namespace.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from bench.harness.cluster import GROUP_PATH, admin_kube, available, etcd_cluster
from testbed.cluster import K8sCluster, wait_for
from testbed.host import REPO
from testbed.operator_incluster import (
    DEPLOYMENT,
    NAMESPACE,
    SELECTOR,
    deploy,
    operator_pid,
    replicas,
    wait_running,
)
from testbed.operator_process import OperatorProcess


def one_member_cluster(name: str) -> dict[str, Any]:
    """One member on a 1Gi volume, the rest as the API server defaults it."""
    return etcd_cluster(name, size=1)


# --- in the cluster ----------------------------------------------------------------------------
def operator_tree(ref: str, into: Path) -> Path:
    """The tree the operator is built and deployed from: the working tree, or a committed
    one (`git archive`), so others' edits in progress stay out of the measured operator."""
    if ref == "worktree":
        return REPO
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", ref],
        capture_output=True,
        check=True,
        timeout=120,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True, timeout=120)
    return into


class InCluster:
    """The operator as users deploy it (config/default, its image built from the committed tree
    of `ref`), with the benchmark's resync period and skip-rule bound, when given, written into
    the tree's watches.yaml before the build; start() deploys it, stop() scales it back."""

    def __init__(
        self,
        k8s: K8sCluster,
        ref: str,
        resync: int | None = None,
        full_run_interval: str | None = None,
    ) -> None:
        self.k8s = k8s
        self.asked = replicas(k8s)
        self.tree = operator_tree(ref, Path(tempfile.mkdtemp(prefix="bench-operator-tree-")))
        self.resync, self.full_run_interval = resync, full_run_interval
        self.image = ""

    def deploy(self) -> str:
        """Deploys it and waits until it runs; the image's key tag."""
        if self.resync is not None or self.full_run_interval is not None:
            path = self.tree / "watches.yaml"
            watches = yaml.safe_load(path.read_text())
            for entry in watches:
                if self.resync is not None:
                    entry["reconcilePeriod"] = f"{self.resync}s"
                if self.full_run_interval is not None:
                    entry["fullRunInterval"] = self.full_run_interval
            path.write_text(yaml.safe_dump(watches))
        self.image = deploy(self.k8s, self.tree)
        wait_running(self.k8s)
        return self.image

    def start(self) -> Bench:
        self.deploy()
        pod = json.loads(
            self.k8s.kubectl("-n", NAMESPACE, "get", "pods", "-l", SELECTOR, "-o", "json").stdout
        )["items"][0]
        # The Pod network is routed to this machine (hack/cluster): /metrics by the Pod's IP.
        return Bench(self.k8s, "", f"{pod['status']['podIP']}:8080", operator_pid)

    def stop(self) -> None:
        self.k8s.kubectl(
            "-n",
            NAMESPACE,
            "scale",
            "deployment",
            DEPLOYMENT,
            f"--replicas={self.asked}",
            check=False,
        )
        if self.tree != REPO:
            shutil.rmtree(self.tree, ignore_errors=True)


def add_where_arguments(parser: argparse.ArgumentParser) -> None:
    """--where and --ref: which operator a benchmark measures (InCluster, or a host process)."""
    parser.add_argument(
        "--where",
        choices=("incluster", "host"),
        default="incluster",
        help="the operator in the cluster as deployed (modules reach members by DNS), or as a "
        "host process (through kubectl port-forwards)",
    )
    parser.add_argument("--ref", default="HEAD", help="git ref of the in-cluster operator")


@contextlib.contextmanager
def operator_watching(
    k8s: K8sCluster,
    ns: str,
    where: str,
    ref: str,
    workdir: Path,
    host_args: list[str],
    resync: int | None = None,
    full_run_interval: str | None = None,
) -> Iterator[Bench]:
    """The namespace `ns`, made, and the operator `where` says (add_where_arguments) acting on
    it: as a host process given `host_args`, or in the cluster from `ref`. On exit, every
    EtcdCluster in `ns` is deleted (the operator still runs to finalize them), the operator
    stopped or scaled back, and `ns` deleted."""
    k8s.kubectl("create", "namespace", ns)
    host: OperatorProcess | None = None
    incluster: InCluster | None = None
    try:
        if where == "host":
            host = OperatorProcess(k8s, ns, workdir, host_args, lease_prefix="bench")
            host.start()
            host.wait_running(3)
            bench = Bench(k8s, ns, host.metrics_address, host.pid)
        else:
            incluster = InCluster(k8s, ref, resync, full_run_interval)
            bench = incluster.start()
            bench.ns = ns
            bench.image = incluster.image
        yield bench
    finally:
        k8s.kubectl("-n", ns, "delete", "etcd", "--all", "--timeout=600s", check=False, timeout=660)
        if host is not None:
            host.stop()
        if incluster is not None:
            incluster.stop()
        k8s.kubectl("delete", "namespace", ns, "--wait=false", check=False)


# --- its figures -------------------------------------------------------------------------------
def children(pid: int) -> list[int]:
    """The live children of `pid` that run Python (the fork server; not ansible-runner's
    short-lived clients)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"forkserver.py" in cmdline:
                found.append(int(child))
    return found


class Bench:
    def __init__(
        self, k8s: K8sCluster, ns: str, metrics_address: str, pid: Callable[[], int]
    ) -> None:
        """`metrics_address`: host:port of the operator's /metrics; `pid`: the operator
        process's PID on this machine (a host process, or the in-cluster container's)."""
        self.k8s = k8s
        self.ns = ns
        self.metrics_address = metrics_address
        self.pid = pid
        self.kube = admin_kube(k8s)
        self.image = ""  # the in-cluster operator's image key tag

    # --- reading -----------------------------------------------------------------------------
    def etcd_path(self, name: str = "") -> str:
        return f"{GROUP_PATH}/namespaces/{self.ns}/etcdclusters" + (f"/{name}" if name else "")

    def dependents(self, kind: str, cluster: str) -> list[str]:
        query = {"labelSelector": f"etcd.runbook.io/cluster={cluster}"}
        items = self.kube.get(f"/api/v1/namespaces/{self.ns}/{kind}", query)["items"]
        return [i["metadata"]["name"] for i in items]

    def available(self, name: str, size: int) -> bool:
        return available(self.kube.get(self.etcd_path(name)), size)

    def metrics(self) -> dict[str, float]:
        text = urllib.request.urlopen(f"http://{self.metrics_address}/metrics", timeout=5)
        out: dict[str, float] = {}
        for line in text.read().decode().splitlines():
            if line.startswith("etcd_runbook_operator_reconcile"):
                key, _, value = line.rpartition(" ")
                out[key] = float(value)
        return out

    def counter(self, result: str) -> float:
        key = f'etcd_runbook_operator_reconcile_total{{kind="EtcdCluster",result="{result}"}}'
        return self.metrics().get(key, 0.0)

    def runs_done(self) -> float:
        """Reconciles finished other than skips."""
        return self.counter("success") + self.counter("failure")

    def cpu_seconds(self) -> float:
        """utime + stime of the operator, of its live children (its ansible fork server) and
        of the children each has waited for (the runs: ansible-runner's, or the server's
        keepers, which wait for their run)."""
        ticks = 0
        for pid in [self.pid(), *children(self.pid())]:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += sum(int(f) for f in fields[11:15])
        return ticks / os.sysconf("SC_CLK_TCK")

    def memory_mib(self) -> dict[str, float]:
        """The operator process's VmRSS and VmHWM, and `server`: its fork server's VmRSS."""
        out: dict[str, float] = {"server": 0.0}
        for pid in [self.pid(), *children(self.pid())]:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                key, _, value = line.partition(":")
                if pid != self.pid() and key == "VmRSS":
                    out["server"] += int(value.split()[0]) / 1024
                elif pid == self.pid() and key in ("VmRSS", "VmHWM"):
                    out[key] = int(value.split()[0]) / 1024  # kB -> MiB
        return out

    def idle(self, settle: float = 5.0, timeout: float = 300) -> None:
        """Wait until no reconcile has finished (other than skips) for `settle` seconds."""

        def quiet() -> bool:
            before = self.runs_done()
            time.sleep(settle)
            return before == self.runs_done()

        wait_for(quiet, timeout, 0.1, "the operator to be idle")

    # --- actions -----------------------------------------------------------------------------
    def create(self, name: str) -> dict[str, float]:
        started = time.monotonic()
        self.kube.create(self.etcd_path(), one_member_cluster(name))
        wait_for(lambda: self.dependents("pods", name), 300, 0.1, f"{name}'s first Pod")
        first_pod = time.monotonic() - started
        wait_for(lambda: self.available(name, 1), 600, 0.5, f"{name} Available")
        return {"first_pod": first_pod, "available": time.monotonic() - started}

    def scale_up(self, name: str) -> dict[str, float]:
        generation = int(self.kube.get(self.etcd_path(name))["metadata"]["generation"]) + 1

        def reacted() -> bool:
            status = self.kube.get(self.etcd_path(name)).get("status", {})
            return any(
                c["type"] == "Progressing"
                and c["status"] == "True"
                and c.get("observedGeneration") == generation
                for c in status.get("conditions", [])
            )

        def acted() -> bool:
            new = f"{name}-1"
            return new in self.dependents("pods", name) or f"{new}-data" in self.dependents(
                "persistentvolumeclaims", name
            )

        started = time.monotonic()
        self.kube.merge_patch(self.etcd_path(name), {"spec": {"size": 2}})
        wait_for(reacted, 300, 0.05, f"{name}: Progressing for generation {generation}")
        reaction = time.monotonic() - started
        wait_for(acted, 300, 0.1, f"{name}: the new member's claim or Pod")
        action = time.monotonic() - started
        wait_for(lambda: self.available(name, 2), 600, 0.5, f"{name} Available with 2")
        return {"reaction": reaction, "action": action, "available": time.monotonic() - started}
