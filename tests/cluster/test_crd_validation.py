"""The EtcdCluster CRD on the real API server of the local cluster: bad objects are refused
with the field named, good ones get their defaults, CEL rules hold, /scale and /status work.
The EtcdRestore's spec.cluster.spec is held to the same schema and rules.

Objects are created paused, so an operator running on the same cluster leaves them alone; a
restore names an EtcdBackup that does not exist, so such an operator refuses it, making
nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testbed.cluster import K8sCluster
from testbed.host import REPO

pytestmark = pytest.mark.cluster

CRD = REPO / "config/crd/bases/etcd.runbook.io_etcdclusters.yaml"
RESTORE_CRD = REPO / "config/crd/bases/etcd.runbook.io_etcdrestores.yaml"


def established(cluster: K8sCluster, path: Path, name: str) -> K8sCluster:
    # Applied as written: the API server compiles every CEL rule and estimates its cost here,
    # refusing the CRD for a rule that does not compile or costs too much.
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{name}")
    return cluster


@pytest.fixture(scope="module")
def crd(k8s_cluster: K8sCluster) -> K8sCluster:
    return established(k8s_cluster, CRD, "etcdclusters.etcd.runbook.io")


@pytest.fixture(scope="module")
def restore_crd(crd: K8sCluster) -> K8sCluster:
    return established(crd, RESTORE_CRD, "etcdrestores.etcd.runbook.io")


def manifest(name: str, spec: dict[str, Any]) -> str:
    return json.dumps(
        {
            "apiVersion": "etcd.runbook.io/v1alpha1",
            "kind": "EtcdCluster",
            "metadata": {"name": name},
            "spec": {"paused": True, **spec},
        }
    )


def create(cluster: K8sCluster, ns: str, name: str, spec: dict[str, Any], check: bool = True):
    return cluster.kubectl("-n", ns, "create", "-f", "-", input=manifest(name, spec), check=check)


def get(cluster: K8sCluster, ns: str, name: str) -> dict[str, Any]:
    return json.loads(cluster.kubectl("-n", ns, "get", "etcd", name, "-o", "json").stdout)


def patch(cluster: K8sCluster, ns: str, name: str, body: dict[str, Any], check: bool = False):
    return cluster.kubectl(
        "-n", ns, "patch", "etcd", name, "--type=merge", "-p", json.dumps(body), check=check
    )


def refused(proc) -> str:
    assert proc.returncode != 0, f"accepted: {proc.stdout}"
    return proc.stderr


BAD_SPECS: list[tuple[dict[str, Any], str]] = [
    (
        {"size": 0},
        "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1",
    ),
    (
        {"size": 10},
        "spec.size: Invalid value: 10: spec.size in body should be less than or equal to 9",
    ),
    ({"version": "latest"}, 'spec.version: Invalid value: "latest": spec.version in body'),
    ({"version": "3.7.0"}, 'spec.version: Invalid value: "3.7.0"'),
    ({"repository": "quay.io/coreos/etcd:v3.5.0"}, "spec.repository: Invalid value"),
    ({"storage": {"size": "1GB"}}, "spec.storage.size: Invalid value"),
    ({"storage": {"size": "10 Gi"}}, 'spec.storage.size: Invalid value: "10 Gi"'),
    ({"storage": {"size": "0"}}, "spec.storage.size must be at least 512Mi"),
    ({"storage": {"size": "256Mi"}}, "spec.storage.size must be at least 512Mi"),
    (
        {"storage": {"quotaBackendBytes": "2GB"}},
        "spec.storage.quotaBackendBytes: Invalid value",
    ),
    (
        {"storage": {"size": "1Gi", "quotaBackendBytes": "321Mi"}},
        "spec.storage.quotaBackendBytes must be 64Mi to 8Gi and fit the volume",
    ),
    (
        {"storage": {"size": "1Gi", "quotaBackendBytes": "32Mi"}},
        "spec.storage.quotaBackendBytes must be 64Mi to 8Gi",
    ),
    (
        {"defragmentation": {"minReclaim": "lots"}},
        "spec.defragmentation.minReclaim must be a quantity of bytes such as 64Mi",
    ),
    (
        {"defragmentation": {"memberTimeout": "0s"}},
        "spec.defragmentation.memberTimeout must be a duration above zero",
    ),
    (
        {"defragmentation": {"memberTimeout": "11m"}},
        "spec.defragmentation.memberTimeout must be at most 10m",
    ),
    (
        {"defragmentation": {"schedule": "at three"}},
        "spec.defragmentation.schedule must be a cron line of five fields",
    ),
    (
        {"defragmentation": {"schedule": "@daily", "window": "30s"}},
        "spec.defragmentation.window must be a duration from 1m to 168h",
    ),
    (
        {"defragmentation": {"schedule": "@daily", "window": "200h"}},
        "spec.defragmentation.window must be a duration from 1m to 168h",
    ),
    (
        {"defragmentation": {"schedule": "@daily", "timeZone": "../etc"}},
        "spec.defragmentation.timeZone must be an IANA time zone",
    ),
    (
        {"etcd": {"heartbeatInterval": 300, "electionTimeout": 1000}},
        "spec.etcd.electionTimeout must be at least five heartbeats",
    ),
    (
        {"etcd": {"autoCompactionMode": "revision"}},
        "spec.etcd.autoCompactionMode revision needs spec.etcd.autoCompactionRetention",
    ),
    (
        {"etcd": {"autoCompactionRetention": "10000"}},
        "spec.etcd.autoCompactionRetention must be a duration such as 30m",
    ),
    (
        {"etcd": {"maxRequestBytes": "1Gi"}},
        "spec.etcd.maxRequestBytes must be a quantity from 1Ki to 64Mi",
    ),
    ({"etcd": {"logLevel": "loud"}}, 'spec.etcd.logLevel: Unsupported value: "loud"'),
    ({"pod": {"antiAffinity": "always"}}, 'spec.pod.antiAffinity: Unsupported value: "always"'),
    (
        {"tls": {"enabled": False, "secrets": {"peer": "p", "server": "s", "client": "c"}}},
        "spec.tls.secrets requires spec.tls.enabled: true",
    ),
    (
        {"pod": {"labels": {"etcd.runbook.io/cluster": "other"}}},
        "spec.pod.labels may not set etcd.runbook.io/",
    ),
    (
        {"version": "3.6.16", "imageDigests": {"3.5.35": "sha256:" + "a" * 64}},
        "spec.imageDigests names no digest for spec.version",
    ),
    (
        {"imageDigests": {"latest": "sha256:" + "a" * 64}},
        "spec.imageDigests keys are etcd versions such as 3.6.16",
    ),
    ({"imageDigests": {"3.6.16": "sha256:abc"}}, "spec.imageDigests.3.6.16"),
    ({"pod": {"imagePullSecrets": [{}]}}, "spec.pod.imagePullSecrets[0].name: Required value"),
    (
        {"pod": {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone"}]}},
        "spec.pod.topologySpreadConstraints[0].whenUnsatisfiable: Required value",
    ),
    ({"pod": {"securityContext": {"runAsUser": 0}}}, "spec.pod.securityContext.runAsUser"),
]


@pytest.mark.parametrize(("spec", "message"), BAD_SPECS)
def test_bad_spec_is_refused_naming_the_field(crd, k8s_namespace, spec, message):
    stderr = refused(create(crd, k8s_namespace, "bad", spec, check=False))
    assert message in stderr, stderr
    assert crd.kubectl("-n", k8s_namespace, "get", "etcd", "-o", "name").stdout == ""


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("1st", "metadata.name must start with a letter"),
        ("a" * 51, "metadata.name must be at most 50 characters"),
    ],
)
def test_bad_name_is_refused(crd, k8s_namespace, name, message):
    assert message in refused(create(crd, k8s_namespace, name, {}, check=False))


def test_empty_spec_gets_the_defaults(crd, k8s_namespace):
    create(crd, k8s_namespace, "defaults", {})
    assert get(crd, k8s_namespace, "defaults")["spec"] == {
        "size": 3,
        "version": "3.6.16",
        "repository": "gcr.io/etcd-development/etcd",
        "storage": {"size": "1Gi"},
        "tls": {"enabled": True},
        "pod": {"antiAffinity": "preferred"},
        "defragmentation": {
            "enabled": True,
            "freePercent": 50,
            "minReclaim": "64Mi",
            "memberTimeout": "10m",
        },
        "paused": True,
    }


def test_a_defragmentation_window_is_taken(crd, k8s_namespace):
    policy = {
        "schedule": "30 2 * * SAT,SUN",
        "window": "1h30m",
        "timeZone": "Europe/Berlin",
        "memberTimeout": "10m",
    }
    create(crd, k8s_namespace, "window", {"defragmentation": policy})
    taken = get(crd, k8s_namespace, "window")["spec"]["defragmentation"]
    assert {k: taken[k] for k in policy} == policy


def test_conventions_of_a_cluster_are_taken(crd, k8s_namespace):
    digest = "sha256:" + "0123456789abcdef" * 4
    pod = {
        "imagePullSecrets": [{"name": "mirror-creds"}],
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
            }
        ],
        "securityContext": {"fsGroup": 2000, "fsGroupChangePolicy": "Always"},
    }
    spec = {
        "repository": "registry.example.com/mirror/etcd",
        "imageDigests": {"3.6.16": digest},
        "pod": pod,
    }
    create(crd, k8s_namespace, "pinned", spec)
    taken = get(crd, k8s_namespace, "pinned")["spec"]
    assert taken["imageDigests"] == {"3.6.16": digest}
    assert {k: taken["pod"][k] for k in pod} == pod


def test_short_name_and_printer_columns(crd, k8s_namespace):
    create(crd, k8s_namespace, "columns", {"size": 5})
    header, row = crd.kubectl("-n", k8s_namespace, "get", "etcd").stdout.splitlines()
    assert header.split() == [
        "NAME", "SIZE", "READY", "VERSION", "AVAILABLE", "HEALTH", "PHASE", "AGE"
    ]  # fmt: skip
    assert row.split()[:2] == ["columns", "5"]
    # The status an operator writes shows in the columns; -o wide adds the leader and the ID.
    status = {
        "status": {
            "phase": "Running",
            "readyMembers": 3,
            "currentVersion": "3.6.16",
            "leader": "columns-1",
            "clusterID": "cdf818194e3a8c32",
            "lastBackup": {
                "backup": "nightly",
                "time": "2026-01-01T00:00:00Z",
                "location": "s3://b/k",
            },
            "conditions": [
                {
                    "type": t,
                    "status": s,
                    "reason": r,
                    "message": "m",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
                for t, s, r in (
                    ("Available", "True", "QuorumHealthy"),
                    ("Degraded", "True", "NodeLost"),
                )
            ],
        }
    }

    def shown() -> list[str]:
        # Written again each time: an operator running on the cluster may write this paused
        # object's status between the patch and the read.
        crd.kubectl(
            "-n", k8s_namespace, "patch", "etcd", "columns", "--subresource=status",
            "--type=merge", "-p", json.dumps(status),
        )  # fmt: skip
        table = crd.kubectl("-n", k8s_namespace, "get", "etcd", "-o", "wide").stdout
        return table.splitlines()

    crd.wait_for(
        lambda: (
            (lines := shown())[1].split()[4:9]
            == ["True", "NodeLost", "Running", "columns-1", "cdf818194e3a8c32"]
            and lines
        ),
        timeout=30,
        what="the status in the columns",
    )
    header, row = lines_shown = shown()[:2]
    assert header.split()[:11] == [
        "NAME", "SIZE", "READY", "VERSION", "AVAILABLE", "HEALTH", "PHASE", "LEADER",
        "CLUSTER-ID", "LAST-BACKUP", "AGE",
    ], lines_shown  # fmt: skip
    # The last backup as an age, like AGE (its time is months before the object's creation).
    assert row.split()[9].endswith("d"), lines_shown


def test_scale_subresource_sets_spec_size(crd, k8s_namespace):
    create(crd, k8s_namespace, "scaled", {})
    crd.kubectl("-n", k8s_namespace, "scale", "etcd/scaled", "--replicas=5")
    assert get(crd, k8s_namespace, "scaled")["spec"]["size"] == 5
    stderr = refused(
        crd.kubectl("-n", k8s_namespace, "scale", "etcd/scaled", "--replicas=10", check=False)
    )
    assert "spec.size" in stderr, stderr
    assert get(crd, k8s_namespace, "scaled")["spec"]["size"] == 5


def test_status_is_a_subresource(crd, k8s_namespace):
    """Marker values no operator writes, read from each patch's own response: an operator
    running on the cluster may write the status of this (paused) object at any time."""
    create(crd, k8s_namespace, "status", {})
    status = {
        "status": {
            "phase": "TestPhase",
            "size": 3,
            "readyMembers": 3,
            "selector": "etcd.runbook.io/cluster=status",
            "conditions": [
                {
                    "type": "Available",
                    "status": "True",
                    "reason": "TestReason",
                    "message": "3 of 3 members ready",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                    "observedGeneration": 1,
                }
            ],
        }
    }
    body = json.dumps(status)
    base = [
        "-n",
        k8s_namespace,
        "patch",
        "etcd",
        "status",
        "--type=merge",
        "-p",
        body,
        "-o",
        "json",
    ]
    # Through the main resource the status is ignored; through /status it is written.
    ignored = json.loads(crd.kubectl(*base).stdout).get("status", {})
    assert ignored.get("phase") != "TestPhase"
    written = json.loads(crd.kubectl(*base, "--subresource=status").stdout)["status"]
    assert written["phase"] == "TestPhase"
    assert written["conditions"][0]["reason"] == "TestReason"
    assert written["selector"] == "etcd.runbook.io/cluster=status"
    scale_path = (
        f"/apis/etcd.runbook.io/v1alpha1/namespaces/{k8s_namespace}/etcdclusters/status/scale"
    )
    scale = json.loads(crd.kubectl("get", "--raw", scale_path).stdout)
    assert scale["spec"]["replicas"] == 3
    assert scale["status"]["selector"] == "etcd.runbook.io/cluster=status"


def test_storage_may_grow_never_shrink(crd, k8s_namespace):
    create(crd, k8s_namespace, "storage", {"storage": {"size": "2Gi"}})
    stderr = refused(patch(crd, k8s_namespace, "storage", {"spec": {"storage": {"size": "1Gi"}}}))
    assert "spec.storage.size may grow but never shrink" in stderr, stderr
    patch(crd, k8s_namespace, "storage", {"spec": {"storage": {"size": "3Gi"}}}, check=True)
    assert get(crd, k8s_namespace, "storage")["spec"]["storage"]["size"] == "3Gi"


def test_storage_class_and_tls_are_immutable(crd, k8s_namespace):
    create(crd, k8s_namespace, "fixed", {})
    new_class = {"spec": {"storage": {"storageClassName": "fast"}}}
    assert "spec.storage.storageClassName is immutable" in refused(
        patch(crd, k8s_namespace, "fixed", new_class)
    )
    tls_off = {"spec": {"tls": {"enabled": False}}}
    assert "spec.tls.enabled cannot change after creation" in refused(
        patch(crd, k8s_namespace, "fixed", tls_off)
    )
    ids = {"spec": {"pod": {"securityContext": {"fsGroup": 2000}}}}
    assert "spec.pod.securityContext is immutable" in refused(
        patch(crd, k8s_namespace, "fixed", ids)
    )
    spec = get(crd, k8s_namespace, "fixed")["spec"]
    assert spec["tls"] == {"enabled": True}
    assert "storageClassName" not in spec["storage"]
    assert "securityContext" not in spec["pod"]
    # Other settings of the Pods still change.
    patch(crd, k8s_namespace, "fixed", {"spec": {"pod": {"imagePullSecrets": [{"name": "r"}]}}})


# --- EtcdRestore: spec.cluster.spec ---------------------------------------------------------


def create_restore(
    cluster: K8sCluster, ns: str, name: str, spec: dict[str, Any], check: bool = True
):
    restore = {
        "apiVersion": "etcd.runbook.io/v1alpha1",
        "kind": "EtcdRestore",
        "metadata": {"name": name},
        "spec": {
            "source": {"backupName": "missing"},
            "cluster": {"name": name, "spec": {"paused": True, **spec}},
        },
    }
    return cluster.kubectl("-n", ns, "create", "-f", "-", input=json.dumps(restore), check=check)


def restore_spec(cluster: K8sCluster, ns: str, name: str) -> dict[str, Any]:
    out = cluster.kubectl("-n", ns, "get", "etcdrestore", name, "-o", "json").stdout
    return json.loads(out)["spec"]["cluster"]["spec"]


def patch_restore(cluster: K8sCluster, ns: str, name: str, spec: dict[str, Any]):
    body = json.dumps({"spec": {"cluster": {"spec": spec}}})
    return cluster.kubectl(
        "-n", ns, "patch", "etcdrestore", name, "--type=merge", "-p", body, check=False
    )


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"replica": 3}, "spec.cluster.spec.replica"),
        ({"storage": {"sise": "2Gi"}}, "spec.cluster.spec.storage.sise"),
    ],
)
def test_a_restores_unknown_cluster_field_is_refused(restore_crd, k8s_namespace, spec, field):
    """kubectl's default field validation is Strict: a field the schema lacks is an error (it
    was kept, then pruned from the EtcdCluster made from it)."""
    stderr = refused(create_restore(restore_crd, k8s_namespace, "typo", spec, check=False))
    assert f'unknown field "{field}"' in stderr, stderr


def test_a_restores_bad_cluster_spec_is_refused_as_an_etcdcluster_is(restore_crd, k8s_namespace):
    """Every bad spec of the EtcdCluster table, in one namespace: the same error, its field
    under spec.cluster.spec."""
    differ = []
    for spec, message in BAD_SPECS:
        as_cluster = refused(create(restore_crd, k8s_namespace, "bad", spec, check=False))
        as_restore = refused(create_restore(restore_crd, k8s_namespace, "bad", spec, check=False))
        assert message in as_cluster, as_cluster
        read = as_restore.replace("spec.cluster.spec.", "spec.").replace(
            "spec.cluster.spec:", "spec:"
        )
        read = read.replace("EtcdRestore", "EtcdCluster")
        if read != as_cluster:
            differ.append(f"{spec}:\n  {as_cluster}  {as_restore}")
    assert differ == [], "\n".join(differ)
    assert restore_crd.kubectl("-n", k8s_namespace, "get", "etcdrestore", "-o", "name").stdout == ""


def test_a_restores_cluster_spec_keeps_its_fields_and_gets_the_defaults(restore_crd, k8s_namespace):
    spec = {
        "size": 5,
        "version": "3.5.35",
        "storage": {"size": "2Gi", "quotaBackendBytes": "512Mi", "storageClassName": "fast"},
        "pod": {"labels": {"team": "db"}, "affinity": {"nodeAffinity": {"x-free-form": True}}},
        "etcd": {"logLevel": "warn", "heartbeatInterval": 200, "electionTimeout": 2000},
        "defragmentation": {"schedule": "@daily", "window": "2h"},
    }
    create_restore(restore_crd, k8s_namespace, "good", spec)
    create(restore_crd, k8s_namespace, "good", spec)
    # What the EtcdCluster made from it would hold, with the same defaults.
    assert (
        restore_spec(restore_crd, k8s_namespace, "good")
        == get(restore_crd, k8s_namespace, "good")["spec"]
    )
    kept = restore_spec(restore_crd, k8s_namespace, "good")
    assert kept["storage"] == spec["storage"] and kept["etcd"] == spec["etcd"]
    assert kept["tls"] == {"enabled": True} and kept["repository"] == "gcr.io/etcd-development/etcd"


def test_a_restores_cluster_spec_may_be_mended_until_the_cluster_is_made(
    restore_crd, k8s_namespace
):
    """The rules on a running cluster's changes are not carried over; the others still hold
    on an update."""
    create_restore(
        restore_crd, k8s_namespace, "mend", {"storage": {"size": "2Gi", "storageClassName": "fast"}}
    )
    mended = {"storage": {"size": "1Gi", "storageClassName": "slow"}, "tls": {"enabled": False}}
    proc = patch_restore(restore_crd, k8s_namespace, "mend", mended)
    assert proc.returncode == 0, proc.stderr
    spec = restore_spec(restore_crd, k8s_namespace, "mend")
    assert spec["storage"] == mended["storage"] and spec["tls"] == {"enabled": False}
    stderr = refused(
        patch_restore(restore_crd, k8s_namespace, "mend", {"storage": {"size": "256Mi"}})
    )
    assert "spec.cluster.spec.storage.size" in stderr and "must be at least 512Mi" in stderr, stderr
