"""The locally built images run on the node: one etcd image per supported version, laid out
as the official ones, and the busybox tools image."""

from __future__ import annotations

import subprocess

import pytest

from testbed.host import REPO
from tests.cluster.conftest import run_to_completion

pytestmark = pytest.mark.cluster

SUPPORTED = subprocess.run(
    [str(REPO / "hack" / "etcd-bin"), "--supported"], capture_output=True, text=True, check=True
).stdout.split()


def _pod(name: str, image: str, *command: str) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": list(command),
                }
            ]
        },
    }


@pytest.mark.parametrize("version", SUPPORTED)
def test_etcd_image_runs_its_version(k8s_cluster, k8s_namespace, version):
    image = f"gcr.io/etcd-development/etcd:v{version}"
    tag = version.replace(".", "-")
    out = run_to_completion(
        k8s_cluster, k8s_namespace, _pod(f"etcd-{tag}", image, "/usr/local/bin/etcd", "--version")
    )
    assert f"etcd Version: {version}" in out
    out = run_to_completion(
        k8s_cluster, k8s_namespace, _pod(f"ctl-{tag}", image, "/usr/local/bin/etcdctl", "version")
    )
    assert f"etcdctl version: {version}" in out
    if not version.startswith("3.4."):  # etcdutl appeared in 3.5
        out = run_to_completion(
            k8s_cluster,
            k8s_namespace,
            _pod(f"utl-{tag}", image, "/usr/local/bin/etcdutl", "version"),
        )
        assert f"etcdutl version: {version}" in out


def test_busybox_resolves_cluster_dns(k8s_cluster, k8s_namespace):
    out = run_to_completion(
        k8s_cluster,
        k8s_namespace,
        _pod("dns", "local/busybox:1", "nslookup", "kubernetes.default.svc.cluster.local"),
    )
    assert "10.96.0.1" in out
