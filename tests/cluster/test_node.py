"""The node registered, is Ready and runs the pinned Kubernetes version."""

from __future__ import annotations

import json

import pytest

from tests.cluster.conftest import pinned

pytestmark = pytest.mark.cluster


def test_node_ready_with_pinned_version(k8s_cluster):
    nodes = json.loads(k8s_cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    by_name = {n["metadata"]["name"]: n for n in nodes}
    assert "erop-node0" in by_name, f"nodes: {sorted(by_name)}"
    node = by_name["erop-node0"]
    ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"]
    assert ready == "True"
    assert node["status"]["nodeInfo"]["kubeletVersion"] == pinned("K8S_VERSION")
    assert node["status"]["nodeInfo"]["kubeProxyVersion"] in ("", pinned("K8S_VERSION"))
    addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
    assert addresses["InternalIP"] == "10.244.0.1"


def test_server_and_kubectl_versions_match_pin(k8s_cluster):
    version = json.loads(k8s_cluster.kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == pinned("K8S_VERSION")
    assert version["clientVersion"]["gitVersion"] == pinned("K8S_VERSION")


def test_cluster_dns_service_at_fixed_ip(k8s_cluster):
    ip = k8s_cluster.kubectl(
        "-n", "kube-system", "get", "service", "kube-dns", "-o", "jsonpath={.spec.clusterIP}"
    ).stdout
    assert ip == pinned("DNS_SVC_IP")
