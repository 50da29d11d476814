"""EtcdBackup end to end: the operator in the cluster makes the backup Jobs, the Jobs stream
snapshots of a real etcd cluster into the real S3-compatible store on the local cluster
(hack/object-store) or onto a claim, and status, Events and the store say the same thing."""

from __future__ import annotations

import hashlib
import io
import json
import os
import secrets
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from testbed.cluster import K8sCluster
from testbed.host import REPO
from testbed.object_store import ObjectStore, credentials_secret
from tests.e2e.helpers import (
    Operator,
    apply,
    condition,
    etcdctl,
    events,
    get,
    pods,
    wait_available,
)
from tests.e2e.helpers import etcd_cluster as cluster_manifest

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


def backup_claim(name: str, marked: bool = True) -> dict:
    """A claim for backups; `marked`, it carries the label that says so (without it, no
    EtcdBackup mounts it)."""
    labels = {"etcd.runbook.io/backup-destination": "true"} if marked else {}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "labels": labels},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }


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


def wrong_current_context(k8s: K8sCluster, tmp_path: Path) -> tuple[Path, str]:
    """A copy of the cluster's kubeconfig whose current context points at a closed port, and
    the name of the context that works."""
    copy = tmp_path / "two-contexts.kubeconfig"
    copy.write_bytes(k8s.kubeconfig.read_bytes())

    def config(*args: str) -> str:
        argv = [str(k8s.kubectl_path), "--kubeconfig", str(copy), "config", *args]
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()

    good = config("current-context")
    user = config("view", "-o", "jsonpath={.contexts[0].context.user}")
    config("set-cluster", "nowhere", "--server=https://127.0.0.1:1")
    config("set-context", "nowhere", "--cluster=nowhere", f"--user={user}")
    config("use-context", "nowhere")
    return copy, good


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
        # files and their manifest there, the EtcdBackup's status left alone. The kubeconfig's
        # current context leads nowhere: `-e context=` picks the one that works, for the API
        # calls and the port-forward alike.
        local = tmp_path / "local"
        local.mkdir()
        kubeconfig, context = wrong_current_context(k8s, tmp_path)
        args = ["-e", "backup=to-volume", "-e", f"namespace={ns}", "-e", f"directory={local}"]
        copied = playbook_by_hand(
            k8s,
            "playbooks/etcd-backup.yml",
            *args,
            "-e",
            f"context={context}",
            env={"KUBECONFIG": str(kubeconfig)},
        )
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


def put(store: Any, bucket: str, key: str, data: bytes) -> None:
    store.put_object(bucket, key, io.BytesIO(data), len(data))


def keys_under(store: Any, bucket: str, prefix: str) -> list[str]:
    return sorted(o.object_name for o in store.list_objects(bucket, prefix, recursive=True))


def test_a_backup_prunes_only_its_own_snapshots_mounts_only_a_marked_claim_and_reads_only_its_own(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator, object_store: ObjectStore
) -> None:
    """The failure seen on the local cluster (issue 23): a one-off EtcdBackup's only snapshot
    pruned by a second, scheduled EtcdBackup of the same cluster with keep 1, the one-off still
    Available. Now each backup prunes only what its manifests name, reports what else is under
    its prefix, says a snapshot deleted behind its back is gone, mounts only a claim marked for
    backups, and its Jobs can read only their own EtcdBackup and TLS Secrets."""
    k8s, ns, name = k8s_cluster, k8s_namespace, "owned"
    bucket = f"e2e-{secrets.token_hex(4)}"
    started = time.monotonic()
    apply(k8s, ns, cluster_manifest(name, size=1))
    # Refused before anything is made or mounted: a claim of someone else's, not marked.
    apply(k8s, ns, backup_claim("app-data", marked=False))
    apply(k8s, ns, volume_backup("to-app-data", name, "app-data"))
    with object_store.port_forward() as url:
        store = object_store.client(url)
        store.make_bucket(bucket)
        credentials_secret(k8s, ns, "s3", object_store.access_key, object_store.secret_key)
        wait_available(k8s, ns, name, 1, AVAILABLE_WITHIN)
        endpoint = object_store.endpoint
        # A file someone put where the schedule's snapshots go, and a snapshot of the layout
        # before backups owned theirs (every backup of the cluster listed that prefix).
        foreign = f"e2e/{ns}/{name}/hourly/notes.txt"
        legacy = f"e2e/{ns}/{name}/20260101T000000Z-rev1.db"
        put(store, bucket, foreign, b"not a snapshot")
        put(store, bucket, legacy, b"an older layout's")

        apply(k8s, ns, backup("before-migration", name, endpoint, bucket, "s3"))
        once = wait_phase(k8s, ns, "before-migration", {"Succeeded", "Failed"}, BACKUP_WITHIN)
        assert once["status"]["phase"] == "Succeeded", json.dumps(once["status"], indent=1)
        only = once["status"]["lastSnapshot"]["location"].removeprefix(f"s3://{bucket}/")

        # The schedule of the same cluster, to the same bucket and prefix, keep 1; it fires
        # twice by hand (its own schedule not before next year).
        spec: dict[str, Any] = {"schedule": "0 0 1 1 *", "retention": {"keep": 1}}
        apply(k8s, ns, backup("hourly", name, endpoint, bucket, "s3", **spec))
        wait_phase(k8s, ns, "hourly", {"Scheduled"}, 60)
        for run in (1, 2):
            k8s.kubectl("-n", ns, "create", "job", f"hourly-now-{run}", "--from=cronjob/hourly")
            k8s.kubectl(
                "-n", ns, "wait", "--for=condition=complete", f"job/hourly-now-{run}",
                f"--timeout={BACKUP_WITHIN}s",
            )  # fmt: skip

        # The one-off's only snapshot is still there (what failed before: the schedule's keep 1
        # pruned it), and still said Available.
        assert keys_under(store, bucket, only) == [only, only + ".json"]
        assert only.startswith(f"e2e/{ns}/{name}/before-migration/")
        manifest = json.loads(store.get_object(bucket, only + ".json").read())
        assert manifest["backup"]["name"] == "before-migration"
        assert manifest["backup"]["uid"] == once["metadata"]["uid"]
        assert manifest["clusterID"] == once["status"]["lastSnapshot"]["clusterID"]

        def own_newest() -> str:
            own = [
                k
                for k in keys_under(store, bucket, f"e2e/{ns}/{name}/hourly/")
                if k.endswith(".db")
            ]
            return own[-1] if own else "-"

        def reported() -> dict[str, Any]:
            # The second run's record, and the operator's word on it (its Event).
            obj = get(k8s, ns, "etcdbackup", "hourly")
            said = [e["message"] for e in events(k8s, ns, "ForeignObjects")]
            last = obj.get("status", {}).get("lastCheck", {}).get("location", "")
            return obj if last.endswith(own_newest()) and any(foreign in m for m in said) else {}

        hourly = k8s.wait_for(
            reported, timeout=60, interval=2, what="hourly's second run, reported"
        )
        once = get(k8s, ns, "etcdbackup", "before-migration")
        assert condition(once, "Available")["status"] == "True", condition(once, "Available")
        # The schedule pruned its own first snapshot (keep 1), and nothing else.
        own = [
            k for k in keys_under(store, bucket, f"e2e/{ns}/{name}/hourly/") if k.endswith(".db")
        ]
        assert len(own) == 1, own
        assert hourly["status"]["lastSnapshot"]["location"] == f"s3://{bucket}/{own[0]}"
        assert [s["location"] for s in hourly["status"]["retainedSnapshots"]] == [
            f"s3://{bucket}/{own[0]}"
        ]
        assert keys_under(store, bucket, foreign) == [foreign]
        assert keys_under(store, bucket, legacy) == [legacy]
        # What is not its own is reported, with a count and the key: status and an Event.
        seen = hourly["status"]["foreignObjects"]
        assert seen["count"] == 1 and seen["examples"][0]["key"] == foreign, seen

        # Someone deletes the one-off's only snapshot: asked to check, the backup says it is
        # gone (Available False, an Event).
        store.remove_object(bucket, only)
        k8s.kubectl(
            "-n", ns, "annotate", "etcdbackup", "before-migration",
            f"etcd.runbook.io/check-requested={time.time():.0f}",
        )  # fmt: skip

        def gone() -> dict[str, Any]:
            obj = get(k8s, ns, "etcdbackup", "before-migration")
            return obj if condition(obj, "Available").get("status") == "False" else {}

        once = k8s.wait_for(gone, timeout=BACKUP_WITHIN, interval=2, what="the snapshot said gone")
        available = condition(once, "Available")
        assert available["reason"] == "SnapshotMissing", available
        assert only in available["message"] and "the snapshot is gone" in available["message"]
        assert once["status"]["lastCheck"]["result"] == "Missing"
        assert [e for e in events(k8s, ns, "SnapshotMissing") if only in e["message"]]

    # The unmarked claim: refused naming the field, an Event, and no Job mounted it.
    refused = wait_phase(k8s, ns, "to-app-data", {"Failed"}, 60)
    degraded = condition(refused, "Degraded")
    assert degraded["reason"] == "ClaimNotMarked", degraded
    assert "spec.destination.volume.claimName" in degraded["message"]
    assert jobs_of(k8s, ns, "to-app-data") == []
    mounted = [
        p["metadata"]["name"]
        for p in get(k8s, ns, "pods")["items"]
        for v in p["spec"].get("volumes", [])
        if (v.get("persistentVolumeClaim") or {}).get("claimName") == "app-data"
    ]
    assert mounted == []
    warned = get(k8s, ns, "events", "--field-selector", "involvedObject.name=to-app-data")
    assert any("spec.destination.volume.claimName" in e["message"] for e in warned["items"])

    # The Jobs' rights, as the API server answers them for the schedule's account.
    account = f"--as=system:serviceaccount:{ns}:etcd-backup-hourly"

    def can(*args: str) -> str:
        return k8s.kubectl("-n", ns, "auth", "can-i", account, *args, check=False).stdout.strip()

    assert can("list", "secrets") == "no"
    assert can("get", "secrets/s3") == "no"
    assert can("get", f"secrets/{name}-ca") == "no"
    assert can("get", f"secrets/{name}-client-tls") == "yes"
    assert can("patch", "etcdbackups.etcd.runbook.io/hourly", "--subresource=status") == "yes"
    assert (
        can("patch", "etcdbackups.etcd.runbook.io/before-migration", "--subresource=status") == "no"
    )
    assert can("patch", "etcdbackups.etcd.runbook.io/hourly") == "no"
    assert can("list", "etcdbackups.etcd.runbook.io") == "no"
    print(f"owned snapshots, marked claims and the Jobs' rights: {time.monotonic() - started:.0f}s")
