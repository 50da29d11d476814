"""Fixtures of the end-to-end suite: an operator process per test namespace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.e2e.operator_process import OperatorProcess
from tests.k8s_cluster import REPO, K8sCluster


@pytest.fixture(scope="session")
def operator_api(k8s_cluster: K8sCluster) -> None:
    """config/default without the Deployment: namespace, CRD, ServiceAccount, RBAC."""
    rendered = k8s_cluster.kubectl("kustomize", str(REPO / "config" / "default")).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] != "Deployment"]
    k8s_cluster.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(docs))
    k8s_cluster.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/etcdclusters.etcd.runbook.io",
    )


@pytest.fixture
def operator(
    k8s_cluster: K8sCluster, k8s_namespace: str, tmp_path: Path, operator_api: None
) -> Iterator[OperatorProcess]:
    op = OperatorProcess(k8s_cluster, k8s_namespace, tmp_path)
    op.start()
    op.wait_running()
    try:
        yield op
    finally:
        # Deleted while an operator runs, so the finalizer is honoured and the namespace can go.
        if op.proc is None:
            op.start(apply=False)
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
