"""Helpers shared by the local-cluster tests (the fixtures live in tests/k8s_cluster.py)."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from testbed.cluster import K8sCluster
from testbed.host import REPO

VERSIONS = REPO / "hack" / "cluster.d" / "versions.sh"


def pinned(name: str) -> str:
    """A value pinned in hack/cluster.d/versions.sh (e.g. K8S_VERSION)."""
    match = re.search(rf"^{name}=(\S+)", VERSIONS.read_text(), re.MULTILINE)
    assert match, f"{name} not in {VERSIONS}"
    return match.group(1)


@pytest.fixture(scope="session")
def etcd_image() -> str:
    """The locally imported etcd 3.5 image, named as the official one."""
    out = subprocess.run(
        [str(REPO / "hack" / "etcd-bin"), "--supported"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    version = next(v for v in out if v.startswith("3.5."))
    return f"gcr.io/etcd-development/etcd:v{version}"


def pod_phase(cluster: K8sCluster, ns: str, name: str) -> str:
    return cluster.kubectl("-n", ns, "get", "pod", name, "-o", "jsonpath={.status.phase}").stdout


def run_to_completion(cluster: K8sCluster, ns: str, manifest: dict, timeout: float = 120) -> str:
    """Create a restartPolicy=Never Pod, wait until it finished, return its log.

    Fails with the log when the Pod failed."""
    name = manifest["metadata"]["name"]
    manifest.setdefault("apiVersion", "v1")
    manifest.setdefault("kind", "Pod")
    manifest["spec"].setdefault("restartPolicy", "Never")
    cluster.kubectl("-n", ns, "apply", "-f", "-", input=json.dumps(manifest))
    phase = cluster.wait_for(
        lambda: (
            pod_phase(cluster, ns, name) in ("Succeeded", "Failed") and pod_phase(cluster, ns, name)
        ),
        timeout=timeout,
        what=f"pod {ns}/{name} to finish",
    )
    logs = cluster.kubectl("-n", ns, "logs", name).stdout
    assert phase == "Succeeded", f"pod {name} {phase}:\n{logs}"
    return logs


def etcdctl_pod(name: str, image: str, endpoint: str, *args: str) -> dict:
    """A Pod whose only process is the etcd image's etcdctl (the image has no shell)."""
    return {
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {
                    "name": "etcdctl",
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["/usr/local/bin/etcdctl", f"--endpoints={endpoint}", *args],
                    "env": [{"name": "ETCDCTL_API", "value": "3"}],
                }
            ]
        },
    }
