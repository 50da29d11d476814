"""The operator in the cluster, as users deploy it: config/default's Deployment running the image
hack/build-operator-image builds and imports into the node's containerd.

The node is this machine, so a crash is made the way a node sees one: SIGKILL of the
container's init process (the operator) from the host; the kubelet restarts the container and
the playbook it was running dies with it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import yaml

from testbed import TestbedError
from testbed.cluster import K8sCluster
from testbed.host import REPO

NAMESPACE = "etcd-operator-system"
DEPLOYMENT = "etcd-runbook-operator"
SELECTOR = "app.kubernetes.io/name=etcd-runbook-operator"
# What the operator container runs as its PID 1 (found in /proc: the node is this machine).
ENTRY = b"/opt/etcd-runbook-operator/operator.py"
BUILD_TIMEOUT = 1800  # a cold build makes a Debian base with debootstrap and a venv
# The e2e suite's operator runs under an administrator's allow-lists (docs/install.md): the
# repository every test cluster runs, and a PriorityClass no test asks for; so every test runs
# under them, and test_least_privilege.py sees what they refuse. A benchmark's host process runs
# under them too, so its figure is of the operator those tests prove.
ALLOW_LISTS = {
    "ETCD_RUNBOOK_ALLOWED_REPOSITORIES": "gcr.io/etcd-development/etcd",
    "ETCD_RUNBOOK_ALLOWED_PRIORITY_CLASSES": "etcd-e2e-allowed",
}
# The tests' operator honours fault points an object arms (etcd_runbook_operator/faults.py);
# the manifests users apply never set it.
FAULT_POINTS = {"ETCD_RUNBOOK_FAULT_POINTS": "enabled"}


def deploy(k8s: K8sCluster, root: Path = REPO, env: dict[str, str] | None = None) -> str:
    """Build (cached by content key) and import the image, apply config/default, roll the
    Deployment onto the image; returns the image's key tag. `root`: the tree to build and
    apply (a benchmark measures a committed tree, not the edits in progress); `env`: values
    of the operator container's environment variables."""
    build = subprocess.run(
        [str(root / "hack" / "build-operator-image")],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    if build.returncode != 0:
        raise TestbedError(f"hack/build-operator-image failed:\n{build.stderr[-4000:]}")
    key = subprocess.run(
        [str(root / "hack" / "build-operator-image"), "--print-key"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()[:16]
    # The Deployment is applied with the image's key already in its Pod template, so it never
    # runs a Pod of another template: such a Pod, replaced while still starting, was seen to
    # take more than 180 s of its 300 s grace period to go.
    rendered = k8s.kubectl("kustomize", str(root / "config" / "default")).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    for doc in docs:
        if doc.get("kind") == "Deployment" and doc["metadata"]["name"] == DEPLOYMENT:
            template = doc["spec"]["template"]["metadata"]
            template.setdefault("annotations", {})["etcd.runbook.io/image"] = f"key-{key}"
            container = doc["spec"]["template"]["spec"]["containers"][0]
            given = dict(env or {})
            for variable in container["env"]:
                if variable["name"] in given:
                    variable["value"] = given.pop(variable["name"])
            container["env"] += [{"name": k, "value": v} for k, v in given.items()]
            # hack/run-operator-as-sa (the benchmarks) and tests scale it to 0.
            doc["spec"]["replicas"] = 1
    k8s.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    k8s.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", "crd/etcdclusters.etcd.runbook.io"
    )
    k8s.kubectl(
        "-n",
        NAMESPACE,
        "rollout",
        "status",
        f"deployment/{DEPLOYMENT}",
        "--timeout=300s",
        timeout=320,
    )
    return f"key-{key}"


def replicas(k8s: K8sCluster) -> str:
    """The operator Deployment's replicas as asked now ("0" without one): what a benchmark
    that deploys the operator puts back at its end."""
    asked = k8s.kubectl(
        "-n",
        NAMESPACE,
        "get",
        "deployment",
        DEPLOYMENT,
        "-o",
        "jsonpath={.spec.replicas}",
        check=False,
    )
    return asked.stdout.strip() or "0"


def wait_running(k8s: K8sCluster, seconds: float = 180) -> None:
    """The in-cluster operator's Pod Ready. A Pod of an earlier template (`apply -k` scales the
    Deployment up before the template is patched) may still be terminating, and never turns
    Ready: wait for it to go, then for the Pods that stay."""

    def none_terminating() -> bool:
        out = k8s.kubectl("-n", NAMESPACE, "get", "pods", "-l", SELECTOR, "-o", "json")
        items = json.loads(out.stdout).get("items", [])
        return not any(p["metadata"].get("deletionTimestamp") for p in items)

    k8s.wait_for(none_terminating, timeout=seconds, interval=1, what="old Pods gone")
    k8s.kubectl(
        "-n",
        NAMESPACE,
        "wait",
        "--for=condition=Ready",
        "pod",
        "-l",
        SELECTOR,
        f"--timeout={int(seconds)}s",
        timeout=seconds + 20,
    )


def operator_host_pids() -> list[int]:
    """Host PIDs of operator processes that are PID 1 in their own PID namespace."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if ENTRY not in (entry / "cmdline").read_bytes():
                continue
            status = (entry / "status").read_text()
        except OSError:
            continue
        nspid = next((ln.split()[1:] for ln in status.splitlines() if ln.startswith("NSpid:")), [])
        if len(nspid) > 1 and nspid[-1] == "1":
            found.append(int(entry.name))
    return found


def operator_pid() -> int:
    """The host PID of the one in-cluster operator process."""
    pids = operator_host_pids()
    if len(pids) != 1:
        raise TestbedError(f"expected one in-cluster operator process, found {pids}")
    return pids[0]


class InClusterOperator:
    """The same handle as OperatorProcess (start, kill, stop, log_tail, wait_running)."""

    def __init__(self, cluster: K8sCluster) -> None:
        self.cluster = cluster
        self.kills = 0

    def start(self, apply: bool = True) -> None:
        # The Deployment restarts a killed container by itself; this only makes sure it runs.
        self.cluster.kubectl("-n", NAMESPACE, "scale", "deployment", DEPLOYMENT, "--replicas=1")

    def kill(self) -> None:
        os.kill(operator_pid(), signal.SIGKILL)
        self.kills += 1

    def stop(self) -> None:
        """The Deployment stays for the next test: stopping is the session's business."""

    def wait_running(self, seconds: float = 180) -> None:
        wait_running(self.cluster, seconds)

    def log_tail(self, lines: int = 60) -> str:
        out = []
        if self.kills:
            prev = self.cluster.kubectl(
                "-n",
                NAMESPACE,
                "logs",
                f"deployment/{DEPLOYMENT}",
                "--previous",
                f"--tail={lines}",
                check=False,
            )
            out.append(f"--- before the kill ---\n{prev.stdout}{prev.stderr}")
        cur = self.cluster.kubectl(
            "-n", NAMESPACE, "logs", f"deployment/{DEPLOYMENT}", f"--tail={lines}", check=False
        )
        out.append(f"{cur.stdout}{cur.stderr}")
        return "\n".join(out)
