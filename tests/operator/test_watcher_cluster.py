"""operator.py against the real local Kubernetes, with the Widget test CRD (marker: cluster)."""

from __future__ import annotations

import datetime
import json
import re
import signal
import threading
import time
from typing import Any

import pytest

from etcd_runbook_operator.informer import Informer
from etcd_runbook_operator.kube import Kube, Resource
from testbed.cluster import K8sCluster
from tests.operator.conftest import http_get

pytestmark = pytest.mark.cluster

WIDGETS = Resource("test.runbook.io", "v1", "widgets", "Widget")


def widget_manifest(name: str, **spec: Any) -> str:
    return json.dumps(
        {
            "apiVersion": "test.runbook.io/v1",
            "kind": "Widget",
            "metadata": {"name": name},
            "spec": spec,
        }
    )


def get(cluster: K8sCluster, ns: str, *what: str) -> dict[str, Any]:
    out = cluster.kubectl("-n", ns, "get", *what, "-o", "json", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else {}


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == type_), {})


def events(cluster: K8sCluster, ns: str, name: str) -> list[dict[str, Any]]:
    items = get(cluster, ns, "events", "--field-selector", f"involvedObject.name={name}")
    return items.get("items", [])


def run_counts(op: Any) -> tuple[int, int]:
    """(runs started, runs finished) from the operator's log."""
    log = op.log()
    return log.count(": running "), len(re.findall(r": \w+ in [\d.]+s \(artifacts", log))


def settle(op: Any, quiet: float = 12.0, timeout: float = 180.0) -> int:
    """Wait until no run is in flight and none started for `quiet` seconds; return the runs."""
    deadline = time.monotonic() + timeout
    last, since = run_counts(op), time.monotonic()
    while time.monotonic() - since < quiet or last[0] != last[1]:
        assert time.monotonic() < deadline, "the watcher never settled"
        time.sleep(1)
        now = run_counts(op)
        if now != last:
            last, since = now, time.monotonic()
    return last[0]


def test_create_status_event_dependent_spec_change_and_finalizer(
    k8s_cluster, k8s_namespace, start_operator
):
    ns = k8s_namespace
    op = start_operator()
    k8s_cluster.wait_for(op.is_leader, timeout=60, what="the only candidate leads")
    k8s_cluster.kubectl("-n", ns, "apply", "-f", "-", input=widget_manifest("w1", colorName="blue"))

    w = k8s_cluster.wait_for(
        lambda: (
            (o := get(k8s_cluster, ns, "widget", "w1")).get("status", {}).get("observedGeneration")
            == 1
            and o
        ),
        timeout=90,
        what="status of generation 1",
    )
    assert w["status"]["phase"] == "Ready" and w["status"]["color"] == "blue"
    assert condition(w, "Available")["status"] == "True"
    assert condition(w, "Degraded")["status"] == "False"
    assert w["metadata"]["finalizers"] == ["test.runbook.io/finalizer"]
    pvc = get(k8s_cluster, ns, "pvc", "w1-data")
    assert pvc["metadata"]["ownerReferences"][0]["uid"] == w["metadata"]["uid"]
    k8s_cluster.wait_for(
        lambda: any(e["reason"] == "ClaimChanged" for e in events(k8s_cluster, ns, "w1")),
        timeout=30,
        what="an Event from operator_events",
    )
    assert http_get(op.probe_port, "/readyz")[0] == 200
    assert http_get(op.probe_port, "/healthz")[0] == 200
    assert op.metric("etcd_runbook_operator_reconcile_total", kind="Widget", result="success") >= 1

    # The runs the creation causes (the claim appearing, controllers touching it) settle, and
    # then an event that changes no input (our own status writes, an unrelated annotation)
    # does not start ansible-runner: the skip rule on a real cluster.
    runs = settle(op)
    assert runs <= 4, f"{runs} runs for one creation"
    skips = op.metric("etcd_runbook_operator_reconcile_skipped_total", kind="Widget")
    k8s_cluster.kubectl("-n", ns, "annotate", "widget", "w1", "unrelated.example.com/x=1")
    k8s_cluster.wait_for(
        lambda: op.metric("etcd_runbook_operator_reconcile_skipped_total", kind="Widget") > skips,
        timeout=30,
        what="a skipped reconcile",
    )
    assert run_counts(op)[0] == runs, "the no-op event started no run"

    # A dependent deleted: reconciled (and recreated) within seconds.
    old_uid = pvc["metadata"]["uid"]
    t0 = time.monotonic()
    started_before = op.log().count(": running ")
    k8s_cluster.kubectl("-n", ns, "delete", "pvc", "w1-data", "--wait=false")
    k8s_cluster.wait_for(
        lambda: op.log().count(": running ") > started_before,
        timeout=30,
        interval=0.1,
        what="a reconcile started by the dependent's deletion",
    )
    reacted = time.monotonic() - t0
    k8s_cluster.wait_for(
        lambda: (
            get(k8s_cluster, ns, "pvc", "w1-data").get("metadata", {}).get("uid")
            not in (None, old_uid)
        ),
        timeout=30,
        interval=0.2,
        what="the claim recreated",
    )
    recreate = time.monotonic() - t0
    print(
        f"dependent deleted -> reconcile started after {reacted:.1f}s, recreated after "
        f"{recreate:.1f}s"
    )
    assert reacted < 5, "a dependent's event starts a reconcile within seconds"
    assert recreate < 30

    # A spec change: a new generation is observed, with the new color.
    k8s_cluster.kubectl(
        "-n", ns, "patch", "widget", "w1", "--type=merge", "-p", '{"spec":{"colorName":"red"}}'
    )
    w = k8s_cluster.wait_for(
        lambda: (
            (o := get(k8s_cluster, ns, "widget", "w1")).get("status", {}).get("observedGeneration")
            == 2
            and o
        ),
        timeout=90,
        what="generation 2 observed",
    )
    assert w["status"]["color"] == "red"

    # A refusal: Degraded with the runbook's reason, a Warning event; a failed run that does not
    # say whether the widget is available leaves Available Unknown, never its old value.
    k8s_cluster.kubectl(
        "-n",
        ns,
        "patch",
        "widget",
        "w1",
        "--type=merge",
        "-p",
        '{"spec":{"failWith":"widgets never shrink"}}',
    )
    w = k8s_cluster.wait_for(
        lambda: (
            condition(o := get(k8s_cluster, ns, "widget", "w1"), "Degraded").get("status") == "True"
            and o
        ),
        timeout=90,
        what="Degraded after a refusal",
    )
    assert condition(w, "Degraded")["reason"] == "WidgetRefused"
    assert condition(w, "Degraded")["message"] == "widgets never shrink"
    assert condition(w, "Available")["status"] == "Unknown"
    assert condition(w, "Available")["reason"] == "RunbookFailed"
    k8s_cluster.wait_for(
        lambda: any(
            e["reason"] == "WidgetRefused" and e["type"] == "Warning"
            for e in events(k8s_cluster, ns, "w1")
        ),
        timeout=30,
    )
    k8s_cluster.kubectl(
        "-n",
        ns,
        "patch",
        "widget",
        "w1",
        "--type=json",
        "-p",
        '[{"op":"remove","path":"/spec/failWith"}]',
    )
    k8s_cluster.wait_for(
        lambda: (
            condition(get(k8s_cluster, ns, "widget", "w1"), "Degraded").get("status") == "False"
        ),
        timeout=90,
        what="Degraded cleared",
    )

    refused = [e for e in events(k8s_cluster, ns, "w1") if e["reason"] == "WidgetRefused"]
    assert len(refused) == 1, "repeated identical failures aggregate into one Event"
    print(f"refusal Event count after the retries: {refused[0]['count']}")

    # Delete: the finalizer playbook runs, then the finalizer goes and the object with it.
    k8s_cluster.kubectl("-n", ns, "delete", "widget", "w1", "--wait=false")
    k8s_cluster.wait_for(
        lambda: not get(k8s_cluster, ns, "widget", "w1"), timeout=90, what="the Widget gone"
    )
    assert get(k8s_cluster, ns, "configmap", "w1-finalized"), "finalizer playbook ran first"


def test_expired_resource_version_gives_410_and_a_relist(k8s_cluster, k8s_namespace, widget_crd):
    ns = k8s_namespace
    k8s_cluster.kubectl("-n", ns, "apply", "-f", "-", input=widget_manifest("old"))
    kube = Kube(k8s_cluster.api_client())
    # resourceVersion "1" predates the API server's watch cache window: it must answer 410.
    listed = kube.get(WIDGETS.path(ns))
    restarts: list[str] = []
    seen: list[str] = []
    inf = Informer(
        kube,
        WIDGETS,
        lambda t, o: seen.append(o["metadata"]["name"]),
        namespace=ns,
        on_restart=restarts.append,
        initial_resource_version="1",
        backoff_base=0.1,
    )
    stop = threading.Event()
    inf.start(stop)
    try:
        k8s_cluster.wait_for(inf.synced.is_set, timeout=30, what="relist after 410")
    finally:
        stop.set()
    assert restarts[0] == "gone", f"the API server answered {restarts}"
    assert "old" in seen and inf.lists == 1
    assert int(inf.resource_version or 0) >= int(listed["metadata"]["resourceVersion"])


def test_leader_election_only_the_leader_reconciles_and_failover(
    k8s_cluster, k8s_namespace, start_operator
):
    ns = k8s_namespace
    a = start_operator("a")
    k8s_cluster.wait_for(a.is_leader, timeout=60, what="a leads")
    b = start_operator("b")
    k8s_cluster.wait_for(
        lambda: http_get(b.probe_port, "/readyz")[0] == 200, timeout=60, what="standby ready"
    )
    k8s_cluster.kubectl("-n", ns, "apply", "-f", "-", input=widget_manifest("w2", colorName="x"))
    k8s_cluster.wait_for(
        lambda: (
            get(k8s_cluster, ns, "widget", "w2").get("status", {}).get("observedGeneration") == 1
        ),
        timeout=90,
        what="w2 reconciled",
    )
    assert a.runs() >= 1 and b.runs() == 0 and not b.is_leader(), "only the leader reconciles"

    t0 = time.monotonic()
    a.signal(signal.SIGKILL)  # no release: b must wait out the lease
    k8s_cluster.wait_for(b.is_leader, timeout=40, interval=0.2, what="b takes over")
    takeover = time.monotonic() - t0
    print(f"leader killed -> standby leads after {takeover:.1f}s")
    assert takeover < 25
    k8s_cluster.kubectl("-n", ns, "apply", "-f", "-", input=widget_manifest("w3", colorName="y"))
    k8s_cluster.wait_for(
        lambda: (
            get(k8s_cluster, ns, "widget", "w3").get("status", {}).get("observedGeneration") == 1
        ),
        timeout=90,
        what="w3 reconciled by the new leader",
    )
    assert b.runs() >= 1

    # A clean stop releases the lease: a new candidate leads within a few retry periods.
    c = start_operator("c")
    time.sleep(3)
    assert not c.is_leader()
    assert b.stop() == 0  # may first let a run in flight finish
    t0 = time.monotonic()
    k8s_cluster.wait_for(c.is_leader, timeout=20, interval=0.2, what="c leads after release")
    released = time.monotonic() - t0
    print(f"leader exited cleanly -> standby leads after {released:.1f}s")
    assert released < 8, "a released Lease is taken at the next retry, not after 15 s"
    assert "released lease" in b.log()


def test_losing_the_lease_stops_the_operator_with_an_error(
    k8s_cluster, k8s_namespace, start_operator
):
    ns = k8s_namespace
    op = start_operator("a")
    k8s_cluster.wait_for(op.is_leader, timeout=60, what="a leads")
    lease = next(a for a in op.proc.args if str(a).startswith("widget-"))
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
    # Someone else holds the Lease now (as after a network partition): renewals fail.
    k8s_cluster.kubectl(
        "-n",
        ns,
        "patch",
        "lease",
        str(lease),
        "--type=merge",
        "-p",
        json.dumps({"spec": {"holderIdentity": "thief", "renewTime": now}}),
    )
    t0 = time.monotonic()
    rc = op.proc.wait(timeout=40)
    lost_after = time.monotonic() - t0
    print(f"lease taken away -> operator exited {rc} after {lost_after:.1f}s")
    assert rc == 1, "exit non-zero so the Pod restarts as a candidate"
    assert lost_after <= 15, "gave up within the renew deadline (10 s) plus a retry"
    assert "leadership lost" in op.log()


def _rfc3339_seconds(stamp: str) -> float:
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_losing_the_lease_ends_runs_in_flight_before_another_may_lead(
    k8s_cluster, k8s_namespace, start_operator, tmp_path
):
    """A run is in the middle of a task (a shell in ansible's worker, which has a session of
    its own) when the Lease is taken away: it is over, and the watcher writes nothing more,
    before another candidate may first take the Lease (lease duration after the last renewal).
    Before, the task ran on to its end and the watcher waited for it, leading in all but name."""
    ns = k8s_namespace
    op = start_operator("a")
    k8s_cluster.wait_for(op.is_leader, timeout=60, what="a leads")
    beats = tmp_path / "beats"
    k8s_cluster.kubectl(
        "-n", ns, "apply", "-f", "-", input=widget_manifest("held", holdFile=str(beats))
    )
    k8s_cluster.wait_for(
        lambda: beats.exists() and len(beats.read_text().split()) >= 3,
        timeout=90,
        what="the run's task beating",
    )
    lease_name = str(next(a for a in op.proc.args if str(a).startswith("widget-")))
    # Someone else holds the Lease now (as after a network partition): renewals fail. Taken
    # on the version read, so the renewal read is the watcher's last.
    for _ in range(10):
        lease = get(k8s_cluster, ns, "lease", lease_name)
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        taken = {
            "metadata": {"resourceVersion": lease["metadata"]["resourceVersion"]},
            "spec": {"holderIdentity": "thief", "renewTime": now},
        }
        patched = k8s_cluster.kubectl(
            "-n", ns, "patch", "lease", lease_name, "--type=merge", "-p", json.dumps(taken),
            check=False,
        )  # fmt: skip
        if patched.returncode == 0:
            break
    assert patched.returncode == 0, patched.stderr
    last_renewal = _rfc3339_seconds(lease["spec"]["renewTime"])
    duration = float(lease["spec"]["leaseDurationSeconds"])
    rc = op.proc.wait(timeout=40)
    time.sleep(1)  # a beat a live task would write meanwhile
    last_beat = float(beats.read_text().split()[-1])
    print(
        f"last beat {last_beat - last_renewal:.1f}s after the last renewal; another may lead "
        f"{duration:.0f}s after it"
    )
    assert rc == 1
    assert last_beat < last_renewal + duration, "the task ran on past the Lease"
    assert "runs still in flight killed" in op.log()
    held = get(k8s_cluster, ns, "widget", "held")
    assert "observedGeneration" not in held.get("status", {}), "no status written after"
