"""config/default renders into one namespace with a least-privilege, hardened operator
Deployment whose ServiceAccount the RBAC bindings name."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "etcd-operator-system"
ACCOUNT = "etcd-runbook-operator"


def render(overlay: str) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl (for its built-in kustomize) is not installed")
    out = subprocess.run(
        [kubectl, "kustomize", str(ROOT / "config" / overlay)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    return render("default")


def one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def test_everything_namespaced_lives_in_the_operator_namespace(rendered):
    one(rendered, "Namespace", NAMESPACE)
    cluster_scoped = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"}
    for doc in rendered:
        if doc["kind"] not in cluster_scoped:
            assert doc["metadata"]["namespace"] == NAMESPACE, doc["metadata"]


def test_crd_and_account_are_there(rendered):
    for plural in ("etcdclusters", "etcdbackups", "etcdrestores"):
        one(rendered, "CustomResourceDefinition", f"{plural}.etcd.runbook.io")
    account = one(rendered, "ServiceAccount", ACCOUNT)
    assert account.get("automountServiceAccountToken", True) is True


def test_rbac_binds_the_operator_account(rendered):
    bindings = [d for d in rendered if d["kind"] in {"RoleBinding", "ClusterRoleBinding"}]
    assert {b["kind"] for b in bindings} == {"RoleBinding", "ClusterRoleBinding"}
    for binding in bindings:
        assert {"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE} in binding[
            "subjects"
        ], binding["metadata"]["name"]
        role_kind = binding["roleRef"]["kind"]
        one(rendered, role_kind, binding["roleRef"]["name"])


def test_deployment_is_hardened_and_probed(rendered):
    deployment = one(rendered, "Deployment", ACCOUNT)
    assert deployment["spec"]["replicas"] == 1
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == ACCOUNT
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    assert container["image"] == "etcd-runbook-operator:dev"
    assert container["imagePullPolicy"] == "IfNotPresent"
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    args = container["args"]
    for flag in (
        "--health-probe-bind-address=:8081",
        "--metrics-bind-address=:8080",
        "--leader-elect",
    ):
        assert flag in args
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": 8080, "health": 8081}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert set(container["resources"]) == {"requests", "limits"}
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"


def test_every_writable_path_is_an_empty_dir(rendered):
    pod = one(rendered, "Deployment", ACCOUNT)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert all("emptyDir" in volumes[name] for name in mounts.values())
    assert "/tmp" in mounts
    artifacts = next(a for a in container["args"] if a.startswith("--artifacts-dir="))
    assert artifacts.split("=", 1)[1] in mounts
    env = {e["name"]: e.get("value") for e in container["env"]}
    for var in ("HOME", "ANSIBLE_LOCAL_TEMP"):
        assert env[var].startswith("/tmp"), var


def test_metrics_service_targets_the_named_port(rendered):
    service = one(rendered, "Service", "etcd-runbook-operator-metrics")
    deployment = one(rendered, "Deployment", ACCOUNT)
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"


def test_namespaced_mode_grants_the_same_rules_in_the_watched_namespace_only():
    docs = render("namespaced")
    kinds = {d["kind"] for d in docs}
    assert "ClusterRoleBinding" not in kinds, "no cluster-wide rights"
    # Not even for the backup Jobs: each gets a Role of its own from the operator.
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "ClusterRole"] == []
    cluster_role = yaml.safe_load((ROOT / "config/rbac/role.yaml").read_text())
    role = one(docs, "Role", ACCOUNT)
    assert role["metadata"]["namespace"] == "etcd-clusters"
    # Nodes, their Leases (kube-node-lease) and PersistentVolumes are beyond what a Role of the
    # watched namespace can grant: without them the runbooks judge no member by its node or
    # its volume (docs/install.md).
    beyond = {"nodes", "leases", "persistentvolumes"}
    expected = [r for r in cluster_role["rules"] if not beyond & set(r["resources"])]
    assert len(expected) == len(cluster_role["rules"]) - 3
    assert role["rules"] == expected, "the two modes must grant the same rules"
    binding = one(docs, "RoleBinding", ACCOUNT)
    assert binding["metadata"]["namespace"] == "etcd-clusters"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}
    ]
    args = one(docs, "Deployment", ACCOUNT)["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--namespace=etcd-clusters" in args
