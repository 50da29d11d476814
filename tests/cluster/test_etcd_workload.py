"""An etcd Pod from the local image: readiness probe, headless-Service DNS, a ClusterIP
Service, and a PVC whose data outlives the Pod. Real Pods through containerd and runc."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from testbed.cluster import K8sCluster
from tests.cluster.conftest import etcdctl_pod, pod_phase, run_to_completion

pytestmark = pytest.mark.cluster

MEMBER = "etcd-0"
HEADLESS = "etcd"


def _member(ns: str, image: str) -> dict:
    fqdn = f"{MEMBER}.{HEADLESS}.{ns}.svc.cluster.local"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": MEMBER, "labels": {"app": "etcd-test"}},
        "spec": {
            "hostname": MEMBER,
            "subdomain": HEADLESS,
            "containers": [
                {
                    "name": "etcd",
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": [
                        "/usr/local/bin/etcd",
                        f"--name={MEMBER}",
                        "--data-dir=/var/lib/etcd/data",
                        "--listen-client-urls=http://0.0.0.0:2379",
                        f"--advertise-client-urls=http://{fqdn}:2379",
                        "--listen-peer-urls=http://0.0.0.0:2380",
                        f"--initial-advertise-peer-urls=http://{fqdn}:2380",
                        f"--initial-cluster={MEMBER}=http://{fqdn}:2380",
                    ],
                    "ports": [{"containerPort": 2379, "name": "client"}],
                    "readinessProbe": {
                        "httpGet": {"path": "/health", "port": 2379},
                        "periodSeconds": 2,
                    },
                    "volumeMounts": [{"name": "data", "mountPath": "/var/lib/etcd"}],
                }
            ],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        },
    }


def _objects(ns: str, image: str) -> list[dict]:
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": HEADLESS},
            "spec": {
                "clusterIP": "None",
                "selector": {"app": "etcd-test"},
                "ports": [{"name": "client", "port": 2379}],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "etcd-client"},
            "spec": {
                "selector": {"app": "etcd-test"},
                "ports": [{"name": "client", "port": 2379, "targetPort": 2379}],
            },
        },
        _member(ns, image),
    ]


def _wait_ready(cluster: K8sCluster, ns: str) -> None:
    def ready() -> bool:
        pod = json.loads(cluster.kubectl("-n", ns, "get", "pod", MEMBER, "-o", "json").stdout)
        conds = {c["type"]: c["status"] for c in pod["status"].get("conditions", [])}
        return conds.get("Ready") == "True"

    cluster.wait_for(ready, timeout=180, what=f"{ns}/{MEMBER} Ready")


@pytest.fixture(scope="module")
def etcd_ns(k8s_cluster: K8sCluster, etcd_image: str) -> Iterator[str]:
    ns = f"t-etcd-{uuid.uuid4().hex[:8]}"
    k8s_cluster.kubectl("create", "namespace", ns)
    try:
        items = {"apiVersion": "v1", "kind": "List", "items": _objects(ns, etcd_image)}
        k8s_cluster.kubectl("-n", ns, "apply", "-f", "-", input=json.dumps(items))
        _wait_ready(k8s_cluster, ns)
        yield ns
    finally:
        k8s_cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def test_member_passes_readiness_probe(k8s_cluster, etcd_ns):
    assert pod_phase(k8s_cluster, etcd_ns, MEMBER) == "Running"


def test_second_pod_reaches_member_by_headless_dns_name(k8s_cluster, etcd_ns, etcd_image):
    endpoint = f"http://{MEMBER}.{HEADLESS}.{etcd_ns}.svc.cluster.local:2379"
    put = etcdctl_pod("put-by-dns", etcd_image, endpoint, "put", "greeting", "hello-dns")
    assert run_to_completion(k8s_cluster, etcd_ns, put).strip() == "OK"
    get = etcdctl_pod("get-by-dns", etcd_image, endpoint, "get", "--print-value-only", "greeting")
    assert run_to_completion(k8s_cluster, etcd_ns, get).strip() == "hello-dns"


def test_clusterip_service_reaches_member(k8s_cluster, etcd_ns, etcd_image):
    ip = k8s_cluster.kubectl(
        "-n", etcd_ns, "get", "service", "etcd-client", "-o", "jsonpath={.spec.clusterIP}"
    ).stdout
    assert ip.startswith("10.96.")
    put = etcdctl_pod("put-by-svc", etcd_image, f"http://{ip}:2379", "put", "via", "clusterip")
    assert run_to_completion(k8s_cluster, etcd_ns, put).strip() == "OK"
    by_name = f"http://etcd-client.{etcd_ns}.svc:2379"
    get = etcdctl_pod("get-by-svc", etcd_image, by_name, "get", "--print-value-only", "via")
    assert run_to_completion(k8s_cluster, etcd_ns, get).strip() == "clusterip"


def test_pvc_bound_and_data_survives_pod_recreation(k8s_cluster, etcd_ns, etcd_image):
    pvc = json.loads(k8s_cluster.kubectl("-n", etcd_ns, "get", "pvc", "data", "-o", "json").stdout)
    assert pvc["status"]["phase"] == "Bound"
    pv = json.loads(
        k8s_cluster.kubectl("get", "pv", pvc["spec"]["volumeName"], "-o", "json").stdout
    )
    assert pv["spec"]["storageClassName"] == "erop-hostdir"

    endpoint = f"http://{MEMBER}.{HEADLESS}.{etcd_ns}.svc.cluster.local:2379"
    put = etcdctl_pod("put-durable", etcd_image, endpoint, "put", "durable", "kept")
    assert run_to_completion(k8s_cluster, etcd_ns, put).strip() == "OK"

    k8s_cluster.kubectl("-n", etcd_ns, "delete", "pod", MEMBER, "--wait=true", timeout=180)
    member = _member(etcd_ns, etcd_image)
    k8s_cluster.kubectl("-n", etcd_ns, "apply", "-f", "-", input=json.dumps(member))
    _wait_ready(k8s_cluster, etcd_ns)

    get = etcdctl_pod("get-durable", etcd_image, endpoint, "get", "--print-value-only", "durable")
    assert run_to_completion(k8s_cluster, etcd_ns, get).strip() == "kept"
