"""Data safety end to end: the operator (deployed from its image) on the local Kubernetes, real
etcd Pods on real volumes. Each test is a way the operator could lose data or lie: a user's
string run as code, a wiped member coming back under its old identity, lost quorum reported as
fine, healing stuck behind a refusal, a scale change that drops the disruption budget."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature

from etcd_runbook.clients.etcd_tls import issue_material
from etcd_runbook.names import ANN_RECOVER_QUORUM
from etcd_runbook.rules import etcd_manifests
from testbed.cluster import K8sCluster, KubectlError
from testbed.host import REPO
from testbed.object_store import credentials_secret
from testbed.operator_incluster import NAMESPACE, SELECTOR, InClusterOperator
from tests.e2e.helpers import (
    TLS_ARGS,
    Operator,
    apply,
    condition,
    etcd_cluster,
    etcdctl,
    events,
    get,
    member_list,
    pods,
    wait_available,
)
from tests.e2e.test_etcdbackup import backup_claim, volume_backup, wait_phase
from tests.k8s_cluster import namespace_for_test

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

AVAILABLE_WITHIN = 300
# Strings as an attacker writes them into a custom resource. Evaluated, the lookup would run a
# command in the operator's Pod (whose ServiceAccount reads Secrets and deletes Pods).
LOOKUP = "{{ lookup('ansible.builtin.pipe', 'touch /tmp/ero-pwned') }}"
CONCAT = "{{ 'a' ~ 'b' }}"
NUMBER = "{{ 6 * 7 }}"
MARKER = Path("/tmp/ero-pwned")
BOOTSTRAP_STARTED = "etcd.runbook.io/bootstrap-started"
LABEL_TLS_FOR = "etcd.runbook.io/tls-for"


def patch(k8s: K8sCluster, ns: str, name: str, body: dict[str, Any]) -> None:
    k8s.kubectl("-n", ns, "patch", "etcd", name, "--type=merge", "-p", json.dumps(body))


def wait_condition(
    k8s: K8sCluster, ns: str, name: str, type_: str, reason: str, timeout: float = 120
) -> dict[str, Any]:
    def seen() -> dict[str, Any]:
        obj = get(k8s, ns, "etcd", name)
        return obj if condition(obj, type_).get("reason") == reason else {}

    return k8s.wait_for(seen, timeout=timeout, interval=1, what=f"{type_}={reason}")


def operator_has_marker(k8s: K8sCluster) -> bool:
    pod = get(k8s, NAMESPACE, "pods", "-l", SELECTOR)["items"][0]["metadata"]["name"]
    probe = k8s.kubectl("-n", NAMESPACE, "exec", pod, "--", "ls", str(MARKER), check=False)
    return probe.returncode == 0


def test_strings_in_the_custom_resource_are_data_never_templates(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    """Also: member Pods are admitted where the restricted Pod Security Standard is enforced,
    and deleting a paused cluster waits for an explicit override (one cluster for all three)."""
    k8s, ns, name = k8s_cluster, k8s_namespace, "inject"
    k8s.kubectl("label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted")
    hostile = {"x.example/lookup": LOOKUP, "x.example/concat": CONCAT, "x.example/number": NUMBER}
    obj = etcd_cluster(name, size=1, pod={"annotations": hostile})
    obj["metadata"]["annotations"] = hostile
    apply(k8s, ns, obj)
    wait_available(k8s, ns, name, 1, AVAILABLE_WITHIN)
    (member,) = pods(k8s, ns, name)
    assert member["spec"]["securityContext"]["runAsNonRoot"] is True
    got = {k: v for k, v in member["metadata"]["annotations"].items() if k.startswith("x.")}
    assert got == hostile, "byte for byte, not evaluated"
    assert not operator_has_marker(k8s), "a lookup in the custom resource ran in the operator"

    # A name the API server would take once evaluated ('erop-' ~ 'hostdir' is the local
    # StorageClass): kept as written, the claim is refused and nothing is made from it.
    cls = "{{ 'erop-' ~ 'hostdir' }}"
    apply(k8s, ns, etcd_cluster("inject-class", size=1, storage={"storageClassName": cls}))
    degraded = wait_condition(k8s, ns, "inject-class", "Degraded", "StepFailed", timeout=180)
    assert cls in condition(degraded, "Degraded")["message"]
    claims = get(k8s, ns, "pvc", "-l", "etcd.runbook.io/cluster=inject-class")["items"]
    assert claims == []

    # The same object through the break-glass playbook, run by hand with only a kubeconfig.
    patch(k8s, ns, name, {"spec": {"paused": True}})
    MARKER.unlink(missing_ok=True)
    run = subprocess.run(
        [
            str(REPO / ".venv" / "bin" / "ansible-playbook"),
            str(REPO / "playbooks" / "etcdcluster.yml"),
            "-e",
            f"name={name}",
            "-e",
            f"namespace={ns}",
            "-e",
            "ignore_pause=true",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=REPO,
        env={
            "PATH": f"{k8s.bin_dir}:{REPO / '.venv' / 'bin'}:/usr/bin:/bin",
            "KUBECONFIG": str(k8s.kubeconfig),
            "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
            "HOME": str(Path.home()),
        },
    )
    assert run.returncode == 0, run.stdout[-3000:]
    assert not MARKER.exists(), "a lookup in the custom resource ran in the hand run"
    (member,) = pods(k8s, ns, name)
    got = {k: v for k, v in member["metadata"]["annotations"].items() if k.startswith("x.")}
    assert got == hostile

    # Deleting the paused cluster waits, its Pod running, until someone says so.
    k8s.kubectl("-n", ns, "delete", "etcd", name, "--wait=false")
    wait_condition(k8s, ns, name, "Degraded", "DeletionPaused")
    assert len(pods(k8s, ns, name)) == 1, "the paused cluster's Pods keep running"
    k8s.kubectl("-n", ns, "annotate", "etcd", name, "etcd.runbook.io/delete-while-paused=true")
    k8s.wait_for(
        lambda: k8s.kubectl("-n", ns, "get", "etcd", name, check=False).returncode != 0,
        timeout=120,
        what="the EtcdCluster deleted",
    )
    k8s.wait_for(lambda: not pods(k8s, ns, name), timeout=120, what="its Pods gone")


def _volume_dir(k8s: K8sCluster, ns: str, claim: str) -> Path:
    pv = get(k8s, ns, "pvc", claim)["spec"]["volumeName"]
    return Path(get(k8s, "default", "pv", pv)["spec"]["local"]["path"])


def _corrupt_wal(data: Path, needle: bytes) -> None:
    """Flip one byte of `needle` where the member's write-ahead log holds it: inside an
    entry's payload, so the record's CRC no longer matches (etcd: "walpb: crc mismatch")."""
    for wal in sorted(data.glob("**/member/wal/*.wal")):
        raw = bytearray(wal.read_bytes())
        at = raw.find(needle)
        if at >= 0:
            raw[at] ^= 0xFF
            wal.write_bytes(bytes(raw))
            return
    raise AssertionError(f"{needle!r} is in no WAL file under {data}")


@pytest.mark.parametrize("damage", ["guarded", "old-record", "corrupt"])
def test_a_member_whose_data_is_gone_is_replaced_never_restarted(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator, damage: str
) -> None:
    """The seed's data damaged while its Pod is gone. Emptied and guarded, etcd refuses to
    start on the empty data dir. Emptied with the record an earlier version left (`new`, only
    itself), the seed bootstraps a one-member cluster under its old member ID and cluster ID:
    a fork, which is fenced (it leads a cluster of its own) or panics on the real leader's
    heartbeat (its raft log is gone). With one byte of its write-ahead log flipped, etcd stops
    on the CRC. Each way the member is replaced, with etcd's own words, and nothing else is
    touched."""
    old_record = damage == "old-record"
    k8s, ns, name = k8s_cluster, k8s_namespace, "wiped"
    apply(k8s, ns, etcd_cluster(name))
    obj = wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
    cluster_id = obj["status"]["clusterID"]
    before = {m["name"]: m["id"] for m in obj["status"]["members"]}
    victim = f"{name}-0"  # the seed: its first start bootstrapped the cluster
    others = sorted(n for n in before if n != victim)
    assert etcdctl(k8s, ns, others[0], "put", "wiped/key", "kept").strip() == "OK"
    claims_before = {
        c["metadata"]["name"]: c["metadata"]["uid"]
        for c in get(k8s, ns, "pvc", "-l", f"etcd.runbook.io/cluster={name}")["items"]
    }

    # The seed's volume emptied while its Pod is gone (the operator paused meanwhile, so it
    # cannot come back before the disk is wiped).
    patch(k8s, ns, name, {"spec": {"paused": True}})
    wait_condition(k8s, ns, name, "Progressing", "Paused")
    k8s.kubectl("-n", ns, "delete", "pod", victim, "--timeout=120s")
    data = _volume_dir(k8s, ns, f"{victim}-data")
    if damage == "corrupt":
        _corrupt_wal(data, b"wiped/key")
    else:
        for entry in data.iterdir():
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    if old_record:
        k8s.kubectl(
            "-n",
            ns,
            "annotate",
            "--overwrite",
            "pvc",
            f"{victim}-data",
            "etcd.runbook.io/initial-cluster-state=new",
        )
    patch(k8s, ns, name, {"spec": {"paused": False}})

    cluster_ids: set[str] = set()
    stop = threading.Event()

    def watch_ids() -> None:
        while not stop.wait(1):
            got = get(k8s, ns, "etcd", name).get("status", {}).get("clusterID")
            if got:
                cluster_ids.add(got)

    watcher = threading.Thread(target=watch_ids, daemon=True)
    watcher.start()

    def replaced() -> dict[str, Any]:
        o = get(k8s, ns, "etcd", name)
        status = o.get("status", {})
        ids = {m["name"]: m["id"] for m in status.get("members", [])}
        done = (
            len(ids) == 3
            and before[victim] not in ids.values()
            and status.get("readyMembers") == 3
            and condition(o, "Available").get("status") == "True"
        )
        return o if done else {}

    try:
        obj = k8s.wait_for(replaced, timeout=600, interval=2, what="the wiped member replaced")
    finally:
        stop.set()
        watcher.join(5)
    after = {m["name"]: m["id"] for m in obj["status"]["members"]}
    for other in others:
        assert after[other] == before[other], "the other members are untouched"
    claims_after = {
        c["metadata"]["name"]: c["metadata"]["uid"]
        for c in get(k8s, ns, "pvc", "-l", f"etcd.runbook.io/cluster={name}")["items"]
    }
    for other in others:
        assert claims_after[f"{other}-data"] == claims_before[f"{other}-data"]
    assert cluster_ids == {cluster_id}, f"a second cluster ID was reported: {cluster_ids}"
    members = member_list(k8s, ns, others[0])
    assert before[victim] not in {format(m["ID"], "x") for m in members}
    new = next(n for n in after if after[n] not in before.values())
    got = etcdctl(k8s, ns, new, "get", "wiped/key", "--print-value-only", "--consistency=s")
    assert got.strip() == "kept", "the new member has the data, from the others"
    removed = [e["message"] for e in events(k8s, ns, "MemberRemoved")]
    fenced = [e["message"] for e in events(k8s, ns, "MemberFenced")]
    words = {"guarded": "cannot fetch cluster info", "corrupt": "crc mismatch"}
    if old_record:
        assert any(victim in m for m in removed + fenced), (removed, fenced)
    else:
        assert any(victim in m and "etcd says: " in m and words[damage] in m for m in removed), (
            removed
        )


def test_a_majority_s_data_lost_is_said_within_30s_then_recovered_from_the_survivor_asked_for(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    k8s, ns, name = k8s_cluster, k8s_namespace, "lost"
    apply(k8s, ns, etcd_cluster(name))
    obj = wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
    survivor = sorted(m["name"] for m in obj["status"]["members"])[0]
    assert etcdctl(k8s, ns, survivor, "put", "lost/key", "kept").strip() == "OK"
    survivor_claim = get(k8s, ns, "pvc", f"{survivor}-data")["metadata"]["uid"]
    doomed = [m["name"] for m in obj["status"]["members"] if m["name"] != survivor]

    lost_at = time.monotonic()
    k8s.kubectl(
        "-n",
        ns,
        "delete",
        *[f"pod/{n}" for n in doomed],
        *[f"pvc/{n}-data" for n in doomed],
        "--wait=false",
    )

    def majority_lost() -> dict[str, Any]:
        o = get(k8s, ns, "etcd", name)
        lost = (
            o.get("status", {}).get("phase") == "MajorityDataLost"
            and condition(o, "Available").get("status") == "False"
            and condition(o, "Available").get("reason") == "MajorityDataLost"
        )
        return o if lost else {}

    obj = k8s.wait_for(majority_lost, timeout=30, interval=0.5, what="MajorityDataLost")
    print(f"MajorityDataLost reported {time.monotonic() - lost_at:.1f}s after the loss")
    # Said with what a person chooses by: who is gone, and the survivor's own measure.
    said = obj["status"]["majorityDataLost"]
    assert sorted(said["lost"]) == sorted(doomed), said
    (row,) = said["survivors"]
    assert row["name"] == survivor and said["newest"] == survivor, said
    assert row["raftIndex"] > 0 and row["revision"] >= 2 and row["lastAnswered"], said
    assert survivor in condition(obj, "Available")["message"], obj["status"]
    # Status may show the run's look a moment before the run sends its Events: the Warning
    # too within the 30 s of the loss.
    k8s.wait_for(
        lambda: events(k8s, ns, "MajorityDataLost"),
        timeout=max(1.0, 30 - (time.monotonic() - lost_at)),
        interval=0.5,
        what="a MajorityDataLost Warning Event",
    )

    # A person asks for a recovery, the cluster paused first to read the operator's answer
    # before anything is done: a request for another cluster ID is refused, naming the key;
    # one for this cluster is checked and recorded, with what it would leave behind.
    patch(k8s, ns, name, {"spec": {"paused": True}})
    cluster_id = obj["status"]["clusterID"]
    for value, action, reason, event in (
        (f"member={survivor} clusterID=b0b", "refuse", "ClusterIDMismatch", "RecoveryRefused"),
        (
            f"member={survivor} clusterID={cluster_id}",
            "from_member",
            "FromNewestSurvivor",
            "RecoveryChosen",
        ),
    ):
        k8s.kubectl(
            "-n", ns, "annotate", "--overwrite", f"etcd/{name}", f"{ANN_RECOVER_QUORUM}={value}"
        )

        def decided(value: str = value) -> dict[str, Any]:
            recovery = get(k8s, ns, "etcd", name).get("status", {}).get("recovery") or {}
            return recovery if recovery.get("asked") == value else {}

        recovery = k8s.wait_for(
            decided, timeout=60, interval=0.5, what=f"status.recovery of {value}"
        )
        assert (recovery["action"], recovery["reason"]) == (action, reason), recovery
        assert recovery["message"].startswith("recover-quorum: "), recovery

        def said(event: str = event) -> list[dict[str, Any]]:
            return [e for e in events(k8s, ns, event) if e["message"].startswith("recover-quorum:")]

        k8s.wait_for(said, timeout=30, interval=0.5, what=f"a {event} Event")
    assert recovery["source"] == survivor and recovery["carriedOut"] is False, recovery
    assert "spec.paused" in recovery["message"], recovery
    assert recovery["raftIndex"] >= row["raftIndex"], recovery
    assert sorted(m["name"] for m in recovery["leftBehind"]) == sorted(doomed), recovery
    assert all(m["dataLost"] for m in recovery["leftBehind"]), recovery

    # Paused, it stays so, and nothing is done to the survivor.
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        o = get(k8s, ns, "etcd", name)
        assert condition(o, "Available").get("status") == "False", o.get("status")
        time.sleep(3)
    assert get(k8s, ns, "pvc", f"{survivor}-data")["metadata"]["uid"] == survivor_claim
    assert [p["metadata"]["name"] for p in pods(k8s, ns, name)] == [survivor]
    got = etcdctl(k8s, ns, survivor, "get", "lost/key", "--print-value-only", "--consistency=s")
    assert got.strip() == "kept"

    # Unpaused, it is carried out: the survivor's data becomes a new cluster, grown back.
    fingerprint = recovery["fingerprint"]
    asked_at = time.monotonic()
    patch(k8s, ns, name, {"spec": {"paused": False}})
    obj, seen = wait_recovered(k8s, ns, name)
    print(f"recovered, phases {seen}, {time.monotonic() - asked_at:.1f}s after it was asked")
    assert seen[-1] == "Done" and "Restoring" in seen, seen
    # A new cluster: its own ID, the request read as done (the annotation left in place).
    new_id = obj["status"]["clusterID"]
    assert new_id and new_id != cluster_id, obj["status"]
    assert obj["status"]["recovery"]["action"] == "done", obj["status"]["recovery"]
    # Every old claim fenced and kept, the survivor's as the source; none of them runs.
    fences = {
        c["metadata"]["name"]: c["metadata"].get("annotations", {}).get("etcd.runbook.io/fenced")
        for c in get(k8s, ns, "pvc", "-l", f"etcd.runbook.io/cluster={name}")["items"]
    }
    assert fences[f"{survivor}-data"] == f"recovery {fingerprint} source", fences
    assert get(k8s, ns, "pvc", f"{survivor}-data")["metadata"]["uid"] == survivor_claim
    # The recovery Job's Pod stays beside them, done (the Job is the record of the restore).
    running = sorted(
        p["metadata"]["name"]
        for p in pods(k8s, ns, name)
        if p["metadata"]["labels"].get("app.kubernetes.io/name") == "etcd"
    )
    assert survivor not in running and len(running) == 3, running
    assert all(fences[f"{n}-data"] is None for n in running), fences
    # The survivor's data, every member voting, revisions beyond any the old cluster served.
    members = member_list(k8s, ns, running[0])
    assert len(members) == 3 and not any(m.get("isLearner") for m in members), members
    for member in running:
        got = etcdctl(k8s, ns, member, "get", "lost/key", "--print-value-only")
        assert got.strip() == "kept", member
    header = json.loads(etcdctl(k8s, ns, running[0], "get", "lost/key", "-w", "json"))["header"]
    assert int(header["revision"]) > 1_000_000_000, header
    for reason in ("RecoveryChosen", "Recovering"):
        assert events(k8s, ns, reason), reason


def test_a_majority_s_data_lost_is_recovered_from_the_backup_asked_for(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    k8s, ns, name = k8s_cluster, k8s_namespace, "lostb"
    apply(k8s, ns, etcd_cluster(name))
    obj = wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
    first = sorted(m["name"] for m in obj["status"]["members"])[0]
    for i in range(20):
        assert etcdctl(k8s, ns, first, "put", f"kept/{i:02d}", str(i)).strip() == "OK"
    apply(k8s, ns, backup_claim("backups"))
    apply(k8s, ns, volume_backup("nightly", name, "backups"))
    taken = wait_phase(k8s, ns, "nightly", {"Succeeded", "Failed"}, 240)
    assert taken["status"]["phase"] == "Succeeded", taken["status"]
    snapshot = taken["status"]["lastSnapshot"]
    # Written after the backup: what a recovery from it gives up, and says it does.
    assert etcdctl(k8s, ns, first, "put", "after/backup", "lost").strip() == "OK"
    header = json.loads(etcdctl(k8s, ns, first, "get", "after/backup", "-w", "json"))["header"]
    old_revision = int(header["revision"])
    doomed = sorted(m["name"] for m in obj["status"]["members"])[1:]
    k8s.kubectl(
        "-n",
        ns,
        "delete",
        *[f"pod/{n}" for n in doomed],
        *[f"pvc/{n}-data" for n in doomed],
        "--wait=false",
    )
    obj = wait_condition(k8s, ns, name, "Available", "MajorityDataLost", timeout=60)
    cluster_id = obj["status"]["clusterID"]

    # A backup over a survivor's data is refused unless the request says it means it.
    def decided(value: str) -> dict[str, Any]:
        k8s.kubectl(
            "-n", ns, "annotate", "--overwrite", f"etcd/{name}", f"{ANN_RECOVER_QUORUM}={value}"
        )

        def seen() -> dict[str, Any]:
            recovery = get(k8s, ns, "etcd", name).get("status", {}).get("recovery") or {}
            return recovery if recovery.get("asked") == value else {}

        return k8s.wait_for(seen, timeout=60, interval=0.5, what=f"status.recovery of {value}")

    refused = decided(f"backup=nightly clusterID={cluster_id}")
    assert (refused["action"], refused["reason"]) == ("refuse", "SurvivorExists"), refused
    assert f"member={first}" in refused["message"], refused
    asked_at = time.monotonic()
    decided(f"backup=nightly clusterID={cluster_id} acceptOlder=true")
    obj, seen = wait_recovered(k8s, ns, name)
    print(f"recovered from the backup, phases {seen}, {time.monotonic() - asked_at:.1f}s")
    assert "Restoring" in seen and seen[-1] == "Done", seen
    new_id = obj["status"]["clusterID"]
    assert new_id and new_id != cluster_id, obj["status"]
    recovery = obj["status"]["recovery"]
    assert recovery["action"] == "done", recovery
    assert (recovery["oldClusterID"], recovery["newClusterID"]) == (cluster_id, new_id), recovery
    said = [
        (e["reason"], e["message"])
        for e in get(k8s, ns, "events")["items"]
        if e["involvedObject"]["kind"] == "EtcdCluster"
    ]
    assert any(r == "RecoveryChosen" and "backup=nightly" in m for r, m in said), said
    # Every old claim fenced naming the backup, the survivor's too: its data was given up.
    fences = {
        c["metadata"]["name"]: c["metadata"].get("annotations", {}).get("etcd.runbook.io/fenced")
        for c in get(k8s, ns, "pvc", "-l", f"etcd.runbook.io/cluster={name}")["items"]
    }
    assert fences[f"{first}-data"].endswith(" backup=nightly"), fences
    running = sorted(
        p["metadata"]["name"]
        for p in pods(k8s, ns, name)
        if p["metadata"]["labels"].get("app.kubernetes.io/name") == "etcd"
    )
    assert first not in running and len(running) == 3, running
    members = member_list(k8s, ns, running[0])
    assert len(members) == 3 and not any(m.get("isLearner") for m in members), members
    # The backup's data on every member, up to its revision; what came after it, gone.
    for member in running:
        got = etcdctl(k8s, ns, member, "get", "kept/", "--prefix", "--keys-only")
        assert len(got.split()) == 20, (member, got)
        assert etcdctl(k8s, ns, member, "get", "after/backup", "--consistency=s").strip() == ""
    header = json.loads(etcdctl(k8s, ns, running[0], "get", "kept/00", "-w", "json"))["header"]
    assert int(header["revision"]) >= 1_000_000_000 + int(snapshot["revision"]), header
    # A watcher resuming from a revision of the old cluster is told of compaction, never
    # served the old history again (nor silently the new one from there).
    watch = k8s.kubectl(
        "-n", ns, "exec", running[0], "-c", "etcd", "--", "/usr/local/bin/etcdctl",
        "--endpoints=https://127.0.0.1:2379", *TLS_ARGS,
        "watch", f"--rev={old_revision}", "kept/00",
        check=False, timeout=60,
    )  # fmt: skip
    assert "compacted" in watch.stdout + watch.stderr, (watch.stdout, watch.stderr)


def wait_recovered(
    k8s: K8sCluster, ns: str, name: str, size: int = 3
) -> tuple[dict[str, Any], list[str]]:
    """The EtcdCluster once its recovery is Done with `size` members ready and it is
    Available, and the phases status showed on the way; a recovery that Failed ends the wait
    at once, said with its reason."""
    seen: list[str] = []

    def ended() -> dict[str, Any]:
        o = get(k8s, ns, "etcd", name)
        phase = (o.get("status", {}).get("recovery") or {}).get("phase")
        if phase and (not seen or seen[-1] != phase):
            seen.append(phase)
        ready = o.get("status", {}).get("readyMembers") == size
        available = condition(o, "Available").get("status") == "True"
        return o if phase == "Failed" or (phase == "Done" and ready and available) else {}

    obj = k8s.wait_for(ended, timeout=600, interval=1, what="the recovery done")
    assert seen[-1] != "Failed", obj["status"]["recovery"]
    return obj, seen


def _writer(k8s: K8sCluster, ns: str, pod: str, stop: threading.Event, acked: list[str]) -> None:
    """Writes keys through the client Service until stopped (at most 600), remembering each
    write etcd acknowledged."""
    for i in range(600):
        if stop.is_set():
            return
        key = f"load/{i:04d}"
        svc = f"https://{pod.rsplit('-', 1)[0]}-client.{ns}.svc.cluster.local:2379"
        try:
            out = etcdctl(k8s, ns, pod, "put", key, str(i), endpoint=svc)
        except KubectlError:
            continue
        if out.strip() == "OK":
            acked.append(key)


def _budget_follows_voters(k8s: K8sCluster, ns: str, name: str) -> tuple[int, int]:
    """(minAvailable, voting members) now; the budget never lets a drain break quorum."""
    pdb = get(k8s, ns, "pdb", name)
    voters = [
        p
        for p in pods(k8s, ns, name)
        if p["metadata"]["labels"].get("etcd.runbook.io/voter") == "true"
    ]
    return int(pdb["spec"]["minAvailable"]), len(voters)


def test_scale_3_5_3_5_3_under_writes_keeps_the_budget_and_every_write(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    k8s, ns, name = k8s_cluster, k8s_namespace, "scale"
    apply(k8s, ns, etcd_cluster(name))
    wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
    assert _budget_follows_voters(k8s, ns, name) == (2, 3)
    writer_pod = f"{name}-0"
    stop, acked = threading.Event(), list[str]()
    writer = threading.Thread(target=_writer, args=(k8s, ns, writer_pod, stop, acked), daemon=True)
    writer.start()
    samples: list[tuple[int, int]] = []
    try:
        for size in (5, 3, 5, 3):
            patch(k8s, ns, name, {"spec": {"size": size}})

            def settled(size: int = size) -> dict[str, Any]:
                samples.append(_budget_follows_voters(k8s, ns, name))
                o = get(k8s, ns, "etcd", name)
                st = o.get("status", {})
                done = (
                    st.get("size") == size
                    and st.get("readyMembers") == size
                    and condition(o, "Progressing").get("status") == "False"
                )
                return o if done else {}

            k8s.wait_for(settled, timeout=600, interval=1, what=f"{size} members")
            assert _budget_follows_voters(k8s, ns, name) == (size // 2 + 1, size)
    finally:
        stop.set()
        writer.join(60)
    # At every sample a drain could take at most the members a quorum can spare.
    bad = [(m, v) for m, v in samples if v and m < v // 2 + 1]
    assert not bad, f"the budget let a drain break quorum: {bad}"
    assert len(acked) > 20, f"the writer got through: {len(acked)} writes"
    stored = set(etcdctl(k8s, ns, writer_pod, "get", "load/", "--prefix", "--keys-only").split())
    missing = sorted(set(acked) - stored)
    assert not missing, f"acknowledged writes lost: {missing[:5]}"
    assert not [m for m in member_list(k8s, ns, writer_pod) if m.get("isLearner")]


def test_invalid_input_changes_nothing_and_names_the_field(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    k8s, ns = k8s_cluster, k8s_namespace
    # A TLS Secret not labelled for the cluster is never mounted into its Pods.
    k8s.kubectl(
        "-n",
        ns,
        "create",
        "secret",
        "generic",
        "someone-elses",
        "--type=kubernetes.io/tls",
        "--from-literal=tls.crt=x",
        "--from-literal=tls.key=y",
        "--from-literal=ca.crt=z",
    )
    secrets = {"peer": "someone-elses", "server": "someone-elses", "client": "someone-elses"}
    cases = {
        "broken": ({"version": "3.5.1"}, "InvalidSpec", "spec.version 3.5.1"),
        # A feature gate etcd 3.4 lacks: only the runbook knows which version has which (a
        # quota that does not fit the volume is refused at the door, tests/cluster).
        "gate": (
            {"version": "3.4.31", "etcd": {"featureGates": {"CompactHashCheck": True}}},
            "InvalidSpec",
            "spec.etcd.featureGates.CompactHashCheck: etcd 3.4 has no such feature",
        ),
        "tls": ({"tls": {"enabled": True, "secrets": secrets}}, "TLSSecretMissing", "tls-for="),
    }
    for name, (spec, _reason, _words) in cases.items():
        obj = etcd_cluster(name, size=1)
        obj["spec"].update(spec)
        apply(k8s, ns, obj)
    for name, (_spec, reason, words) in cases.items():
        obj = wait_condition(k8s, ns, name, "Degraded", reason)
        assert words in condition(obj, "Degraded")["message"], condition(obj, "Degraded")

        def announced(reason: str = reason, name: str = name) -> list[dict[str, Any]]:
            return [e for e in events(k8s, ns, reason) if e["involvedObject"]["name"] == name]

        # Status may show the run's look a moment before the run sends its Events.
        k8s.wait_for(announced, timeout=30, interval=0.5, what=f"a {reason} Event for {name}")
        assert pods(k8s, ns, name) == []
        assert get(k8s, ns, "pvc", "-l", f"etcd.runbook.io/cluster={name}")["items"] == []


# Another app's objects, under the names the runbooks of these resources would write: the
# CA Secret of EtcdCluster taken-a, the client Service of taken-b, the budget of taken-c, the
# first member's claim of taken-d, the CronJob of the scheduled EtcdBackup nightly, a CronJob
# named like the one-off EtcdBackup once (which deletes its own CronJob of a schedule that
# was removed), the ServiceAccount of the one-off EtcdBackup weekly.
_APP = {"app.kubernetes.io/name": "web"}
FOREIGN: list[dict[str, Any]] = [
    {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "taken-a-ca", "labels": _APP},
        "stringData": {"password": "the-web-apps-own"},
    },
    {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "taken-b-client", "labels": _APP},
        "spec": {"selector": _APP, "ports": [{"port": 80, "targetPort": 8080}]},
    },
    {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "taken-c", "labels": _APP},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": _APP}},
    },
    {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "taken-d-0-data", "labels": _APP},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    },
    *(
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": name, "labels": _APP},
            "spec": {
                "schedule": "0 3 * * *",
                "suspend": True,
                "jobTemplate": {
                    "spec": {
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [
                                    {
                                        "name": "report",
                                        "image": "gcr.io/etcd-development/etcd:v3.6.16",
                                        "command": ["/usr/local/bin/etcd", "--version"],
                                    }
                                ],
                            }
                        }
                    }
                },
            },
        }
        for name in ("nightly", "once")
    ),
    {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "etcd-backup-weekly", "labels": _APP},
    },
]
# What each resource collides with, as its NameTaken condition names it.
TAKEN = {
    ("etcd", "taken-a"): "Secret {ns}/taken-a-ca",
    ("etcd", "taken-b"): "Service {ns}/taken-b-client",
    ("etcd", "taken-c"): "PodDisruptionBudget {ns}/taken-c",
    ("etcd", "taken-d"): "PersistentVolumeClaim {ns}/taken-d-0-data",
    ("etcdbackup", "nightly"): "CronJob {ns}/nightly",
    ("etcdbackup", "once"): "CronJob {ns}/once",
    ("etcdbackup", "weekly"): "ServiceAccount {ns}/etcd-backup-weekly",
}


def _as_they_are(k8s: K8sCluster, ns: str) -> dict[str, Any]:
    """Each foreign object whole (uid, resourceVersion, labels, owners, content), status aside."""
    found = {}
    for obj in FOREIGN:
        got = get(k8s, ns, obj["kind"].lower(), obj["metadata"]["name"])
        meta = {k: v for k, v in got["metadata"].items() if k != "managedFields"}
        found[f"{obj['kind']}/{meta['name']}"] = {
            **{k: v for k, v in got.items() if k != "status"},
            "metadata": meta,
        }
    return found


def test_the_operator_writes_only_what_it_owns(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    """A tenant who may only create EtcdClusters and EtcdBackups names them to collide with
    another app's Secret, Service, budget, claim, CronJobs and ServiceAccount: each resource
    says NameTaken (condition and Event naming the object), and every one of those objects is
    as it was, not one field written, none deleted. Beside them, the documented re-attach
    still works: an EtcdCluster deleted and made again under its name starts on its kept
    claim, with its data."""
    k8s, ns = k8s_cluster, k8s_namespace
    for obj in FOREIGN:
        apply(k8s, ns, obj)
    # Let the cluster's own controllers (the budget's status) finish with them first.
    settled: list[dict[str, Any]] = []

    def steady() -> dict[str, Any]:
        now = _as_they_are(k8s, ns)
        same = bool(settled) and settled[-1] == now
        settled.append(now)
        return now if same else {}

    before = k8s.wait_for(steady, timeout=60, interval=3, what="the foreign objects settled")

    apply(k8s, ns, etcd_cluster("kept", size=1))
    for name in ("taken-a", "taken-b", "taken-c", "taken-d"):
        apply(k8s, ns, etcd_cluster(name, size=1))
    credentials_secret(k8s, ns, "s3", "a", "b")
    s3 = {"endpoint": "http://127.0.0.1:9", "bucket": "nowhere", "credentialsSecret": "s3"}
    for name, schedule in (("nightly", "0 3 * * *"), ("once", ""), ("weekly", "")):
        spec: dict[str, Any] = {"clusterName": "taken-a", "destination": {"s3": s3}}
        if schedule:
            spec["schedule"] = schedule
        apply(
            k8s,
            ns,
            {
                "apiVersion": "etcd.runbook.io/v1alpha1",
                "kind": "EtcdBackup",
                "metadata": {"name": name},
                "spec": spec,
            },
        )

    started = time.monotonic()
    for (kind, name), words in TAKEN.items():

        def refused(kind: str = kind, name: str = name) -> dict[str, Any]:
            obj = get(k8s, ns, kind, name)
            return obj if condition(obj, "Degraded").get("reason") == "NameTaken" else {}

        obj = k8s.wait_for(refused, timeout=240, interval=2, what=f"{kind} {name} NameTaken")
        message = condition(obj, "Degraded")["message"]
        assert words.format(ns=ns) in message, message

        def told(name: str = name) -> list[dict[str, Any]]:
            return [e for e in events(k8s, ns, "NameTaken") if e["involvedObject"]["name"] == name]

        told_of = k8s.wait_for(told, timeout=30, interval=1, what=f"a NameTaken Event for {name}")
        assert words.format(ns=ns) in told_of[0]["message"]
    print(f"every collision said NameTaken {time.monotonic() - started:.1f}s after the POSTs")

    # The re-attach, meanwhile: data kept with the claim, found again under the same name.
    wait_available(k8s, ns, "kept", 1, AVAILABLE_WITHIN)
    etcdctl(k8s, ns, "kept-0", "put", "/kept", "still-here")
    claim_uid = get(k8s, ns, "pvc", "kept-0-data")["metadata"]["uid"]
    k8s.kubectl("-n", ns, "delete", "etcd", "kept", "--timeout=120s")
    k8s.wait_for(lambda: not pods(k8s, ns, "kept"), timeout=120, what="kept's Pod gone")
    apply(k8s, ns, etcd_cluster("kept", size=1))
    wait_available(k8s, ns, "kept", 1, AVAILABLE_WITHIN)
    assert get(k8s, ns, "pvc", "kept-0-data")["metadata"]["uid"] == claim_uid
    assert "still-here" in etcdctl(k8s, ns, "kept-0", "get", "/kept", "--print-value-only")

    # Several runs of each resource have been refused by now: nothing of the other app moved.
    after = _as_they_are(k8s, ns)
    for key, was in before.items():
        assert after[key] == was, f"{key} changed:\n{json.dumps([was, after[key]], indent=1)}"


def _tls_held(k8s: K8sCluster, ns: str, names: list[str]) -> dict[str, dict[str, Any]]:
    """Of each Secret in `names` that exists: its certificates (tls.crt, ca.crt, PEM) and the
    names of its keys. Private keys are never kept, printed or compared."""
    held = {}
    for secret in get(k8s, ns, "secrets")["items"]:
        name = secret["metadata"]["name"]
        if name in names:
            data = secret.get("data") or {}
            held[name] = {
                **{
                    f: base64.b64decode(data[f]).decode()
                    for f in ("tls.crt", "ca.crt")
                    if f in data
                },
                "keys": sorted(data),
            }
    return held


def _issued_by(leaf_pem: str, ca_pem: str) -> bool:
    leaf = x509.load_pem_x509_certificate(leaf_pem.encode())
    try:
        leaf.verify_directly_issued_by(x509.load_pem_x509_certificate(ca_pem.encode()))
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _ready_with(
    k8s: K8sCluster, ns: str, name: str, ready: int, degraded: str, timeout: float = 120
) -> dict[str, Any]:
    """The cluster once Available with `ready` members and Degraded for `degraded`."""

    def seen() -> dict[str, Any]:
        o = get(k8s, ns, "etcd", name)
        ok = (
            o.get("status", {}).get("readyMembers") == ready
            and condition(o, "Available").get("status") == "True"
            and condition(o, "Degraded").get("reason") == degraded
        )
        return o if ok else {}

    return k8s.wait_for(
        seen, timeout=timeout, interval=1, what=f"{name}: {ready} ready, {degraded}"
    )


def _delete_pod(k8s: K8sCluster, ns: str, pod: str) -> str:
    """Deletes a member Pod; returns its uid, to tell it from the one made again."""
    uid = str(get(k8s, ns, "pod", pod)["metadata"]["uid"])
    k8s.kubectl("-n", ns, "delete", "pod", pod, "--wait=false")
    return uid


def _back(k8s: K8sCluster, ns: str, pod: str, old_uid: str, timeout: float = 120) -> None:
    """Waits for member Pod `pod` to be made again (another uid) and Ready."""

    def ready() -> bool:
        p = get(k8s, ns, "pods", "--field-selector", f"metadata.name={pod}")["items"]
        return (
            bool(p)
            and p[0]["metadata"]["uid"] != old_uid
            and any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in p[0].get("status", {}).get("conditions", [])
            )
        )

    k8s.wait_for(ready, timeout=timeout, interval=1, what=f"{pod} made again and Ready")


def _event_naming(
    k8s: K8sCluster, ns: str, name: str, reason: str, words: str, timeout: float = 60
) -> dict[str, Any]:
    def seen() -> list[dict[str, Any]]:
        return [
            e
            for e in events(k8s, ns, reason)
            if e["involvedObject"]["name"] == name and words in e.get("message", "")
        ]

    return k8s.wait_for(seen, timeout=timeout, interval=0.5, what=f"{reason} naming {words}")[0]


def _user_tls_secrets(k8s: K8sCluster, ns: str, cluster: str) -> dict[str, str]:
    """A person's TLS Secrets for `cluster`, labelled for it, issued with the role's own
    profiles (so etcd's address checks pass); returns spec.tls.secrets."""
    profiles = etcd_manifests.cert_profiles(
        {"name": cluster, "namespace": ns, "domain": "cluster.local"}
    )
    made = issue_material(
        ca=None,
        ca_common_name=f"{cluster} user CA",
        ca_days=30,
        cert_days=30,
        profiles=profiles,
        issue=None,
    )
    names = {}
    for purpose in ("peer", "server", "client"):
        names[purpose] = f"{cluster}-mine-{purpose}"
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {
                "name": names[purpose],
                "labels": {"etcd.runbook.io/tls-for": cluster},
            },
            "stringData": made.material[purpose],
        }
        apply(k8s, ns, secret)
    return names


def test_a_lost_tls_secret_never_breaks_a_running_cluster(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    """Issue 23, item 4. A 3-member cluster under writes loses, one after the other, its peer
    Secret (issued again from the same CA), its CA Secret (the certificate put back as it was,
    the key said lost, no new CA) and then its server Secret (nothing can issue it: refused by
    name, the member whose Pod went waits for it, the others run on); each time a member Pod
    is deleted too. Beside it a 1-member cluster on a person's Secrets whose peer Secret loses
    its label: its deleted Pod is not made again with it."""
    k8s, ns, name, user = k8s_cluster, k8s_namespace, "tls", "tlsu"
    ca, peer, server, client = (
        f"{name}-ca",
        f"{name}-peer-tls",
        f"{name}-server-tls",
        f"{name}-client-tls",
    )
    apply(k8s, ns, etcd_cluster(name))
    mine = _user_tls_secrets(k8s, ns, user)
    apply(k8s, ns, etcd_cluster(user, size=1, tls={"enabled": True, "secrets": mine}))
    wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
    wait_available(k8s, ns, user, 1, AVAILABLE_WITHIN)
    first = _tls_held(k8s, ns, [ca, peer, server, client])
    assert sorted(first) == sorted([ca, peer, server, client])
    writer_pod = f"{name}-0"
    for i in range(5):
        assert etcdctl(k8s, ns, writer_pod, "put", f"before/{i}", str(i)).strip() == "OK"
    stop, acked = threading.Event(), list[str]()
    writer = threading.Thread(target=_writer, args=(k8s, ns, writer_pod, stop, acked), daemon=True)
    writer.start()
    started = time.monotonic()
    try:
        # 1. The peer Secret goes, the CA is at hand: issued again from that CA, nothing else.
        k8s.kubectl("-n", ns, "delete", "secret", peer)
        _back(k8s, ns, f"{name}-2", _delete_pod(k8s, ns, f"{name}-2"))
        wait_available(k8s, ns, name, 3, 120)
        now = _tls_held(k8s, ns, [ca, peer, server, client])
        assert now[ca] == first[ca] and now[server] == first[server]
        assert now[client] == first[client]
        assert now[peer]["ca.crt"] == first[ca]["tls.crt"], "re-made under another CA"
        assert _issued_by(now[peer]["tls.crt"], first[ca]["tls.crt"])
        held = now

        # 2. The CA Secret goes: its certificate comes back as it was, from what the members
        # trust; its key is lost and said so; no certificate changes; the member whose Pod is
        # deleted comes back on the material it had.
        k8s.kubectl("-n", ns, "delete", "secret", ca)
        gone = _delete_pod(k8s, ns, f"{name}-1")
        k8s.wait_for(
            lambda: ca in _tls_held(k8s, ns, [ca]), timeout=120, interval=1, what=f"{ca} back"
        )
        now = _tls_held(k8s, ns, [ca, peer, server, client])
        assert now[ca]["tls.crt"] == first[ca]["tls.crt"], "a new CA replaced the cluster's"
        assert now[ca]["keys"] == ["ca.crt", "tls.crt"], "the key was kept nowhere else"
        assert {s: now[s] for s in (peer, server, client)} == {
            s: held[s] for s in (peer, server, client)
        }, "a certificate in use was replaced"
        _back(k8s, ns, f"{name}-1", gone)
        o = _ready_with(k8s, ns, name, 3, "TLSCAKeyLost")
        message = condition(o, "Degraded")["message"]
        assert ca in message and "tls.key" in message, message
        _event_naming(k8s, ns, name, "TLSCAKeyLost", ca)
        _event_naming(k8s, ns, name, "TLSSecretRestored", f"Secret {ca} was missing")
        _event_naming(k8s, ns, name, "TLSSecretRestored", f"Secret {peer} was missing")

        # 3. The server Secret goes too: nothing can issue it now. Refused by name, nothing
        # made in its place, the Pod deleted is not made again without it, the others run on.
        saved = get(k8s, ns, "secret", server)
        k8s.kubectl("-n", ns, "delete", "secret", server)
        gone = _delete_pod(k8s, ns, f"{name}-2")
        _event_naming(k8s, ns, name, "TLSSecretLost", server)
        o = _ready_with(k8s, ns, name, 2, "TLSSecretLost")
        assert server in condition(o, "Degraded")["message"]
        assert server not in _tls_held(k8s, ns, [server]), "a lost Secret was minted anew"
        assert [p["metadata"]["name"] for p in pods(k8s, ns, name)] == [f"{name}-0", f"{name}-1"]
        assert _tls_held(k8s, ns, [ca, peer, client]) == {s: now[s] for s in (ca, peer, client)}

        # What the refusal says to do: put the Secret back from a copy; the member returns.
        for field in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
            saved["metadata"].pop(field, None)
        apply(k8s, ns, saved)
        k8s.kubectl(
            "-n",
            ns,
            "annotate",
            "--overwrite",
            "etcd",
            name,
            f"etcd.runbook.io/retry={time.time()}",
        )
        _back(k8s, ns, f"{name}-2", gone)
        _ready_with(k8s, ns, name, 3, "TLSCAKeyLost")
        assert _tls_held(k8s, ns, [ca, peer, server, client]) == now
    finally:
        stop.set()
        writer.join(60)
    print(f"three losses, each with a member Pod deleted: {time.monotonic() - started:.1f} s")
    assert len(acked) > 10, f"the writer got through: {len(acked)} writes"
    stored = set(etcdctl(k8s, ns, writer_pod, "get", "", "--prefix", "--keys-only").split())
    assert {f"before/{i}" for i in range(5)} <= stored
    missing = sorted(set(acked) - stored)
    assert not missing, f"acknowledged writes lost: {missing[:5]}"

    # 4. A person's Secret loses its label: the heal does not mount it, and says which field.
    k8s.kubectl("-n", ns, "label", "secret", mine["peer"], "etcd.runbook.io/tls-for-")
    k8s.kubectl("-n", ns, "delete", "pod", f"{user}-0", "--wait=false")
    _event_naming(k8s, ns, user, "TLSSecretMissing", "spec.tls.secrets.peer")
    time.sleep(3)
    assert pods(k8s, ns, user) == [], "a Pod was made with a Secret not labelled for the cluster"


def _plain_etcdctl(k8s: K8sCluster, ns: str, pod: str, *args: str) -> str:
    """etcdctl in a member Pod of a cluster without TLS (anyone who reaches its client port
    may do the same)."""
    out = k8s.kubectl(
        "-n", ns, "exec", pod, "-c", "etcd", "--", "/usr/local/bin/etcdctl",
        "--endpoints=http://127.0.0.1:2379", *args,
    )  # fmt: skip
    return str(out.stdout)


def test_a_member_of_another_namespace_is_never_taken_for_ours(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    """Two EtcdClusters of one name in two namespaces, without TLS. A learner is added to
    ours at the peer URL of the other's member `same-0`: taken for our same-0 (by the URL's
    first label), the surplus learner was removed, which removed our healthy same-0 (found by
    its name) and deleted its claim. Now it is said (ForeignMember) and nothing is touched; once
    someone removes it, the cluster is as before."""
    k8s, ns, name = k8s_cluster, k8s_namespace, "same"
    plain = {"enabled": False}
    with namespace_for_test(k8s) as other:
        apply(k8s, other, etcd_cluster(name, size=1, tls=plain))
        apply(k8s, ns, etcd_cluster(name, size=3, tls=plain))
        wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
        if isinstance(operator, InClusterOperator):  # a process operator watches one namespace
            wait_available(k8s, other, name, 1, AVAILABLE_WITHIN)
        claim = get(k8s, ns, "pvc", f"{name}-0-data")["metadata"]
        theirs = f"http://{name}-0.{name}.{other}.svc.cluster.local:2380"
        added = _plain_etcdctl(
            k8s, ns, f"{name}-1", "member", "add", "stranger", "--learner", f"--peer-urls={theirs}"
        )
        foreign_id = added.split("Member ", 1)[1].split()[0]
        started = time.monotonic()
        patch(k8s, ns, name, {"metadata": {"annotations": {"etcd.runbook.io/poke": "1"}}})

        def said_or_touched() -> dict[str, Any]:
            obj = get(k8s, ns, "etcd", name)
            said = condition(obj, "Degraded").get("reason") == "ForeignMember"
            now = get(k8s, ns, "pvc", "-l", f"etcd.runbook.io/cluster={name}")["items"]
            ours = next((c for c in now if c["metadata"]["name"] == f"{name}-0-data"), None)
            touched = ours is None or "etcd.runbook.io/removing" in (
                ours["metadata"].get("annotations") or {}
            )
            return {"obj": obj, "touched": touched} if said or touched else {}

        seen = k8s.wait_for(said_or_touched, timeout=180, interval=1, what="the stranger said")
        print(f"ForeignMember said {time.monotonic() - started:.1f}s after the poke")
        assert not seen["touched"], f"{name}-0 was taken for the stranger and removed"
        message = condition(seen["obj"], "Degraded")["message"]
        assert foreign_id in message and theirs in message, message
        assert get(k8s, ns, "pvc", f"{name}-0-data")["metadata"]["uid"] == claim["uid"]
        members = json.loads(_plain_etcdctl(k8s, ns, f"{name}-1", "member", "list", "-w", "json"))
        voters = sorted(m["name"] for m in members["members"] if not m.get("isLearner"))
        assert voters == [f"{name}-0", f"{name}-1", f"{name}-2"], members
        k8s.wait_for(
            lambda: [e for e in events(k8s, ns, "ForeignMember") if foreign_id in e["message"]],
            timeout=30,
            interval=1,
            what="a ForeignMember Warning Event",
        )

        # Removed by hand, the cluster is back as it was.
        _plain_etcdctl(k8s, ns, f"{name}-1", "member", "remove", foreign_id)
        patch(k8s, ns, name, {"metadata": {"annotations": {"etcd.runbook.io/poke": "2"}}})
        wait_available(k8s, ns, name, 3, 120)
        assert get(k8s, ns, "pvc", f"{name}-0-data")["metadata"]["uid"] == claim["uid"]


def _user_tls(ns: str, name: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The three Secrets of spec.tls.secrets, labelled for the cluster, the members certified
    by one CA and the client certificate (what the operator presents) by another, which the
    members do not trust: etcd never answers the operator. And a client Secret the members
    trust, to put in its place."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    def pem(obj: Any) -> str:
        if isinstance(obj, x509.Certificate):
            return obj.public_bytes(serialization.Encoding.PEM).decode()
        return obj.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()

    def issue(cn: str, ca: tuple[Any, Any] | None, *extensions: Any) -> tuple[Any, Any]:
        """(key, certificate); self-signed CA when `ca` is None."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(ca[1].subject if ca else subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca is None, path_length=None), True)
        )
        for extension in extensions:
            builder = builder.add_extension(extension, False)
        return key, builder.sign(ca[0] if ca else key, hashes.SHA256())

    members_ca, strangers_ca = issue("members", None), issue("someone else", None)
    # etcd checks a peer's client certificate by resolving its names: each member by name.
    dns = [f"*.{name}.{ns}.svc.cluster.local", "localhost"]
    dns += [f"{name}-{i}.{name}.{ns}.svc{d}" for i in range(10) for d in ("", ".cluster.local")]
    loopback = x509.IPAddress(ipaddress.ip_address("127.0.0.1"))  # etcdctl in a member
    both = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    member = issue(
        "member",
        members_ca,
        x509.SubjectAlternativeName([*(x509.DNSName(d) for d in dns), loopback]),
        x509.ExtendedKeyUsage(both),
    )
    client_only = x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH])

    def secret(purpose: str, pair: tuple[Any, Any], ca: tuple[Any, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {"name": f"{name}-{purpose}", "labels": {LABEL_TLS_FOR: name}},
            "stringData": {"tls.crt": pem(pair[1]), "tls.key": pem(pair[0]), "ca.crt": pem(ca[1])},
        }

    untrusted = secret("client", issue("operator", strangers_ca, client_only), strangers_ca)
    trusted = secret("client", issue("operator", members_ca, client_only), members_ca)
    return [secret("peer", member, members_ca), secret("server", member, members_ca), untrusted], (
        trusted
    )


def test_a_bootstrap_the_operator_never_reached_is_never_started_again(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    """The members form their cluster but never answer the operator (its client certificate is
    of a CA they do not trust), so no cluster ID is recorded. A member's Pod and claim deleted
    then: it was made again as `new` (taken for an interrupted bootstrap), an empty member
    under its old identity. Now the EtcdCluster records that its bootstrap started before the
    first Pod, nothing is made again (BootstrapNotRecorded), and once etcd answers the member
    is replaced through a learner."""
    k8s, ns, name = k8s_cluster, k8s_namespace, "unseen"
    secrets, trusted_client = _user_tls(ns, name)
    for secret in secrets:
        apply(k8s, ns, secret)
    names = {p: f"{name}-{p}" for p in ("peer", "server", "client")}
    apply(k8s, ns, etcd_cluster(name, size=3, tls={"enabled": True, "secrets": names}))

    def claims() -> list[str]:
        items = get(k8s, ns, "pvc", "-l", f"etcd.runbook.io/cluster={name}")["items"]
        return sorted(c["metadata"]["name"] for c in items)

    def formed_unseen() -> dict[str, Any]:
        obj = get(k8s, ns, "etcd", name)
        ready = [
            p
            for p in pods(k8s, ns, name)
            if any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in p.get("status", {}).get("conditions", [])
            )
        ]
        return obj if len(ready) == 3 else {}

    obj = k8s.wait_for(formed_unseen, timeout=AVAILABLE_WITHIN, interval=2, what="3 Ready")
    assert "clusterID" not in obj.get("status", {}), "etcd never answered the operator"
    assert condition(obj, "Available").get("status") == "False"
    record = obj["metadata"].get("annotations", {}).get(BOOTSTRAP_STARTED, "")
    # What the members hold, asked in a member Pod with its own certificate.
    before = {m["name"]: format(m["ID"], "x") for m in member_list(k8s, ns, f"{name}-0")}
    assert etcdctl(k8s, ns, f"{name}-0", "put", "unseen/key", "kept").strip() == "OK"

    victim = f"{name}-2"
    # The claim first (it goes once no Pod uses it), so the Pod is not made again meanwhile.
    k8s.kubectl("-n", ns, "delete", "pvc", f"{victim}-data", "--wait=false")
    k8s.kubectl("-n", ns, "delete", "pod", victim, "--grace-period=0", "--force")
    k8s.wait_for(lambda: f"{victim}-data" not in claims(), timeout=60, what="its claim gone")
    patch(k8s, ns, name, {"metadata": {"annotations": {"etcd.runbook.io/poke": "1"}}})

    def refused_or_remade() -> dict[str, Any]:
        o = get(k8s, ns, "etcd", name)
        remade = f"{victim}-data" in claims()
        refused = condition(o, "Degraded").get("reason") == "BootstrapNotRecorded"
        return {"obj": o, "remade": remade} if refused or remade else {}

    seen = k8s.wait_for(refused_or_remade, timeout=180, interval=1, what="refused or remade")
    assert not seen["remade"], f"{victim} was made again as a member of a new cluster"
    assert victim in condition(seen["obj"], "Degraded")["message"]
    assert record.count("=") == 3, f"the bootstrap recorded before the first Pod: {record!r}"
    time.sleep(10)  # and it stays so
    assert claims() == [f"{name}-0-data", f"{name}-1-data"]

    # A client certificate the members trust: etcd answers, the cluster ID is recorded, and
    # the member without a claim is replaced through a learner.
    apply(k8s, ns, trusted_client)
    patch(k8s, ns, name, {"metadata": {"annotations": {"etcd.runbook.io/poke": "2"}}})
    obj = wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
    assert obj["status"]["clusterID"]
    after = {m["name"]: m["id"] for m in obj["status"]["members"]}
    assert after[f"{name}-0"] == before[f"{name}-0"] and after[f"{name}-1"] == before[f"{name}-1"]
    assert before[victim] not in after.values(), "a new member in its place, never the old one"
    new = next(n for n in after if after[n] not in before.values())
    got = etcdctl(k8s, ns, new, "get", "unseen/key", "--print-value-only", "--consistency=s")
    assert got.strip() == "kept", "the new member has the data, from the others"
