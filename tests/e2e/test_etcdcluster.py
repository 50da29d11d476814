"""The operator end to end on the local Kubernetes: a real API server, real etcd Pods, the
operator deployed from config/default with its image (see conftest.py), the runbooks run by
ansible-runner inside it."""

from __future__ import annotations

import secrets
import subprocess
import time
from typing import Any

import pytest
import yaml

from testbed.cluster import K8sCluster
from testbed.host import REPO
from testbed.object_store import ObjectStore, credentials_secret
from testbed.operator_incluster import DEPLOYMENT, NAMESPACE, InClusterOperator
from tests.e2e.helpers import (
    Operator,
    apply,
    condition,
    etcd_cluster,
    etcdctl,
    events,
    get,
    pods,
    wait_available,
)
from tests.e2e.test_etcdbackup import backup

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

AVAILABLE_WITHIN = 300  # seconds for a new 3-member cluster (seed + 2 learners promoted)
# Seconds from deleting a member Pod to its replacement: well below the 60 s resync, because the
# Pod watch starts a reconcile (or preempts the run in flight) at once.
HEAL_WITHIN = 20
SA = "system:serviceaccount:etcd-operator-system:etcd-runbook-operator"


def scrape(k8s: K8sCluster, ns: str, service: str) -> str:
    """/metrics of one endpoint of the Service's `metrics` port, through the API server."""
    path = f"/api/v1/namespaces/{ns}/services/http:{service}:metrics/proxy/metrics"
    return k8s.kubectl("get", "--raw", path).stdout


def operator_gauges(k8s: K8sCluster, ns: str, name: str) -> str:
    """The operator's /metrics once it carries the cluster's gauges."""
    return k8s.wait_for(
        lambda: (
            text
            if f'etcd_runbook_cluster_members_ready{{name="{name}",namespace="{ns}"}} 3.0'
            in (text := scrape(k8s, NAMESPACE, f"{DEPLOYMENT}-metrics"))
            else ""
        ),
        timeout=60,
        interval=3,
        what="the operator's gauges of the cluster",
    )


def test_cluster_lifecycle(k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator) -> None:
    k8s, ns, name = k8s_cluster, k8s_namespace, "lifecycle"
    started = time.monotonic()
    apply(k8s, ns, etcd_cluster(name))
    seen: list[dict[str, Any]] = []
    obj = wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN, seen)
    print(f"3 members Available after {time.monotonic() - started:.0f}s")
    # The creation runs as one playbook run: the status followed it member by member while it
    # ran (the watcher writes the run's looks in flight), not only at its end.
    on_the_way = sorted(
        {
            int(s["readyMembers"])
            for s in seen
            if "readyMembers" in s and s.get("phase") != "Running"
        }
    )
    assert on_the_way and on_the_way[0] < 3, f"no member-by-member progress seen: {on_the_way}"
    status = obj["status"]
    assert status["currentVersion"] == "3.6.16"
    assert len({m["id"] for m in status["members"]}) == 3
    assert status["leader"] in {m["name"] for m in status["members"]}
    assert condition(obj, "Degraded")["status"] == "False"
    # Ready sums the three up for kstatus, Flux and Argo CD, once nothing is left in progress.
    k8s.wait_for(
        lambda: condition(get(k8s, ns, "etcd", name), "Ready").get("status") == "True",
        timeout=60,
        interval=2,
        what="Ready True",
    )

    # Both kinds of metrics, scraped through their Services as Prometheus would, read as
    # valid expositions by promtool: etcd's of every member (parsed only: its names break
    # promtool's naming lint, and they are etcd's), and the operator's own with this
    # cluster's gauges, lint and all.
    member_metrics = scrape(k8s, ns, f"{name}-metrics")
    assert "etcd_server_has_leader 1" in member_metrics
    expositions = [(member_metrics, ["--lint=none", "--extended"])]
    if isinstance(operator, InClusterOperator):  # a host process has no Service
        expositions.append((operator_gauges(k8s, ns, name), ["--lint=all"]))
    for text, how in expositions:
        checked = subprocess.run(
            [str(REPO / "hack" / "promtool"), "check", "metrics", *how],
            input=text,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr

    # Printer columns.
    table = k8s.kubectl("-n", ns, "get", "etcd").stdout.splitlines()
    assert table[0].split() == [
        "NAME", "SIZE", "READY", "VERSION", "AVAILABLE", "HEALTH", "PHASE", "AGE"
    ]  # fmt: skip
    row = [name, "3", "3", "3.6.16", "True", "AllMembersHealthy", "Running"]
    assert table[1].split()[:7] == row

    # Keys written through the client Service are read back through it from another member.
    svc = f"https://{name}-client.{ns}.svc.cluster.local:2379"
    members = sorted(p["metadata"]["name"] for p in pods(k8s, ns, name))
    assert etcdctl(k8s, ns, members[0], "put", "e2e/key", "value-1", endpoint=svc).strip() == "OK"
    got = etcdctl(k8s, ns, members[1], "get", "e2e/key", "--print-value-only", endpoint=svc)
    assert got.strip() == "value-1"

    # A deleted member Pod is noticed at once (not at the 300s resync) and comes back on its
    # claim with the same member ID and its data.
    victim = members[2]
    before = {m["name"]: m["id"] for m in status["members"]}
    old_uid = next(p for p in pods(k8s, ns, name) if p["metadata"]["name"] == victim)["metadata"][
        "uid"
    ]
    deleted_at = time.monotonic()
    k8s.kubectl("-n", ns, "delete", "pod", victim, "--wait=false")

    def recreated() -> bool:
        return any(
            p["metadata"]["name"] == victim and p["metadata"]["uid"] != old_uid
            for p in pods(k8s, ns, name)
        )

    k8s.wait_for(recreated, timeout=HEAL_WITHIN, interval=0.5, what=f"{victim} re-created")
    noticed = time.monotonic() - deleted_at
    print(f"member Pod re-created {noticed:.1f}s after deletion")
    # The status may still say Available from before the deletion: wait for the new Pod itself.
    k8s.kubectl(
        "-n", ns, "wait", "--for=condition=Ready", f"pod/{victim}", "--timeout=180s", timeout=200
    )
    obj = wait_available(k8s, ns, name, 3, 180)
    after = {m["name"]: m["id"] for m in obj["status"]["members"]}
    assert after == before
    got = etcdctl(k8s, ns, victim, "get", "e2e/key", "--print-value-only", "--consistency=s")
    assert got.strip() == "value-1"

    # A version that skips a minor is refused: Degraded + an Event, nothing touched.
    uids = sorted(p["metadata"]["uid"] for p in pods(k8s, ns, name))
    k8s.kubectl(
        "-n", ns, "patch", "etcd", name, "--type=merge", "-p", '{"spec":{"version":"3.4.31"}}'
    )

    def refused() -> dict[str, Any]:
        o = get(k8s, ns, "etcd", name)
        c = condition(o, "Degraded")
        return o if c.get("status") == "True" and c.get("reason") == "UnsafeVersionChange" else {}

    obj = k8s.wait_for(refused, timeout=120, interval=1, what="Degraded UnsafeVersionChange")
    assert "3.4.31" in condition(obj, "Degraded")["message"]
    k8s.wait_for(
        lambda: events(k8s, ns, "UnsafeVersionChange"), timeout=60, what="UnsafeVersionChange event"
    )
    assert sorted(p["metadata"]["uid"] for p in pods(k8s, ns, name)) == uids
    images = {p["spec"]["containers"][0]["image"] for p in pods(k8s, ns, name)}
    assert images == {"gcr.io/etcd-development/etcd:v3.6.16"}

    # Healing does not wait behind the refusal: a deleted member Pod is back within 20 s, on
    # the version it ran.
    victim = members[1]
    old_uid = next(p for p in pods(k8s, ns, name) if p["metadata"]["name"] == victim)["metadata"][
        "uid"
    ]
    deleted_at = time.monotonic()
    k8s.kubectl("-n", ns, "delete", "pod", victim, "--wait=false")
    k8s.wait_for(
        lambda: any(
            p["metadata"]["name"] == victim and p["metadata"]["uid"] != old_uid
            for p in pods(k8s, ns, name)
        ),
        timeout=HEAL_WITHIN,
        interval=0.5,
        what=f"{victim} re-created while the version change is refused",
    )
    print(f"healed behind a refusal {time.monotonic() - deleted_at:.1f}s after deletion")
    images = {p["spec"]["containers"][0]["image"] for p in pods(k8s, ns, name)}
    assert images == {"gcr.io/etcd-development/etcd:v3.6.16"}
    k8s.kubectl(
        "-n", ns, "patch", "etcd", name, "--type=merge", "-p", '{"spec":{"version":"3.6.16"}}'
    )
    wait_available(k8s, ns, name, 3, 120)

    # Deleting the EtcdCluster removes its Pods and Services and keeps the claims.
    k8s.kubectl("-n", ns, "delete", "etcd", name, "--timeout=180s")
    k8s.wait_for(lambda: not pods(k8s, ns, name), timeout=120, what="member Pods gone")
    services = get(k8s, ns, "services", "-l", f"etcd.runbook.io/cluster={name}")["items"]
    assert services == []
    claims = get(k8s, ns, "pvc", "-l", f"etcd.runbook.io/cluster={name}")["items"]
    assert len(claims) == 3


@pytest.mark.parametrize(
    ("spec", "field"),
    [({"size": 0}, "spec.size"), ({"version": "latest"}, "spec.version")],
)
def test_invalid_spec_rejected_by_the_api_server(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator_api: None, spec: dict, field: str
) -> None:
    obj = etcd_cluster("bad")
    obj["spec"].update(spec)
    out = apply(k8s_cluster, k8s_namespace, obj, check=False)
    assert out.returncode != 0
    assert field in out.stderr, out.stderr


def test_operator_rbac_is_least_privilege(k8s_cluster: K8sCluster, operator_api: None) -> None:
    can = k8s_cluster.kubectl("auth", "can-i", f"--as={SA}", "delete", "nodes", check=False)
    assert can.stdout.strip() == "no"
    can = k8s_cluster.kubectl("auth", "can-i", f"--as={SA}", "create", "pods", check=False)
    assert can.stdout.strip() == "yes"
    can = k8s_cluster.kubectl("auth", "can-i", f"--as={SA}", "create", "deployments", check=False)
    assert can.stdout.strip() == "no"
    # A real request made as the operator's account is denied by the API server.
    denied = k8s_cluster.kubectl(f"--as={SA}", "delete", "node", "does-not-matter", check=False)
    assert denied.returncode != 0
    assert "forbidden" in denied.stderr.lower(), denied.stderr


def test_minor_upgrade_rolls_one_member_at_a_time_leader_moved_first(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator, object_store: ObjectStore
) -> None:
    k8s, ns, name = k8s_cluster, k8s_namespace, "upgrade"
    apply(k8s, ns, etcd_cluster(name, version="3.5.35"))
    obj = wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
    before = {m["name"]: m["id"] for m in obj["status"]["members"]}
    first = sorted(before)[0]
    assert etcdctl(k8s, ns, first, "put", "upgrade/key", "kept").strip() == "OK"
    uids = sorted(p["metadata"]["uid"] for p in pods(k8s, ns, name))

    k8s.kubectl(
        "-n", ns, "patch", "etcd", name, "--type=merge", "-p", '{"spec":{"version":"3.6.16"}}'
    )

    # No EtcdBackup saves the cluster: the upgrade is refused, naming the field, nothing rolls.
    def refused() -> dict[str, Any]:
        o = get(k8s, ns, "etcd", name)
        c = condition(o, "Degraded")
        return o if c.get("reason") == "UpgradeNeedsSnapshot" else {}

    obj = k8s.wait_for(refused, timeout=120, interval=2, what="Degraded UpgradeNeedsSnapshot")
    assert "spec.version" in condition(obj, "Degraded")["message"]
    assert sorted(p["metadata"]["uid"] for p in pods(k8s, ns, name)) == uids

    # A member Pod lost while the upgrade may not start comes back on the version it ran: on
    # 3.6 it would start the upgrade without its snapshot, with no way back.
    victim = sorted(before)[1]
    old_uid = next(p for p in pods(k8s, ns, name) if p["metadata"]["name"] == victim)["metadata"][
        "uid"
    ]
    k8s.kubectl("-n", ns, "delete", "pod", victim, "--wait=false")
    healed = k8s.wait_for(
        lambda: [
            p
            for p in pods(k8s, ns, name)
            if p["metadata"]["name"] == victim and p["metadata"]["uid"] != old_uid
        ],
        timeout=HEAL_WITHIN,
        interval=0.5,
        what=f"{victim} re-created while the upgrade waits",
    )[0]
    assert healed["spec"]["containers"][0]["image"] == "gcr.io/etcd-development/etcd:v3.5.35"
    k8s.kubectl(
        "-n", ns, "wait", "--for=condition=Ready", f"pod/{victim}", "--timeout=120s", timeout=140
    )
    claim = get(k8s, ns, "pvc", f"{victim}-data")
    assert claim["metadata"]["annotations"]["etcd.runbook.io/version"] == "3.5.35"

    # An EtcdBackup for the cluster: the upgrade takes its own snapshot to that destination
    # first, and rolls only once it is verified.
    bucket = f"e2e-{secrets.token_hex(4)}"
    with object_store.port_forward() as url:
        object_store.client(url).make_bucket(bucket)
    credentials_secret(k8s, ns, "s3", object_store.access_key, object_store.secret_key)
    apply(k8s, ns, backup("nightly", name, object_store.endpoint, bucket, "s3"))

    def rolled() -> dict[str, Any]:
        o = get(k8s, ns, "etcd", name)
        st = o.get("status", {})
        done = (
            st.get("currentVersion") == "3.6.16"
            and st.get("readyMembers") == 3
            and condition(o, "Available").get("status") == "True"
            and condition(o, "Progressing").get("status") == "False"
        )
        return o if done else {}

    obj = k8s.wait_for(rolled, timeout=600, interval=3, what="rolled to 3.6.16")
    images = {p["spec"]["containers"][0]["image"] for p in pods(k8s, ns, name)}
    assert images == {"gcr.io/etcd-development/etcd:v3.6.16"}
    assert {m["name"]: m["id"] for m in obj["status"]["members"]} == before, "same identities"
    assert {m["version"] for m in obj["status"]["members"]} == {"3.6.16"}
    got = etcdctl(k8s, ns, first, "get", "upgrade/key", "--print-value-only")
    assert got.strip() == "kept"

    rolled_members = events(k8s, ns, "MemberRolled")
    assert len(rolled_members) == 3, [e["message"] for e in rolled_members]
    # The roll named the leader of its start last, and handed leadership away before restarting it.
    started = events(k8s, ns, "RollStarted")
    assert len(started) == 1, [e["message"] for e in started]
    roll = started[0]["message"].removeprefix("Rolling ").split(" one at a time")[0].split(", ")
    assert sorted(roll) == sorted(before), roll
    moved = events(k8s, ns, "LeaderMoved")
    assert [e["message"].split()[3] for e in moved] == [roll[-1]], [e["message"] for e in moved]

    # The snapshot came first, verified, apart from the schedule's (its own prefix), and status
    # and the roll's Event say where it is.
    taken = obj["status"]["upgradeSnapshot"]
    assert taken["version"] == "3.6" and taken["backup"] == "upgrade-before-3-6"
    assert taken["location"].startswith(f"s3://{bucket}/e2e/before-upgrade/{ns}/{name}/")
    pre = get(k8s, ns, "etcdbackup", "upgrade-before-3-6")
    assert pre["status"]["lastSnapshot"]["sha256"] == taken["sha256"]
    # The newest verified snapshot of the cluster's backups, in status and in -o wide.
    snapshots = {
        b["metadata"]["name"]: b["status"]["lastSnapshot"]
        for b in get(k8s, ns, "etcdbackup")["items"]
        if b.get("status", {}).get("lastSnapshot", {}).get("sha256")
    }
    newest = max(snapshots, key=lambda n: snapshots[n]["time"])

    def last_backup_shown() -> dict[str, Any]:
        o = get(k8s, ns, "etcd", name)
        return o if o["status"].get("lastBackup", {}).get("backup") == newest else {}

    obj = k8s.wait_for(last_backup_shown, timeout=120, interval=3, what="status.lastBackup")
    assert obj["status"]["lastBackup"]["location"] == snapshots[newest]["location"]
    wide = k8s.kubectl("-n", ns, "get", "etcd", name, "-o", "wide").stdout.splitlines()
    assert wide[0].split()[9] == "LAST-BACKUP" and wide[1].split()[9] != "<none>", wide
    assert events(k8s, ns, "SnapshotBeforeUpgrade")
    assert taken["location"] in started[0]["message"]
    first_roll = min(
        e.get("eventTime") or e.get("firstTimestamp") or e["metadata"]["creationTimestamp"]
        for e in rolled_members
    )
    # To the second: ISO times of different precision do not compare as strings.
    assert taken["time"][:19] <= first_roll[:19], (taken["time"], first_roll)


def test_namespaced_mode_denies_secrets_outside_the_watched_namespaces(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator_api: None
) -> None:
    """config/namespaced, installed under an operator namespace of its own (so the cluster-wide
    install's binding does not answer for it), watching the test's namespace."""
    k8s, watched = k8s_cluster, k8s_namespace
    home = f"{watched}-op"
    rendered = k8s.kubectl("kustomize", str(REPO / "config" / "namespaced")).stdout
    rendered = rendered.replace("etcd-operator-system", home).replace("etcd-clusters", watched)
    docs = [
        d
        for d in yaml.safe_load_all(rendered)
        if d and d["kind"] in ("Namespace", "ServiceAccount", "Role", "RoleBinding")
    ]
    k8s.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    account = f"system:serviceaccount:{home}:etcd-runbook-operator"
    try:

        def can(*args: str) -> str:
            return k8s.kubectl("auth", "can-i", f"--as={account}", *args, check=False).stdout

        assert can("get", "secrets", "-n", watched).strip() == "yes"
        assert can("create", "pods", "-n", watched).strip() == "yes"
        assert can("list", "etcdclusters.etcd.runbook.io", "-n", watched).strip() == "yes"
        for other in ("default", "kube-system", "etcd-operator-system"):
            assert can("get", "secrets", "-n", other).strip() == "no", other
            assert can("list", "pods", "-n", other).strip() == "no", other
        assert can("list", "secrets", "--all-namespaces").strip() == "no"
        denied = k8s.kubectl(f"--as={account}", "-n", "kube-system", "get", "secrets", check=False)
        assert denied.returncode != 0 and "forbidden" in denied.stderr.lower(), denied.stderr
    finally:
        k8s.kubectl("delete", "namespace", home, "--wait=false", check=False)
