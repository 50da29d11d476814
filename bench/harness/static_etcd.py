"""A 3-member etcd started by hand on the local Kubernetes, as etcd's documentation does it:
the baseline the operator's clusters are measured against (bench/bootstrap.py starts it
fresh, bench/restore.py from a restored snapshot).

Its members are named as the operator names them (<name>-<i>.<name>.<ns>.svc.cluster.local)
and all listed from the start (--initial-cluster-state new).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bench.harness.cluster import gone
from etcd_runbook_operator.kube import Kube
from testbed.cluster import wait_for

SIZE = 3
STATIC_LABEL = "bench.etcd.runbook.io/static"


def static_tls_secret(ns: str, name: str) -> dict[str, Any]:
    """A CA and one certificate for every member's peer and client port and for the client
    (made before a clock starts: the operator's cluster makes its own inside its clock)."""
    from etcd_runbook.clients.etcd_tls import Profile, cert_pem, create_ca, issue_cert, key_pem

    ca = create_ca(f"{name}.{ns} bench CA", 1)
    sans = [f"DNS:*.{name}.{ns}.svc.cluster.local", f"DNS:{name}.{ns}.svc.cluster.local"]
    cert, key = issue_cert(ca, Profile(name, tuple(sans), ("serverAuth", "clientAuth")), 1)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{name}-tls", "labels": {STATIC_LABEL: name}},
        "type": "kubernetes.io/tls",
        "stringData": {
            "ca.crt": cert_pem(ca.cert),
            "tls.crt": cert_pem(cert),
            "tls.key": key_pem(key),
        },
    }


def member_fqdn(ns: str, name: str, member: str) -> str:
    return f"{member}.{name}.{ns}.svc.cluster.local"


def initial_cluster(ns: str, name: str) -> str:
    return ",".join(
        f"{m}=http://{member_fqdn(ns, name, m)}:2380" for m in (f"{name}-{i}" for i in range(SIZE))
    )


def static_objects(
    ns: str,
    name: str,
    image: str,
    app: str = "etcd-static-bench",
    label: str = STATIC_LABEL,
    durable: bool = False,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The headless Service and three member Pods, named as the operator names them
    (<name>-<i>.<name>.<ns>.svc.cluster.local), every member listed from the start, labelled
    `app` and `label`=<name>, data in an emptyDir `data` mounted at /var/lib/etcd. `durable`:
    the data on a claim `<member>-data` each and TLS between members and for clients, from the
    Secret `<name>-tls` (bench/bootstrap.py makes both)."""
    members = [f"{name}-{i}" for i in range(SIZE)]
    scheme = "https" if durable else "http"

    def fqdn(member: str) -> str:
        return member_fqdn(ns, name, member)

    initial = initial_cluster(ns, name).replace("http://", f"{scheme}://")
    labels = {"app.kubernetes.io/name": app, label: name}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "clusterIP": "None",
            # As the operator's: peers resolve each other before any is Ready.
            "publishNotReadyAddresses": True,
            "selector": labels,
            "ports": [
                {"name": "client", "port": 2379, "targetPort": 2379, "protocol": "TCP"},
                {"name": "peer", "port": 2380, "targetPort": 2380, "protocol": "TCP"},
            ],
        },
    }
    pods = []
    for member in members:
        args = [
            f"--name={member}",
            "--data-dir=/var/lib/etcd/data",
            f"--listen-peer-urls={scheme}://0.0.0.0:2380",
            f"--listen-client-urls={scheme}://0.0.0.0:2379",
            "--listen-metrics-urls=http://0.0.0.0:2381",
            f"--advertise-client-urls={scheme}://{fqdn(member)}:2379",
            f"--initial-advertise-peer-urls={scheme}://{fqdn(member)}:2380",
            f"--initial-cluster={initial}",
            "--initial-cluster-state=new",
            f"--initial-cluster-token={name}",
        ]
        mounts: list[dict[str, Any]] = [{"name": "data", "mountPath": "/var/lib/etcd"}]
        volumes: list[dict[str, Any]] = [{"name": "data", "emptyDir": {}}]
        if durable:
            tls = "/etc/etcd/tls"
            args += [
                "--client-cert-auth=true",
                f"--trusted-ca-file={tls}/ca.crt",
                f"--cert-file={tls}/tls.crt",
                f"--key-file={tls}/tls.key",
                "--peer-client-cert-auth=true",
                f"--peer-trusted-ca-file={tls}/ca.crt",
                f"--peer-cert-file={tls}/tls.crt",
                f"--peer-key-file={tls}/tls.key",
            ]
            mounts.append({"name": "tls", "mountPath": tls, "readOnly": True})
            volumes = [
                {"name": "data", "persistentVolumeClaim": {"claimName": f"{member}-data"}},
                {"name": "tls", "secret": {"secretName": f"{name}-tls", "defaultMode": 0o440}},
            ]
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": member, "labels": labels},
                "spec": {
                    "hostname": member,
                    "subdomain": name,
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 65532,
                        "runAsGroup": 65532,
                        "fsGroup": 65532,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": "etcd",
                            "image": image,
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["/usr/local/bin/etcd"],
                            "args": args,
                            "ports": [
                                {"name": "client", "containerPort": 2379},
                                {"name": "peer", "containerPort": 2380},
                                {"name": "metrics", "containerPort": 2381},
                            ],
                            "readinessProbe": {
                                "httpGet": {"path": "/health", "port": 2381},
                                "periodSeconds": 5,
                                "timeoutSeconds": 3,
                                "failureThreshold": 3,
                            },
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "runAsNonRoot": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "volumeMounts": mounts,
                        }
                    ],
                    "volumes": volumes,
                },
            }
        )
    return service, pods


def create_static(
    kube: Kube,
    ns: str,
    service: dict[str, Any],
    pods: list[dict[str, Any]],
    claims: Iterable[dict[str, Any]] = (),
) -> None:
    """POST the Service, the claims, then the Pods (all members start at once)."""
    core = f"/api/v1/namespaces/{ns}"
    kube.create(f"{core}/services", service)
    for claim in claims:
        kube.create(f"{core}/persistentvolumeclaims", claim)
    for pod in pods:
        kube.create(f"{core}/pods", pod)


def delete_static(kube: Kube, ns: str, name: str, members: list[str]) -> None:
    """Delete the Pods and the Service, then wait until the Pods are gone."""
    core = f"/api/v1/namespaces/{ns}"
    for member in members:
        kube.delete(f"{core}/pods/{member}")
    kube.delete(f"{core}/services/{name}")
    wait_for(
        lambda: all(gone(kube, f"{core}/pods/{m}") for m in members),
        300,
        1,
        f"{name}'s Pods gone",
    )
