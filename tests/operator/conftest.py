"""Fixtures of the watcher's integration tests: the Widget CRD and operator.py processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.cluster import K8sCluster
from testbed.host import REPO, free_port

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class OperatorProc:
    """operator.py as a real process with the test watches file, admin kubeconfig."""

    def __init__(
        self, cluster: K8sCluster, namespace: str, workdir: Path, lease: str, name: str
    ) -> None:
        self.metrics_port = free_port()
        self.probe_port = free_port()
        self.artifacts = workdir / f"artifacts-{name}"
        self.log_path = workdir / f"operator-{name}.log"
        env = dict(os.environ, PATH=f"{cluster.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
        cmd = [
            sys.executable,
            str(REPO / "operator.py"),
            "--watches-file",
            str(FIXTURES / "watches.yaml"),
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--namespace",
            namespace,
            "--leader-elect",
            "--leader-election-id",
            lease,
            "--leader-election-namespace",
            namespace,
            "--artifacts-dir",
            str(self.artifacts),
            "--metrics-bind-address",
            f"127.0.0.1:{self.metrics_port}",
            "--health-probe-bind-address",
            f"127.0.0.1:{self.probe_port}",
            "--log-level",
            "DEBUG",
        ]
        self.proc = subprocess.Popen(
            cmd,
            stdout=self.log_path.open("wb"),
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def metric(self, name: str, **labels: str) -> float:
        status, text = http_get(self.metrics_port, "/metrics")
        assert status == 200
        want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        for line in text.splitlines():
            if line.startswith("#"):
                continue
            key, _, value = line.rpartition(" ")
            metric, _, rest = key.partition("{")
            got = ",".join(sorted(rest.rstrip("}").split(","))) if rest else ""
            if metric == name and got == want:
                return float(value)
        return 0.0

    def is_leader(self) -> bool:
        try:
            return self.metric("etcd_runbook_operator_leader") == 1.0
        except OSError:
            return False

    def runs(self) -> int:
        """Runs whose artifacts are kept (each run directory has a `status` file)."""
        return sum(1 for _ in self.artifacts.rglob("status"))

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)

    def stop(self) -> int:
        self.signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            return self.proc.wait(timeout=30)


@pytest.fixture(scope="session")
def widget_crd(k8s_cluster: K8sCluster) -> str:
    k8s_cluster.kubectl("apply", "-f", str(FIXTURES / "widget-crd.yaml"))
    k8s_cluster.kubectl(
        "wait", "--for=condition=Established", "crd/widgets.test.runbook.io", "--timeout=60s"
    )
    return "widgets.test.runbook.io"


@pytest.fixture
def start_operator(
    k8s_cluster: K8sCluster, k8s_namespace: str, widget_crd: str, tmp_path: Path
) -> Iterator:
    procs: list[OperatorProc] = []
    lease = f"widget-{uuid.uuid4().hex[:8]}"

    def start(name: str = "a") -> OperatorProc:
        proc = OperatorProc(k8s_cluster, k8s_namespace, tmp_path, lease, name)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.stop()
    for proc in procs:
        # On failure the logs are the diagnosis.
        sys.stderr.write(f"--- {proc.log_path.name} (tail)\n{proc.log()[-3000:]}\n")
