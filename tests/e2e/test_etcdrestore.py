"""EtcdRestore end to end: a real etcd cluster backed up by an EtcdBackup into the real
S3-compatible store on the local cluster (and by another onto a claim), deleted with its
claims, and restored by the in-cluster operator into a new cluster of the same name (and by
hand, from the claim and from a file uploaded from this machine): every key back, revisions
above the old ones, a new cluster ID, and a watch resumed from an old revision told it was
compacted. What cannot be restored is refused or fails with a condition that says why, and no
member is ever started on data that was not verified."""

from __future__ import annotations

import base64
import io
import json
import re
import secrets
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from testbed.cluster import K8sCluster
from testbed.object_store import ObjectStore, credentials_secret
from testbed.operator_incluster import DEPLOYMENT, NAMESPACE, SELECTOR, InClusterOperator
from tests.e2e.helpers import (
    TLS_ARGS,
    Operator,
    apply,
    condition,
    etcdctl,
    get,
    pods,
    wait_available,
)
from tests.e2e.helpers import etcd_cluster as cluster_manifest
from tests.e2e.test_etcdbackup import (
    backup,
    backup_claim,
    playbook_by_hand,
    volume_backup,
)
from tests.e2e.test_etcdbackup import wait_phase as wait_backup

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]

AVAILABLE_WITHIN = 240
RESTORED_WITHIN = 420
KEYS = 40
PENDING = "etcd.runbook.io/restore-pending"


def restore(name: str, cluster: str, source: dict[str, Any], size: int = 3) -> dict[str, Any]:
    return {
        "apiVersion": "etcd.runbook.io/v1alpha1",
        "kind": "EtcdRestore",
        "metadata": {"name": name},
        "spec": {
            "source": source,
            "cluster": {
                "name": cluster,
                "spec": {"size": size, "version": "3.6.16", "storage": {"size": "1Gi"}},
            },
        },
    }


def wait_restore(k8s: K8sCluster, ns: str, name: str, phases: set[str], timeout: float) -> dict:
    def reached() -> dict[str, Any]:
        obj = get(k8s, ns, "etcdrestore", name)
        return obj if obj.get("status", {}).get("phase") in phases else {}

    return k8s.wait_for(reached, timeout=timeout, interval=3, what=f"{name} in {phases}")


def keys_of(k8s: K8sCluster, ns: str, member: str) -> dict[str, str]:
    got = json.loads(etcdctl(k8s, ns, member, "get", "/e2e/", "--prefix", "-w", "json"))
    return {
        base64.b64decode(kv["key"]).decode(): base64.b64decode(kv["value"]).decode()
        for kv in got.get("kvs", [])
    }


def revision_of(k8s: K8sCluster, ns: str, member: str) -> int:
    out = json.loads(etcdctl(k8s, ns, member, "endpoint", "status", "-w", "json"))
    return int(out[0]["Status"]["header"]["revision"])


@pytest.mark.operator_exclusive  # it stops the operator for the restores by hand
def test_backup_delete_and_restore_into_a_new_cluster(
    k8s_cluster: K8sCluster,
    k8s_namespace: str,
    operator: Operator,
    object_store: ObjectStore,
    tmp_path: Path,
) -> None:
    k8s, ns, name = k8s_cluster, k8s_namespace, "origin"
    bucket = f"e2e-{secrets.token_hex(4)}"
    apply(k8s, ns, cluster_manifest(name))
    with object_store.port_forward() as url:
        store = object_store.client(url)
        store.make_bucket(bucket)
        credentials_secret(k8s, ns, "s3", object_store.access_key, object_store.secret_key)
        old = wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
        member = pods(k8s, ns, name)[0]["metadata"]["name"]
        for i in range(KEYS):
            etcdctl(k8s, ns, member, "put", f"/e2e/key-{i:03d}", f"value-{i}")
        old_revision = revision_of(k8s, ns, member)

        apply(k8s, ns, backup("nightly", name, object_store.endpoint, bucket, "s3"))
        apply(k8s, ns, backup_claim("backups"))
        apply(k8s, ns, volume_backup("to-volume", name, "backups"))

        for backup_name in ("nightly", "to-volume"):
            done = wait_backup(k8s, ns, backup_name, {"Succeeded", "Failed"}, 240)
            assert done["status"]["phase"] == "Succeeded", json.dumps(done["status"], indent=1)
        last = get(k8s, ns, "etcdbackup", "nightly")["status"]["lastSnapshot"]

        # A restore into a cluster that exists is refused, naming the field; nothing is made.
        apply(k8s, ns, restore("onto-live", name, {"backupName": "nightly"}))
        refused = wait_restore(k8s, ns, "onto-live", {"Failed"}, 90)
        degraded = condition(refused, "Degraded")
        assert degraded["reason"] == "ClusterExists" and "spec.cluster.name" in degraded["message"]
        warnings = get(k8s, ns, "events", "--field-selector", "involvedObject.name=onto-live")
        assert any("spec.cluster.name" in e["message"] for e in warnings["items"])
        assert get(k8s, ns, "jobs", "-l", "etcd.runbook.io/restore=onto-live")["items"] == []
        k8s.kubectl("-n", ns, "delete", "etcdrestore", "onto-live", "--wait=true")

        # A corrupt object (one byte changed) under the sha256 of the real one: the Job's
        # fetch step refuses it, nothing is started, the claim stays marked.
        key = last["location"].removeprefix(f"s3://{bucket}/")
        body = store.get_object(bucket, key)
        try:
            data = bytearray(body.read())
        finally:
            body.close()
            body.release_conn()
        local = tmp_path / "nightly.db"
        local.write_bytes(bytes(data))
        data[len(data) // 2] ^= 0xFF
        damaged = tmp_path / "damaged.db"
        damaged.write_bytes(bytes(data))
        store.put_object(bucket, "corrupt/snapshot.db", io.BytesIO(bytes(data)), len(data))
        corrupt_source = {
            "s3": {
                "endpoint": object_store.endpoint,
                "bucket": bucket,
                "key": "corrupt/snapshot.db",
                "credentialsSecret": "s3",
            },
            "sha256": last["sha256"],
        }
        apply(k8s, ns, restore("corrupt", "from-corrupt", corrupt_source, size=1))
        failed = wait_restore(k8s, ns, "corrupt", {"Failed", "Succeeded"}, 240)
        degraded = condition(failed, "Degraded")
        assert failed["status"]["phase"] == "Failed", failed["status"]
        assert degraded["reason"] == "SnapshotCorrupt", degraded
        assert pods(k8s, ns, "from-corrupt") == []
        claim = get(k8s, ns, "pvc", "from-corrupt-0-data")
        assert PENDING in claim["metadata"]["annotations"]

        # The cluster and its claims deleted: only the backup is left.
        k8s.kubectl("-n", ns, "delete", "etcdcluster", name, "--wait=true", "--timeout=180s")
        k8s.kubectl(
            "-n", ns, "delete", "pvc", "-l", f"etcd.runbook.io/cluster={name}", "--wait=true"
        )

        apply(k8s, ns, restore("back", name, {"backupName": "nightly"}))
        restored = wait_restore(k8s, ns, "back", {"Succeeded", "Failed"}, RESTORED_WITHIN)
        assert restored["status"]["phase"] == "Succeeded", json.dumps(restored["status"], indent=1)
        new = wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
        status = restored["status"]
        assert status["snapshot"]["sha256"] == last["sha256"]
        assert status["restoredRevision"] == last["revision"]
        assert status["clusterID"] == new["status"]["clusterID"] != old["status"]["clusterID"]

        member = pods(k8s, ns, name)[0]["metadata"]["name"]
        assert keys_of(k8s, ns, member) == {f"/e2e/key-{i:03d}": f"value-{i}" for i in range(KEYS)}
        assert revision_of(k8s, ns, member) > old_revision + 999_999_000

        # A watcher resuming from a revision it saw before is told it was compacted.
        watch = subprocess.run(
            [
                str(k8s.kubectl_path),
                "--kubeconfig",
                str(k8s.kubeconfig),
                "-n",
                ns,
                "exec",
                member,
                "-c",
                "etcd",
                "--",
                "/usr/local/bin/etcdctl",
                "--endpoints=https://127.0.0.1:2379",
                *TLS_ARGS,
                "watch",
                f"--rev={old_revision}",
                "/e2e/key-000",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert "compacted" in (watch.stdout + watch.stderr), watch
        assert "value-0" not in watch.stdout

        if isinstance(operator, InClusterOperator):
            restore_by_hand(k8s, ns, operator, (local, damaged, last["sha256"]))


def restore_by_hand(
    k8s: K8sCluster, ns: str, operator: InClusterOperator, files: tuple[Path, Path, str]
) -> None:
    """Break-glass, the operator down: playbooks/etcd-restore.yml drives an EtcdRestore until
    its data is written, writing its status; playbooks/etcdcluster.yml starts the member.
    Once from the snapshot on the claim (the Job reads it from there, read-only), once from a
    file on this machine, uploaded into the Job (a damaged copy refused first)."""
    local, damaged, sha256 = files
    deployment = get(k8s, NAMESPACE, "deployment", DEPLOYMENT)
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    k8s.kubectl("-n", NAMESPACE, "scale", "deployment", DEPLOYMENT, "--replicas=0")
    k8s.wait_for(
        lambda: not get(k8s, NAMESPACE, "pods", "-l", SELECTOR)["items"],
        timeout=120,
        what="the operator stopped",
    )
    try:
        apply(k8s, ns, restore("hand", "by-hand", {"backupName": "to-volume"}, size=1))
        args = ["-e", "restore=hand", "-e", f"namespace={ns}", "-e", f"image={image}"]
        checked = playbook_by_hand(k8s, "playbooks/etcd-restore.yml", *args, "--check", "--diff")
        assert checked.returncode == 0, checked.stdout[-3000:]
        assert "by-hand" not in [c["metadata"]["name"] for c in get(k8s, ns, "etcd")["items"]]
        ran = playbook_by_hand(k8s, "playbooks/etcd-restore.yml", *args)
        assert ran.returncode == 0, ran.stdout[-3000:]
        hand = get(k8s, ns, "etcdrestore", "hand")
        assert hand["status"]["phase"] == "Starting", hand["status"]
        assert hand["status"]["snapshot"]["location"].startswith("pvc://backups/e2e/")
        assert condition(hand, "Progressing")["reason"] == "MembersStarting"
        started = playbook_by_hand(
            k8s, "playbooks/etcdcluster.yml", "-e", "name=by-hand", "-e", f"namespace={ns}"
        )
        assert started.returncode == 0, started.stdout[-3000:]
        assert keys_of(k8s, ns, "by-hand-0") == {
            f"/e2e/key-{i:03d}": f"value-{i}" for i in range(KEYS)
        }

        apply(k8s, ns, restore("upload", "by-upload", {"upload": {}, "sha256": sha256}, size=1))
        args = ["-e", "restore=upload", "-e", f"namespace={ns}", "-e", f"image={image}"]
        wrong = playbook_by_hand(k8s, "playbooks/etcd-restore.yml", *args, "-e", f"file={damaged}")
        assert wrong.returncode != 0 and "wrong or damaged file" in wrong.stdout, wrong.stdout
        assert "by-upload" not in [c["metadata"]["name"] for c in get(k8s, ns, "etcd")["items"]]
        ran = playbook_by_hand(k8s, "playbooks/etcd-restore.yml", *args, "-e", f"file={local}")
        assert ran.returncode == 0, ran.stdout[-3000:]
        # The default callback prints the task, then its result: the file went up once.
        assert re.search(r"Upload the snapshot file[^\n]*\*+\nchanged:", ran.stdout), ran.stdout
        uploaded = get(k8s, ns, "etcdrestore", "upload")
        assert uploaded["status"]["phase"] == "Starting", uploaded["status"]
        assert uploaded["status"]["snapshot"]["location"] == f"upload:sha256:{sha256}"
        started = playbook_by_hand(
            k8s, "playbooks/etcdcluster.yml", "-e", "name=by-upload", "-e", f"namespace={ns}"
        )
        assert started.returncode == 0, started.stdout[-3000:]
        assert keys_of(k8s, ns, "by-upload-0") == {
            f"/e2e/key-{i:03d}": f"value-{i}" for i in range(KEYS)
        }
    finally:
        operator.start()
        operator.wait_running()
    # The operator back: it finds the clusters Available and closes the restores.
    for name in ("hand", "upload"):
        done = wait_restore(k8s, ns, name, {"Succeeded", "Failed"}, 240)
        assert done["status"]["phase"] == "Succeeded", done["status"]


def test_a_restore_is_finished_only_by_its_own_job(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator, object_store: ObjectStore
) -> None:
    """The issue's case: an EtcdRestore deleted with its finished Job orphaned
    (--cascade=orphan), its cluster and claims deleted, then the same EtcdRestore created
    again. The orphan's success is never taken for this restore's: refused as NameTaken,
    nothing created, never Starting or Succeeded; once the orphan is gone, the restore really
    restores (every key there)."""
    k8s, ns, name = k8s_cluster, k8s_namespace, "orphans"
    bucket = f"e2e-{secrets.token_hex(4)}"
    apply(k8s, ns, cluster_manifest(name, size=1))
    with object_store.port_forward() as url:
        object_store.client(url).make_bucket(bucket)
    credentials_secret(k8s, ns, "s3", object_store.access_key, object_store.secret_key)
    wait_available(k8s, ns, name, 1, AVAILABLE_WITHIN)
    expected = {f"/e2e/key-{i:03d}": f"value-{i}" for i in range(5)}
    for key, value in expected.items():
        etcdctl(k8s, ns, f"{name}-0", "put", key, value)
    apply(k8s, ns, backup("snap", name, object_store.endpoint, bucket, "s3"))
    done = wait_backup(k8s, ns, "snap", {"Succeeded", "Failed"}, 240)
    assert done["status"]["phase"] == "Succeeded", json.dumps(done["status"], indent=1)

    def start_over() -> None:
        """The cluster and its claims deleted: only the backup holds the data."""
        k8s.kubectl("-n", ns, "delete", "etcdcluster", name, "--wait=true", "--timeout=180s")
        k8s.kubectl(
            "-n", ns, "delete", "pvc", "-l", f"etcd.runbook.io/cluster={name}", "--wait=true"
        )

    start_over()
    apply(k8s, ns, restore("again", name, {"backupName": "snap"}, size=1))
    first = wait_restore(k8s, ns, "again", {"Succeeded", "Failed"}, RESTORED_WITHIN)
    assert first["status"]["phase"] == "Succeeded", json.dumps(first["status"], indent=1)
    assert keys_of(k8s, ns, f"{name}-0") == expected

    k8s.kubectl("-n", ns, "delete", "etcdrestore", "again", "--cascade=orphan", "--wait=true")
    # The finished Job's Pod still mounts the claim, which cannot go while it exists
    # (pvc-protection): cleared as a person clearing the way would, the Job itself left.
    k8s.kubectl("-n", ns, "delete", "pod", "-l", "job-name=again-restore", "--wait=true")
    start_over()
    orphan = get(k8s, ns, "job", "again-restore")
    assert not orphan["metadata"].get("ownerReferences"), orphan["metadata"]
    assert condition(orphan, "Complete").get("status") == "True", orphan.get("status")
    started = time.monotonic()
    apply(k8s, ns, restore("again", name, {"backupName": "snap"}, size=1))
    refused = wait_restore(k8s, ns, "again", {"Starting", "Succeeded", "Failed"}, 120)
    assert refused["status"]["phase"] == "Failed", json.dumps(refused["status"], indent=1)
    degraded = condition(refused, "Degraded")
    assert degraded["reason"] == "NameTaken" and "Job again-restore" in degraded["message"]
    print(f"refused {time.monotonic() - started:.1f}s after the POST")
    warnings = get(k8s, ns, "events", "--field-selector", "involvedObject.name=again")
    assert any(e["reason"] == "NameTaken" for e in warnings["items"]), warnings["items"]
    # Nothing made: no cluster to start empty, no claim, and the orphan left as it was.
    assert name not in [c["metadata"]["name"] for c in get(k8s, ns, "etcd")["items"]]
    assert get(k8s, ns, "pvc", "-l", f"etcd.runbook.io/cluster={name}")["items"] == []
    still = get(k8s, ns, "job", "again-restore")["metadata"]
    assert (still["uid"], still["resourceVersion"]) == (
        orphan["metadata"]["uid"],
        orphan["metadata"]["resourceVersion"],
    )

    # The orphan gone, the restore goes on, and restores for real.
    k8s.kubectl("-n", ns, "delete", "job", "again-restore", "--wait=true")
    second = wait_restore(k8s, ns, "again", {"Succeeded"}, RESTORED_WITHIN)
    wait_available(k8s, ns, name, 1, AVAILABLE_WITHIN)
    assert keys_of(k8s, ns, f"{name}-0") == expected
    job = get(k8s, ns, "job", "again-restore")["metadata"]
    assert job["ownerReferences"][0]["uid"] == second["metadata"]["uid"]
