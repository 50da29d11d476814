"""Session fixture for the local Kubernetes test bed (hack/cluster, docs/local-cluster.md), over
testbed.cluster.

`k8s_cluster` runs `hack/cluster up` once per session (a running cluster is reused) and fails,
never skips, when the cluster cannot come up, and first deletes the test namespaces a killed run
left behind. `k8s_namespace` gives each test its own namespace and deletes it afterwards.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.cluster import K8sCluster, cluster_up
from tests.session_lock import exclusive


@pytest.fixture(scope="session")
def k8s_cluster() -> K8sCluster:
    # One worker at a time: a cold `up` builds and starts what the others would too.
    with exclusive("cluster-up"):
        k8s = cluster_up()
        _clear_abandoned_namespaces(k8s)
    return k8s


# Each test namespace names the test process that made it, so a later session can tell the
# namespaces of a run that was killed (or of a machine that restarted) from those of a run
# still going beside it.
OWNER = "test.etcd.runbook.io/owner"
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def _boot_id() -> str:
    return BOOT_ID.read_text().strip()


def _this_process() -> str:
    return f"{_boot_id()}/{os.getpid()}"


def abandoned(
    namespaces: list[dict[str, Any]], boot_id: str, alive: Callable[[int], bool]
) -> list[str]:
    """The test namespaces (t-*) whose owner process is gone: made before the machine last
    started, or by a process that has ended. One without an owner is left alone: nothing says
    whose it is."""
    gone = []
    for ns in namespaces:
        meta = ns.get("metadata") or {}
        name = str(meta.get("name") or "")
        owner = str((meta.get("annotations") or {}).get(OWNER) or "")
        if not name.startswith("t-") or "/" not in owner:
            continue
        boot, _, pid = owner.partition("/")
        if boot != boot_id or not pid.isdigit() or not alive(int(pid)):
            gone.append(name)
    return sorted(gone)


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def _clear_abandoned_namespaces(k8s: K8sCluster) -> None:
    """Delete what a killed test run left: its EtcdClusters would otherwise keep running etcd
    (and loading this run), and with no operator to finalize them hold their namespace in
    Terminating for good."""
    listed = json.loads(k8s.kubectl("get", "namespaces", "-o", "json").stdout)["items"]
    for name in abandoned(listed, _boot_id(), _alive):
        print(f"deleting {name}, left by a test run that has ended")
        _release_finalizers(k8s, name)
        k8s.kubectl("delete", "namespace", name, "--wait=false", check=False)


@contextlib.contextmanager
def namespace_for_test(k8s_cluster: K8sCluster) -> Iterator[str]:
    """A namespace of this test process, deleted with what is in it when the block ends (a
    test that needs a second one uses this; most take the `k8s_namespace` fixture)."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    manifest = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "annotations": {OWNER: _this_process()}},
    }
    k8s_cluster.kubectl("create", "-f", "-", input=json.dumps(manifest))
    try:
        yield name
    finally:
        _release_finalizers(k8s_cluster, name)
        k8s_cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def k8s_namespace(k8s_cluster: K8sCluster) -> Iterator[str]:
    with namespace_for_test(k8s_cluster) as name:
        yield name


# Custom objects whose controller has stopped keep their finalizers and hold the namespace in
# Terminating for good. The namespace controller retries each such namespace about every second
# against the controller-manager's client rate limit, so a few of them starve the deletion of
# every other namespace (molecule's destroy timed out so). Tests own their namespace: once its
# deletion is asked, nothing is left to finalize. The objects are deleted first and their
# finalizers released after: an object being deleted can get no new finalizer, whereas one
# released while still live got its finalizer back from an operator watching every namespace
# (a `make demo` one) and held the namespace again.
_OWN_GROUP_SUFFIX = "runbook.io"


def _release_finalizers(k8s_cluster: K8sCluster, namespace: str) -> None:
    crds = k8s_cluster.kubectl(
        "get", "crd", "-o", "jsonpath={.items[*].metadata.name}", check=False
    ).stdout.split()
    kinds = [crd for crd in crds if crd.endswith(_OWN_GROUP_SUFFIX)]
    if not kinds:
        return
    k8s_cluster.kubectl(
        "delete", ",".join(kinds), "-n", namespace, "--all", "--wait=false", check=False
    )
    names = k8s_cluster.kubectl(
        "get", ",".join(kinds), "-n", namespace, "-o", "name", check=False
    ).stdout.split()
    for obj in names:
        k8s_cluster.kubectl(
            "patch",
            obj,
            "-n",
            namespace,
            "--type",
            "merge",
            "-p",
            '{"metadata":{"finalizers":null}}',
            check=False,
        )
