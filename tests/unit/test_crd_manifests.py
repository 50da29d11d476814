"""config/default renders into one namespace with a least-privilege, hardened operator
Deployment whose ServiceAccount the RBAC bindings name; config/namespaced and config/labelled
grant the same rules per namespace, and nothing namespaced cluster-wide (docs/install.md)."""

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


# Kinds that live in no namespace: only a ClusterRole can grant them.
CLUSTER_SCOPED = {
    "namespaces",
    "nodes",
    "persistentvolumes",
    "storageclasses",
    "priorityclasses",
    "customresourcedefinitions",
    "clusterroles",
    "clusterrolebindings",
}
READ = {"get", "list", "watch"}


def full_rules() -> list[dict[str, Any]]:
    return list(yaml.safe_load((ROOT / "config/rbac/role.yaml").read_text())["rules"])


def container_args(docs: list[dict[str, Any]]) -> list[str]:
    return list(
        one(docs, "Deployment", ACCOUNT)["spec"]["template"]["spec"]["containers"][0]["args"]
    )


def test_the_default_install_watches_every_namespace_with_the_full_rules(rendered):
    # The default (docs/install.md says why): every namespace, so the rules hold everywhere.
    args = container_args(rendered)
    assert not [a for a in args if a.startswith(("--namespace=", "--namespace-selector="))]
    binding = one(rendered, "ClusterRoleBinding", ACCOUNT)
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": ACCOUNT,
    }


def test_labelled_mode_holds_nothing_namespaced_cluster_wide():
    docs = render("labelled")
    assert "--namespace-selector=etcd.runbook.io/enrolled=true" in container_args(docs)
    assert not [a for a in container_args(docs) if a.startswith("--namespace=")]
    # One cluster-wide binding, to reads of cluster-scoped kinds only: no Secret, Pod or claim
    # of any namespace.
    bindings = [d for d in docs if d["kind"] == "ClusterRoleBinding"]
    assert [b["roleRef"]["name"] for b in bindings] == [f"{ACCOUNT}-cluster"]
    cluster_role = one(docs, "ClusterRole", f"{ACCOUNT}-cluster")
    for rule in cluster_role["rules"]:
        assert set(rule["resources"]) <= CLUSTER_SCOPED, rule
        assert set(rule["verbs"]) <= READ, rule
    # What the full rules read of cluster-scoped kinds (Nodes; volumes, should the runbooks
    # read them) is here too, or the runbooks would lack it in this mode only. Binding the
    # backup Jobs' ClusterRole is granted per namespace, as in the full rules.
    for rule in full_rules():
        wanted = set(rule["resources"]) & CLUSTER_SCOPED - {"clusterroles"}
        if wanted:
            assert any(
                wanted <= set(r["resources"]) and set(rule["verbs"]) <= set(r["verbs"])
                for r in cluster_role["rules"]
            ), rule
    # The node Leases: read in kube-node-lease only, with the verbs of the full rules.
    (leases,) = [r for r in full_rules() if "leases" in r["resources"]]
    role = one(docs, "Role", f"{ACCOUNT}-node-leases")
    assert role["metadata"]["namespace"] == "kube-node-lease"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": leases["verbs"]}
    ]
    # No other namespace gets a Role or RoleBinding from the install itself.
    for doc in docs:
        if doc["kind"] in ("Role", "RoleBinding"):
            assert doc["metadata"]["namespace"] in (NAMESPACE, "kube-node-lease"), doc["metadata"]
        if doc["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            assert doc["subjects"] == [
                {"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}
            ]
    # The full rules ship unbound: each enrolled namespace binds them (config/rbac/enroll).
    assert one(docs, "ClusterRole", ACCOUNT)["rules"] == full_rules()


def test_enrolment_binds_the_full_rules_in_one_namespace():
    (binding,) = render("rbac/enroll")
    assert binding["kind"] == "RoleBinding"
    assert binding["metadata"]["namespace"] == "etcd-clusters"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": ACCOUNT,
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}
    ]


def test_the_allow_lists_are_the_operator_s_settings_empty_by_default(rendered):
    pod = one(rendered, "Deployment", ACCOUNT)["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["ETCD_RUNBOOK_ALLOWED_REPOSITORIES"] == ""
    assert env["ETCD_RUNBOOK_ALLOWED_PRIORITY_CLASSES"] == ""
    assert env["ETCD_RUNBOOK_CLUSTER_DOMAIN"] == "cluster.local"
