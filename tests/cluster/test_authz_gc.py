"""Authorization is real (RBAC denies a ServiceAccount without rights) and the garbage
collector and namespace controller remove what they own."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

pytestmark = pytest.mark.cluster


def _client_with_token(k8s_cluster, token: str) -> client.CoreV1Api:
    admin = k8s_cluster.api_client().configuration
    conf = client.Configuration()
    conf.host, conf.ssl_ca_cert = admin.host, admin.ssl_ca_cert
    conf.api_key = {"authorization": f"Bearer {token}"}
    return client.CoreV1Api(client.ApiClient(conf))


def test_serviceaccount_without_rights_gets_403(k8s_cluster, k8s_namespace):
    ns = k8s_namespace
    k8s_cluster.kubectl("-n", ns, "create", "serviceaccount", "nobody")
    token = k8s_cluster.kubectl("-n", ns, "create", "token", "nobody").stdout.strip()
    api = _client_with_token(k8s_cluster, token)

    with pytest.raises(ApiException) as denied:
        api.list_namespaced_pod(ns)
    assert denied.value.status == 403
    assert f"system:serviceaccount:{ns}:nobody" in str(denied.value.body)

    # The same token succeeds once RBAC grants the right: the 403 above came from authz.
    k8s_cluster.kubectl("-n", ns, "create", "role", "pod-reader", "--verb=list", "--resource=pods")
    k8s_cluster.kubectl(
        "-n",
        ns,
        "create",
        "rolebinding",
        "nobody-reads",
        "--role=pod-reader",
        f"--serviceaccount={ns}:nobody",
    )
    k8s_cluster.wait_for(lambda: api.list_namespaced_pod(ns) is not None, timeout=30)


def test_owner_deletion_garbage_collects_dependent(k8s_cluster, k8s_namespace):
    ns = k8s_namespace
    k8s_cluster.kubectl("-n", ns, "create", "configmap", "owner")
    uid = k8s_cluster.kubectl(
        "-n", ns, "get", "configmap", "owner", "-o", "jsonpath={.metadata.uid}"
    ).stdout
    dependent = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "dependent",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}
            ],
        },
    }
    k8s_cluster.kubectl("-n", ns, "apply", "-f", "-", input=json.dumps(dependent))
    k8s_cluster.kubectl("-n", ns, "delete", "configmap", "owner")
    k8s_cluster.wait_for(
        lambda: (
            k8s_cluster.kubectl("-n", ns, "get", "configmap", "dependent", check=False).returncode
            != 0
        ),
        timeout=60,
        what="the garbage collector to delete the dependent ConfigMap",
    )


def test_namespace_deletion_removes_its_contents(k8s_cluster):
    ns = "t-gc-namespace"
    k8s_cluster.kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=true", timeout=180)
    k8s_cluster.kubectl("create", "namespace", ns)
    k8s_cluster.kubectl("-n", ns, "create", "configmap", "inside", "--from-literal=a=b")
    k8s_cluster.kubectl(
        "-n",
        ns,
        "create",
        "deployment",
        "sleeper",
        "--image=local/busybox:1",
        "--",
        "sleep",
        "3600",
    )
    k8s_cluster.wait_for(
        lambda: k8s_cluster.kubectl("-n", ns, "get", "pods", "-o", "name").stdout.strip(),
        timeout=60,
        what="the Deployment's Pod",
    )
    k8s_cluster.kubectl("delete", "namespace", ns, "--wait=true", timeout=180)
    gone = k8s_cluster.kubectl("get", "namespace", ns, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr
    leftovers = k8s_cluster.kubectl(
        "get",
        "pods,configmaps,deployments,replicasets",
        "-A",
        f"--field-selector=metadata.namespace={ns}",
        "-o",
        "name",
    ).stdout
    assert leftovers.strip() == ""
