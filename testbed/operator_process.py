"""The operator as a host process with its ServiceAccount's rights (hack/run-operator-as-sa,
which installs the CRD and RBAC), watching one namespace, so what drives it proves the RBAC in
config/rbac as well. Its output goes to a log file for diagnosis, its runs' artifacts to
`workdir`/artifacts."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

from testbed import TestbedError
from testbed.cluster import K8sCluster
from testbed.host import REPO, free_port
from testbed.operator_incluster import ALLOW_LISTS


class OperatorProcess:
    """Start, kill and restart operator.py watching `namespace`, under the allow-lists of the
    in-cluster one; its leader-election Lease is `lease_prefix`-<random>, its output
    `workdir`/operator-<n>.log for its n-th start."""

    def __init__(
        self,
        cluster: K8sCluster,
        namespace: str,
        workdir: Path,
        extra_args: list[str] | None = None,
        *,
        lease_prefix: str,
    ) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.workdir = workdir
        # Appended last, so they override the defaults below (argparse keeps the last value).
        self.extra_args = list(extra_args or [])
        self.metrics_address = ""
        self.lease = f"{lease_prefix}-{uuid.uuid4().hex[:8]}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, apply: bool = True) -> None:
        self.starts += 1
        self.metrics_address = f"127.0.0.1:{free_port()}"
        env = dict(os.environ)
        # kubectl for the runbooks' port-forwards (the operator runs outside the cluster).
        env["PATH"] = f"{self.cluster.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        env["KUBECONFIG"] = str(self.cluster.kubeconfig)
        env.update(ALLOW_LISTS)
        cmd = [
            str(REPO / "hack" / "run-operator-as-sa"),
            *([] if apply else ["--no-apply"]),
            "--",
            "--namespace",
            self.namespace,
            "--leader-election-id",
            self.lease,
            "--artifacts-dir",
            str(self.workdir / "artifacts"),
            "--metrics-bind-address",
            self.metrics_address,
            "--health-probe-bind-address",
            f"127.0.0.1:{free_port()}",
            "--reconcile-period",
            "300",
            *self.extra_args,
        ]
        with (self.workdir / f"operator-{self.starts}.log").open("wb") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    def pid(self) -> int:
        assert self.proc is not None, "the operator process was not started"
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL the whole process group: the operator and the playbook it runs."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.proc = None

    def stop(self) -> None:
        """SIGTERM to its process group (the operator and the playbook it runs), SIGKILL
        after a minute."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None

    def log_tail(self, lines: int = 60) -> str:
        path = self.workdir / f"operator-{self.starts}.log"
        return (
            "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
            if path.exists()
            else ""
        )

    def wait_running(self, seconds: float = 2.0) -> None:
        """Still running after `seconds`, or TestbedError with the end of its log."""
        time.sleep(seconds)
        if self.proc is None or self.proc.poll() is not None:
            raise TestbedError(f"the operator did not keep running:\n{self.log_tail()}")
