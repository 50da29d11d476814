"""The local Kubernetes (hack/cluster, docs/local-cluster.md): bringing it up, its pinned
kubectl and the API, bounded waits, and port-forwards to what runs there.

Every wait is bounded. A failing `hack/cluster` or kubectl raises with the end of its output.
"""

from __future__ import annotations

import contextlib
import re
import select
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from kubernetes import client, config

from testbed import TestbedError
from testbed.host import REPO, stop_process

CLUSTER = REPO / "hack" / "cluster"
UP_TIMEOUT = 3600  # a cold start builds Kubernetes from source
FORWARDING = re.compile(r"Forwarding from 127\.0\.0\.1:(\d+) ->")

T = TypeVar("T")


class KubectlError(TestbedError):
    """A kubectl call answered with an error (the message has its output)."""


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
            raise KubectlError(
                f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}"
            )
        return proc

    def api_client(self) -> client.ApiClient:
        """A kubernetes-client ApiClient with this cluster's admin kubeconfig."""
        return config.new_client_from_config(config_file=str(self.kubeconfig))

    # The tests' waits read `k8s_cluster.wait_for(...)`; the same function.
    wait_for = staticmethod(wait_for)


def hack_cluster(*args: str, timeout: float) -> str:
    """`hack/cluster ARGS`; its answer (stdout)."""
    proc = subprocess.run(
        [str(CLUSTER), *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.splitlines()[-40:])
        raise TestbedError(f"hack/cluster {' '.join(args)} failed ({proc.returncode}):\n{tail}")
    return proc.stdout.strip()


def cluster_up(nodes: int | None = None) -> K8sCluster:
    """The local cluster, reused when it runs, with `nodes` nodes (hack/cluster's default, one,
    when not given); nodes beyond them are removed. A cold start builds for up to an hour."""
    count = ["--nodes", str(nodes)] if nodes is not None else []
    kubeconfig = Path(hack_cluster("up", *count, timeout=UP_TIMEOUT))
    bin_dir = Path(hack_cluster("bin", timeout=30))
    if not kubeconfig.is_file():
        raise TestbedError(f"hack/cluster up printed {kubeconfig}, which is not a file")
    return K8sCluster(kubeconfig=kubeconfig, bin_dir=bin_dir)


@contextlib.contextmanager
def port_forward(
    k8s: K8sCluster, ns: str, target: str, port: int, timeout: float = 30
) -> Iterator[int]:
    """kubectl port-forward from a free port on 127.0.0.1 to `target` (pod/NAME,
    service/NAME) in `ns`; yields the local port, always stopped.

    For a Service, kubectl binds one of its Pods when it starts: after that Pod is gone, open a
    new forward."""
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
        yield _forwarded_port(proc, target, timeout)
    finally:
        stop_process(proc, grace=5)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def _forwarded_port(proc: subprocess.Popen[str], target: str, timeout: float) -> int:
    assert proc.stdout is not None and proc.stderr is not None
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if not ready:
            break
        line = proc.stdout.readline()
        if not line:  # kubectl exited
            raise TestbedError(f"kubectl port-forward {target} failed: {proc.stderr.read()}")
        if match := FORWARDING.search(line):
            return int(match.group(1))
    raise TestbedError(f"kubectl port-forward {target} printed no local port within {timeout}s")
