"""Fixtures of the end-to-end suite: the operator deployed in the cluster from its image (as
users run it), or with E2E_OPERATOR=process as a host process with its ServiceAccount's token
(quicker to debug: its log is a file, the code is the working tree).

The suite runs in several processes at once (pytest-xdist, `make test-e2e`), each test in its
own namespace, all against the one in-cluster operator. A test that stops or kills the operator
is marked `operator_exclusive` and runs alone (tests/session_lock.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from testbed.cluster import K8sCluster, cluster_up
from testbed.host import REPO
from testbed.operator_incluster import (
    ALLOW_LISTS,
    DEPLOYMENT,
    FAULT_POINTS,
    NAMESPACE,
    InClusterOperator,
    deploy,
)
from testbed.operator_process import OperatorProcess
from tests.e2e.helpers import Operator
from tests.session_lock import exclusive, shared

IN_CLUSTER = os.environ.get("E2E_OPERATOR", "in-cluster") != "process"


@pytest.fixture(scope="session")
def operator_api(k8s_cluster: K8sCluster) -> None:
    """config/default without the Deployment: namespace, CRD, ServiceAccount, RBAC."""
    with exclusive("operator-deploy"):
        _apply_api(k8s_cluster)


def _apply_api(k8s_cluster: K8sCluster) -> None:
    rendered = k8s_cluster.kubectl("kustomize", str(REPO / "config" / "default")).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] != "Deployment"]
    k8s_cluster.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(docs))
    k8s_cluster.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/etcdclusters.etcd.runbook.io",
    )


@pytest.fixture(scope="session")
def operator_deployment(k8s_cluster: K8sCluster, operator_api: None) -> Iterator[str]:
    """config/default with the image built and imported; scaled to 0 when the last test
    process of the run that uses it ends, so nothing keeps acting on the machine (make demo
    scales it up again)."""
    with exclusive("operator-deploy") as lock:
        key = deploy(k8s_cluster, env={**ALLOW_LISTS, **FAULT_POINTS})
        users = _users(lock)
        (users / str(os.getpid())).touch()
    try:
        yield key
    finally:
        with exclusive("operator-deploy") as lock:
            users = _users(lock)
            (users / str(os.getpid())).unlink(missing_ok=True)
            if not any(users.iterdir()):
                k8s_cluster.kubectl(
                    "-n", NAMESPACE, "scale", "deployment", DEPLOYMENT, "--replicas=0", check=False
                )


def _users(lock: Path) -> Path:
    """The directory of the test processes using the Deployment, a file each named by its
    PID; those of processes that have ended (a killed run) are cleared."""
    users = lock.with_suffix(".users")
    users.mkdir(exist_ok=True)
    for entry in users.iterdir():
        if not Path(f"/proc/{entry.name}").exists():
            entry.unlink(missing_ok=True)
    return users


@pytest.fixture
def operator(
    request: pytest.FixtureRequest, k8s_cluster: K8sCluster, k8s_namespace: str, tmp_path: Path
) -> Iterator[Operator]:
    # Host-process operators of two tests would contend for the one leader Lease.
    alone = not IN_CLUSTER or request.node.get_closest_marker("operator_exclusive") is not None
    with (exclusive if alone else shared)("operator"):
        yield from _operator(request, k8s_cluster, k8s_namespace, tmp_path)


def _operator(
    request: pytest.FixtureRequest, k8s_cluster: K8sCluster, k8s_namespace: str, tmp_path: Path
) -> Iterator[Operator]:
    op: Operator
    if IN_CLUSTER:
        request.getfixturevalue("operator_deployment")
        op = InClusterOperator(k8s_cluster)
    else:
        request.getfixturevalue("operator_api")
        op = OperatorProcess(k8s_cluster, k8s_namespace, tmp_path, lease_prefix="e2e")
    op.start()
    op.wait_running()
    try:
        yield op
    finally:
        # Deleted while an operator runs, so the finalizer is honoured and the namespace can go.
        if isinstance(op, OperatorProcess) and op.proc is None:
            op.start(apply=False)
        if isinstance(op, InClusterOperator):
            op.wait_running()
        # A test may leave a cluster paused, whose deletion waits for this explicit override.
        k8s_cluster.kubectl(
            "-n",
            k8s_namespace,
            "annotate",
            "etcd",
            "--all",
            "etcd.runbook.io/delete-while-paused=true",
            check=False,
        )
        k8s_cluster.kubectl(
            "-n", k8s_namespace, "delete", "etcd", "--all", "--timeout=120s", check=False
        )
        op.stop()
        print(op.log_tail(200))
        for name in k8s_cluster.kubectl(
            "-n", k8s_namespace, "get", "etcd", "-o", "name", check=False
        ).stdout.split():
            k8s_cluster.kubectl(
                "-n",
                k8s_namespace,
                "patch",
                name,
                "--type=merge",
                "-p",
                '{"metadata":{"finalizers":[]}}',
                check=False,
            )


@pytest.fixture(scope="session")
def three_nodes(k8s_cluster: K8sCluster) -> Iterator[list[str]]:
    """The local Kubernetes on three nodes (hack/cluster up --nodes 3) for the suites marked
    `nodes`; back to one node at the end, as `make demo` and the other suites expect. Asked
    for before the operator, so its image goes into every node."""
    cluster_up(nodes=3)
    try:
        nodes = k8s_cluster.kubectl(
            "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"
        ).stdout.split()
        assert sorted(nodes) == ["erop-node0", "erop-node1", "erop-node2"], nodes
        yield sorted(nodes)
    finally:
        cluster_up(nodes=1)
