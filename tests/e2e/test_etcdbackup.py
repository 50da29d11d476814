"""EtcdBackup end to end: the operator in the cluster makes the backup Jobs, the Jobs stream
snapshots of a real etcd cluster into the real S3-compatible store on the local cluster
(hack/object-store) or onto a claim, and status, Events and the store say the same thing."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import Operator, apply, condition, etcdctl, get, pods, wait_available
from tests.e2e.helpers import etcd_cluster as cluster_manifest
from tests.k8s_cluster import REPO, K8sCluster
from tests.object_store import ObjectStore

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

AVAILABLE_WITHIN = 240
BACKUP_WITHIN = 240
KEYS = 50


def etcd_backup(name: str, cluster: str, destination: dict[str, Any], **spec: Any) -> dict:
    return {
        "apiVersion": "etcd.runbook.io/v1alpha1",
        "kind": "EtcdBackup",
        "metadata": {"name": name},
        "spec": {"clusterName": cluster, "destination": destination, **spec},
    }


def backup(
    name: str,
    cluster: str,
    endpoint: str,
    bucket: str,
    secret: str,
    *,
    prefix: str = "e2e",
    **spec: Any,
) -> dict:
    s3 = {"endpoint": endpoint, "bucket": bucket, "prefix": prefix, "credentialsSecret": secret}
    return etcd_backup(name, cluster, {"s3": s3}, **spec)


def volume_backup(name: str, cluster: str, claim: str, **spec: Any) -> dict:
    return etcd_backup(name, cluster, {"volume": {"claimName": claim, "path": "/e2e"}}, **spec)


def backup_claim(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }


def credentials_secret(k8s: K8sCluster, ns: str, name: str, access: str, secret: str) -> None:
    k8s.kubectl(
        "-n",
        ns,
        "create",
        "secret",
        "generic",
        name,
        f"--from-literal=accessKeyId={access}",
        f"--from-literal=secretAccessKey={secret}",
    )


def wait_phase(k8s: K8sCluster, ns: str, name: str, phases: set[str], timeout: float) -> dict:
    def reached() -> dict[str, Any]:
        obj = get(k8s, ns, "etcdbackup", name)
        return obj if obj.get("status", {}).get("phase") in phases else {}

    return k8s.wait_for(reached, timeout=timeout, interval=2, what=f"{name} in {phases}")


def jobs_of(k8s: K8sCluster, ns: str, name: str) -> list[dict[str, Any]]:
    return list(get(k8s, ns, "jobs", "-l", f"etcd.runbook.io/backup={name}")["items"])


def playbook_by_hand(
    k8s: K8sCluster, playbook: str, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """A playbook as a person runs it: a kubeconfig, kubectl on PATH, no S3 keys in the
    environment (they come from the Secret named, as documented)."""
    environment = {
        **os.environ,
        "KUBECONFIG": str(k8s.kubeconfig),
        "PATH": f"{k8s.kubectl_path.parent}:{os.environ['PATH']}",
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        **(env or {}),
    }
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        environment.pop(variable, None)
    return subprocess.run(
        [str(REPO / ".venv" / "bin" / "ansible-playbook"), playbook, *extra],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_backup_to_s3_once_and_refusals(
    k8s_cluster: K8sCluster,
    k8s_namespace: str,
    operator: Operator,
    object_store: ObjectStore,
    tmp_path: Path,
) -> None:
    k8s, ns, name = k8s_cluster, k8s_namespace, "source"
    bucket = f"e2e-{secrets.token_hex(4)}"
    apply(k8s, ns, cluster_manifest(name))
    with object_store.port_forward() as url:
        store = object_store.client(url)
        store.make_bucket(bucket)
        credentials_secret(k8s, ns, "s3", object_store.access_key, object_store.secret_key)
        credentials_secret(k8s, ns, "s3-wrong", object_store.access_key, "not-the-secret-key")
        cluster = wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
        member = pods(k8s, ns, name)[0]["metadata"]["name"]
        for i in range(KEYS):
            etcdctl(k8s, ns, member, "put", f"/e2e/key-{i:03d}", f"value-{i}")
        written = json.loads(etcdctl(k8s, ns, member, "get", "/e2e/key-000", "-w", "json"))
        revision_written = int(written["header"]["revision"])

        endpoint = object_store.endpoint
        apply(k8s, ns, backup("once", name, endpoint, bucket, "s3", retention={"keep": 3}))
        apply(k8s, ns, backup("no-secret", name, endpoint, bucket, "missing"))
        apply(k8s, ns, backup("wrong-key", name, endpoint, bucket, "s3-wrong"))
        apply(k8s, ns, backup("no-bucket", name, endpoint, f"{bucket}-gone", "s3"))
        apply(k8s, ns, backup("no-cluster", "absent", endpoint, bucket, "s3"))
        apply(k8s, ns, backup_claim("backups"))
        apply(k8s, ns, volume_backup("to-volume", name, "backups"))
        apply(k8s, ns, volume_backup("no-claim", name, "not-there"))

        # A one-off backup: one snapshot, from a follower, verified, in status and the store.
        done = wait_phase(k8s, ns, "once", {"Succeeded", "Failed"}, BACKUP_WITHIN)
        assert done["status"]["phase"] == "Succeeded", json.dumps(done["status"], indent=1)
        last = done["status"]["lastSnapshot"]
        prefix = f"e2e/{ns}/{name}/"
        assert last["location"].startswith(f"s3://{bucket}/{prefix}")
        assert last["revision"] >= revision_written
        # From a follower when the Job chose (unit-tested in etcd_backup_source); leadership
        # may move between then and now, so only membership is checked here.
        assert last["member"] in {m["name"] for m in cluster["status"]["members"]}
        assert last["clusterID"] == cluster["status"]["clusterID"]
        assert condition(done, "Available")["status"] == "True"
        key = last["location"].removeprefix(f"s3://{bucket}/")
        body = store.get_object(bucket, key)
        try:
            data = body.read()
        finally:
            body.close()
            body.release_conn()
        assert hashlib.sha256(data).hexdigest() == last["sha256"]
        assert len(data) == last["size"]
        manifest = json.loads(store.get_object(bucket, key + ".json").read())
        assert manifest["sha256"] == last["sha256"]
        assert [s["location"] for s in done["status"]["retainedSnapshots"]] == [last["location"]]
        # Once taken, the Job is not run again, and the store holds exactly the one snapshot.
        assert len(jobs_of(k8s, ns, "once")) == 1
        listed = sorted(o.object_name for o in store.list_objects(bucket, prefix, recursive=True))
        assert listed == [key, key + ".json"]

        # What cannot be used is refused before any Job: a condition and an Event name the field.
        for refused, reason, field in (
            ("no-secret", "CredentialsInvalid", "spec.destination.s3.credentialsSecret"),
            ("no-cluster", "ClusterNotFound", "spec.clusterName"),
            ("no-claim", "ClaimNotFound", "spec.destination.volume.claimName"),
        ):
            obj = wait_phase(k8s, ns, refused, {"Failed"}, 60)
            degraded = condition(obj, "Degraded")
            assert (degraded["status"], degraded["reason"]) == ("True", reason), degraded
            assert field in degraded["message"]
            assert jobs_of(k8s, ns, refused) == []
            warnings = get(k8s, ns, "events", "--field-selector", f"involvedObject.name={refused}")
            assert any(field in e["message"] for e in warnings["items"]), warnings["items"]

        # Onto a claim: the same record, located on the claim (the restore e2e reads it back).
        on_volume = wait_phase(k8s, ns, "to-volume", {"Succeeded", "Failed"}, BACKUP_WITHIN)
        assert on_volume["status"]["phase"] == "Succeeded", json.dumps(on_volume["status"])
        volume_last = on_volume["status"]["lastSnapshot"]
        assert volume_last["location"].startswith(f"pvc://backups/e2e/{ns}/{name}/")
        assert volume_last["revision"] >= revision_written and len(volume_last["sha256"]) == 64
        assert [s["location"] for s in on_volume["status"]["retainedSnapshots"]] == [
            volume_last["location"]
        ]

        # By hand into a local directory instead of the EtcdBackup's own destination: the
        # files and their manifest there, the EtcdBackup's status left alone.
        local = tmp_path / "local"
        local.mkdir()
        args = ["-e", "backup=to-volume", "-e", f"namespace={ns}", "-e", f"directory={local}"]
        copied = playbook_by_hand(k8s, "playbooks/etcd-backup.yml", *args)
        assert copied.returncode == 0, copied.stdout[-3000:]
        files = sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file())
        assert len(files) == 2 and files[0].startswith(f"{ns}/{name}/"), files
        snapshot = local / files[0]
        manifest = json.loads((local / files[1]).read_text())
        assert hashlib.sha256(snapshot.read_bytes()).hexdigest() == manifest["sha256"]
        after = get(k8s, ns, "etcdbackup", "to-volume")["status"]["lastSnapshot"]
        assert after == volume_last

        # What only the store can tell fails in the Job, whose message reaches the condition.
        for failing, word in (("wrong-key", "S3AuthFailed"), ("no-bucket", "S3BucketMissing")):
            obj = wait_phase(k8s, ns, failing, {"Failed", "Succeeded"}, BACKUP_WITHIN)
            degraded = condition(obj, "Degraded")
            assert obj["status"]["phase"] == "Failed"
            assert degraded["reason"] == "BackupFailed", degraded
            assert word in degraded["message"], degraded["message"]
            assert "not-the-secret-key" not in json.dumps(obj)
        # Nothing was written by the failures.
        listed = sorted(o.object_name for o in store.list_objects(bucket, "", recursive=True))
        assert listed == [key, key + ".json"]

        # By hand, with only a kubeconfig: --check saves nothing, then a run saves one more.
        by_hand = ["-e", f"cluster={name}", "-e", f"namespace={ns}", "-e", f"s3_endpoint={url}"]
        by_hand += ["-e", f"bucket={bucket}", "-e", "prefix=by-hand", "-e", "credentials_secret=s3"]
        checked = playbook_by_hand(k8s, "playbooks/etcd-backup.yml", *by_hand, "--check")
        assert checked.returncode == 0, checked.stdout[-3000:]
        assert "would stream a snapshot of" in checked.stdout
        assert not list(store.list_objects(bucket, "by-hand/", recursive=True))
        saved = playbook_by_hand(k8s, "playbooks/etcd-backup.yml", *by_hand)
        assert saved.returncode == 0, saved.stdout[-3000:]
        hand = [o.object_name for o in store.list_objects(bucket, "by-hand/", recursive=True)]
        assert len(hand) == 2 and hand[0].startswith(f"by-hand/{ns}/{name}/"), hand
        assert object_store.secret_key not in saved.stdout + saved.stderr


def test_a_schedule_keeps_exactly_keep_snapshots(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator, object_store: ObjectStore
) -> None:
    k8s, ns, name = k8s_cluster, k8s_namespace, "scheduled"
    bucket = f"e2e-{secrets.token_hex(4)}"
    apply(k8s, ns, cluster_manifest(name, size=1))
    with object_store.port_forward() as url:
        store = object_store.client(url)
        store.make_bucket(bucket)
        credentials_secret(k8s, ns, "s3", object_store.access_key, object_store.secret_key)
        wait_available(k8s, ns, name, 1, AVAILABLE_WITHIN)
        started = time.monotonic()
        spec: dict[str, Any] = {"schedule": "* * * * *", "retention": {"keep": 2}}
        apply(k8s, ns, backup("minutely", name, object_store.endpoint, bucket, "s3", **spec))
        assert wait_phase(k8s, ns, "minutely", {"Scheduled", "Running"}, 60)
        cron = get(k8s, ns, "cronjob", "minutely")["spec"]
        assert (cron["schedule"], cron["concurrencyPolicy"]) == ("* * * * *", "Forbid")

        def three_done() -> list[dict[str, Any]]:
            done = [
                j
                for j in jobs_of(k8s, ns, "minutely")
                if any(c["type"] == "Complete" for c in j["status"].get("conditions", []))
            ]
            return done if len(done) >= 3 else []

        k8s.wait_for(three_done, timeout=300, interval=5, what="three scheduled snapshots")
        print(f"three scheduled snapshots after {time.monotonic() - started:.0f}s")

        def two_retained() -> dict[str, Any]:
            obj = get(k8s, ns, "etcdbackup", "minutely")
            kept = obj.get("status", {}).get("retainedSnapshots", [])
            available = condition(obj, "Available").get("status") == "True"
            return obj if len(kept) == 2 and available else {}

        obj = k8s.wait_for(two_retained, timeout=60, interval=2, what="two retained snapshots")
        prefix = f"e2e/{ns}/{name}/"
        snapshots = sorted(
            o.object_name
            for o in store.list_objects(bucket, prefix, recursive=True)
            if o.object_name.endswith(".db")
        )
        # A fourth run may be streaming now; what is listed as done is exactly `keep`.
        retained = [s["location"] for s in obj["status"]["retainedSnapshots"]]
        assert len(retained) == 2
        assert all(loc.removeprefix(f"s3://{bucket}/") in snapshots for loc in retained)
        assert len(snapshots) <= 3, snapshots
        assert obj["status"]["lastSnapshot"]["location"] == retained[0]
        assert obj["status"].get("lastScheduleTime")
