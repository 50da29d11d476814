"""The labelled-namespaces install (config/labelled) on the real API server: what its
ServiceAccount may do where, asked of the API server's own authorizer (`kubectl auth can-i
--as`), and operator.py run with that account's token, acting in the namespaces enrolled for
it as they are labelled and unlabelled, and nowhere else (marker: cluster)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.cluster import K8sCluster
from testbed.host import REPO, free_port
from testbed.operator_incluster import DEPLOYMENT, NAMESPACE, replicas
from tests.k8s_cluster import OWNER, _release_finalizers, _this_process
from tests.operator.conftest import http_get

pytestmark = pytest.mark.cluster

ACCOUNT = "etcd-runbook-operator"


def rendered(k8s: K8sCluster, path: str) -> list[dict[str, Any]]:
    out = k8s.kubectl("kustomize", str(REPO / "config" / path)).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def renamed(docs: list[dict[str, Any]], home: str) -> list[dict[str, Any]]:
    """The install as made under an operator namespace of its own (`home`), its cluster-wide
    objects and its Role in kube-node-lease named after it: nothing another install on this
    cluster (make demo, the e2e suite) binds or reads is touched."""
    names = {
        ACCOUNT: home,
        f"{ACCOUNT}-cluster": f"{home}-cluster",
        f"{ACCOUNT}-node-leases": f"{home}-node-leases",
    }
    text = yaml.safe_dump_all(docs).replace("etcd-operator-system", home)
    out = []
    for doc in yaml.safe_load_all(text):
        meta = doc["metadata"]
        if doc["kind"] in ("ClusterRole", "ClusterRoleBinding") or (
            meta.get("namespace") == "kube-node-lease"
        ):
            meta["name"] = names.get(meta["name"], meta["name"])
        if "roleRef" in doc:
            ref = doc["roleRef"]
            if ref["kind"] == "ClusterRole" or meta.get("namespace") == "kube-node-lease":
                ref["name"] = names.get(ref["name"], ref["name"])
        out.append(doc)
    return out


def enrol(k8s: K8sCluster, namespace: str, home: str, label: str) -> None:
    """What docs/install.md asks of an administrator: the RoleBinding (config/rbac/enroll),
    then the label."""
    (binding,) = renamed(rendered(k8s, "rbac/enroll"), home)
    binding["metadata"]["namespace"] = namespace
    k8s.kubectl("apply", "-f", "-", input=json.dumps(binding))
    k8s.kubectl("label", "namespace", namespace, label, "--overwrite")


def token_kubeconfig(k8s: K8sCluster, home: str, path: Path) -> Path:
    """A kubeconfig with only a token of the install's ServiceAccount (as
    hack/run-operator-as-sa makes one)."""
    view = json.loads(k8s.kubectl("config", "view", "--raw", "--minify", "-o", "json").stdout)
    cluster = view["clusters"][0]["cluster"]
    token = k8s.kubectl("-n", home, "create", "token", ACCOUNT, "--duration=1h").stdout.strip()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": cluster}],
        "users": [{"name": ACCOUNT, "user": {"token": token}}],
        "contexts": [{"name": ACCOUNT, "context": {"cluster": "local", "user": ACCOUNT}}],
        "current-context": ACCOUNT,
    }
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path


def paused_cluster(name: str) -> str:
    # Paused: the runbook only looks and reports, which is all this test needs of it.
    return json.dumps(
        {
            "apiVersion": "etcd.runbook.io/v1alpha1",
            "kind": "EtcdCluster",
            "metadata": {"name": name},
            "spec": {"size": 1, "paused": True},
        }
    )


def status(k8s: K8sCluster, ns: str, name: str) -> dict[str, Any]:
    out = k8s.kubectl("-n", ns, "get", "etcd", name, "-o", "json")
    return dict(json.loads(out.stdout).get("status") or {})


def reported(k8s: K8sCluster, ns: str, name: str, generation: int) -> bool:
    """A run of that generation has ended (status is written while it goes on, too)."""
    seen = status(k8s, ns, name)
    return seen.get("phase") == "Paused" and seen.get("observedGeneration") == generation


def test_labelled_install_acts_only_in_enrolled_namespaces(
    k8s_cluster: K8sCluster, k8s_namespace: str, tmp_path: Path
) -> None:
    k8s = k8s_cluster
    enrolled, home, outside = k8s_namespace, f"{k8s_namespace}-op", f"{k8s_namespace}-out"
    docs = rendered(k8s, "labelled")
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    (selector,) = [a.split("=", 1)[1] for a in args if a.startswith("--namespace-selector=")]
    k8s.kubectl(
        "apply",
        "--server-side",
        "-f",
        "-",
        input=yaml.safe_dump_all([d for d in docs if d["kind"] == "CustomResourceDefinition"]),
    )
    k8s.kubectl("wait", "--for=condition=Established", "crd/etcdclusters.etcd.runbook.io")
    install = [
        d
        for d in renamed(docs, home)
        if d["kind"] in ("Namespace", "ServiceAccount", "Role", "RoleBinding")
        or d["metadata"]["name"].startswith(home)
    ]
    for ns in (home, outside):
        k8s.kubectl(
            "create",
            "-f",
            "-",
            input=json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": ns, "annotations": {OWNER: _this_process()}},
                }
            ),
        )
    cluster_wide = [
        f"{d['kind'].lower()}/{d['metadata']['name']}"
        for d in install
        if d["kind"] in ("ClusterRole", "ClusterRoleBinding")
    ]
    proc: subprocess.Popen[bytes] | None = None
    log = tmp_path / "operator.log"
    # An operator of the default install (make demo, the e2e suite) would act on every
    # namespace, these too: scaled to 0 for the test, as hack/run-operator-as-sa does.
    running = replicas(k8s)
    if running != "0":
        k8s.kubectl("-n", NAMESPACE, "scale", "deployment", DEPLOYMENT, "--replicas=0")
        k8s.kubectl(
            "-n",
            NAMESPACE,
            "wait",
            "--for=delete",
            "pod",
            "-l",
            "app.kubernetes.io/name=etcd-runbook-operator",
            "--timeout=300s",
            timeout=320,
            check=False,
        )
    try:
        k8s.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(install))
        enrol(k8s, enrolled, home, selector)

        # --- what the API server lets the account do, where --------------------------------
        account = f"system:serviceaccount:{home}:{ACCOUNT}"

        def can(*args: str) -> bool:
            out = k8s.kubectl("auth", "can-i", f"--as={account}", *args, check=False)
            assert out.stdout.strip() in ("yes", "no"), out.stdout + out.stderr
            return out.stdout.strip() == "yes"

        for verb, what in (
            ("get", "secrets"),
            ("list", "secrets"),
            ("create", "pods"),
            ("delete", "pods"),
            ("create", "persistentvolumeclaims"),
            ("list", "etcdclusters.etcd.runbook.io"),
        ):
            assert can(verb, what, "-n", enrolled), f"{verb} {what} in the enrolled namespace"
            for other in (outside, "default", "kube-system"):
                assert not can(verb, what, "-n", other), f"{verb} {what} in {other}"
            assert not can(verb, what, "--all-namespaces"), f"{verb} {what} everywhere"
        # Cluster-wide, only reads: which namespaces are labelled, Nodes (those a volume's
        # affinity admits are listed by label), PersistentVolumes and node Leases.
        assert can("list", "namespaces") and can("watch", "namespaces")
        assert can("get", "nodes") and can("list", "nodes") and not can("delete", "nodes")
        assert can("get", "persistentvolumes") and not can("list", "persistentvolumes")
        assert not can("delete", "persistentvolumes")
        assert can("watch", "leases.coordination.k8s.io", "-n", "kube-node-lease")
        assert not can("update", "leases.coordination.k8s.io", "-n", "kube-node-lease")
        assert can("update", "leases.coordination.k8s.io", "-n", home), "its own Lease"
        assert not can("list", "leases.coordination.k8s.io", "-n", "kube-system")
        assert not can("create", "rolebindings", "-n", outside)
        denied = k8s.kubectl(f"--as={account}", "-n", outside, "get", "secrets", check=False)
        assert denied.returncode != 0 and "forbidden" in denied.stderr.lower(), denied.stderr

        # --- the watcher with that account's token ------------------------------------------
        for ns in (enrolled, outside):
            k8s.kubectl("-n", ns, "apply", "-f", "-", input=paused_cluster("e"))
        probe = free_port()
        env = dict(os.environ, PATH=f"{k8s.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
        proc = subprocess.Popen(
            [
                sys.executable,
                str(REPO / "operator.py"),
                "--kubeconfig",
                str(token_kubeconfig(k8s, home, tmp_path / "kubeconfig")),
                f"--namespace-selector={selector}",
                "--leader-elect",
                f"--leader-election-namespace={home}",
                f"--artifacts-dir={tmp_path / 'artifacts'}",
                f"--metrics-bind-address=127.0.0.1:{free_port()}",
                f"--health-probe-bind-address=127.0.0.1:{probe}",
                "--reconcile-period=300",
            ],
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        k8s.wait_for(
            lambda: reported(k8s, enrolled, "e", 1),
            timeout=120,
            interval=1,
            what="the enrolled namespace's cluster reported on",
        )
        assert http_get(probe, "/readyz")[0] == 200
        assert status(k8s, outside, "e") == {}, "nothing is done where it was not enrolled"
        text = log.read_text(errors="replace")
        assert f"@{outside}" not in text and "forbidden" not in text, text[-3000:]
        assert "nodeSilence is off" not in text, "the node Leases are readable"

        # Enrolled while it runs: seen within seconds.
        enrol(k8s, outside, home, selector)
        k8s.wait_for(
            lambda: reported(k8s, outside, "e", 1),
            timeout=60,
            interval=1,
            what="the newly enrolled namespace's cluster reported on",
        )

        # Withdrawn (label removed): no longer acted on, though its RoleBinding is still there.
        key = selector.split("=", 1)[0]
        k8s.kubectl("label", "namespace", outside, f"{key}-")
        k8s.wait_for(
            lambda: f"no longer watching namespace {outside}" in log.read_text(errors="replace"),
            timeout=30,
            interval=0.5,
            what="the namespace withdrawn",
        )
        k8s.kubectl(
            "-n", outside, "patch", "etcd", "e", "--type=merge", "-p", '{"spec":{"size":3}}'
        )
        # The enrolled namespace still is: a change there is acted on, then the other's is
        # known to have been left alone.
        k8s.kubectl(
            "-n", enrolled, "patch", "etcd", "e", "--type=merge", "-p", '{"spec":{"size":3}}'
        )
        k8s.wait_for(
            lambda: reported(k8s, enrolled, "e", 2),
            timeout=60,
            interval=1,
            what="a change in the enrolled namespace acted on",
        )
        assert status(k8s, outside, "e").get("observedGeneration") == 1
    finally:
        if proc is not None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
            print(log.read_text(errors="replace")[-4000:])
        _release_finalizers(k8s, outside)
        for ns in (home, outside):
            k8s.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        for obj in cluster_wide:
            k8s.kubectl("delete", obj, "--ignore-not-found", check=False)
        k8s.kubectl(
            "-n",
            "kube-node-lease",
            "delete",
            "role,rolebinding",
            f"{home}-node-leases",
            "--ignore-not-found",
            check=False,
        )
        if running != "0":
            k8s.kubectl(
                "-n",
                NAMESPACE,
                "scale",
                "deployment",
                DEPLOYMENT,
                f"--replicas={running}",
                check=False,
            )
