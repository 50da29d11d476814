"""Reconcile logic against an in-memory API server and a recording runner."""

import copy
import time
from pathlib import Path

import pytest

from etcd_runbook_operator.config import Dependent, Finalizer, Target, Watch
from etcd_runbook_operator.controller import Controller
from etcd_runbook_operator.events import EventRecorder
from etcd_runbook_operator.intake import owner_key
from etcd_runbook_operator.kube import Resource
from etcd_runbook_operator.metrics import Metrics
from etcd_runbook_operator.runner import RunResult
from tests.unit.watcher_fakes import FakeKube, FakeRunner, result

WIDGETS = Resource("test.runbook.io", "v1", "widgets", "Widget")
PB = Target(playbook=Path("/pb.yml"))
OWNER_LABEL = "etcd.runbook.io/cluster"
DEPENDENTS = (
    Dependent("", "v1", "Pod", "pods", preempt_on_loss=True),
    Dependent("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
)
FIN = Finalizer(
    name="test.runbook.io/finalizer",
    target=Target(playbook=Path("/pb.yml"), vars={"state": "absent"}),
)
KEY = ("ns", "w1")
PATH = WIDGETS.path("ns", "w1")


def make(tmp_path, results=None, finalizer=FIN, **watch_kw):
    kube = FakeKube()
    kube.put_object(
        PATH,
        {
            "apiVersion": "test.runbook.io/v1",
            "kind": "Widget",
            "metadata": {"name": "w1", "namespace": "ns", "uid": "u1", "generation": 1},
            "spec": {"colorName": "blue", "password": "s3cret"},
        },
    )
    watch_kw = {"dependents": DEPENDENTS, "owner_label": OWNER_LABEL, **watch_kw}
    watch = Watch(
        group="test.runbook.io",
        version="v1",
        kind="Widget",
        target=PB,
        finalizer=finalizer,
        **watch_kw,
    )
    runner = FakeRunner(tmp_path, results)
    metrics = Metrics()
    ctl = Controller(
        kube,
        watch,
        WIDGETS,
        runner,
        EventRecorder(kube),
        metrics,  # type: ignore[arg-type]
        [None],
        runner_timeout=60,
        workers=1,
    )
    return kube, runner, ctl, metrics


def sample(metrics, name, **labels):
    return metrics.registry.get_sample_value(name, labels) or 0.0


def status(kube):
    return kube.objects[PATH].get("status", {})


def cond(kube, type_):
    return next(c for c in status(kube)["conditions"] if c["type"] == type_)


def test_first_sight_adds_finalizer_before_running(tmp_path):
    kube, runner, ctl, _ = make(tmp_path)
    ctl.reconcile(KEY)
    methods = [m for m, p in kube.calls if m in ("PUT", "POST")]
    assert methods[0] == "PUT" and kube.calls.index(("PUT", PATH)) < len(kube.calls)
    assert kube.objects[PATH]["metadata"]["finalizers"] == ["test.runbook.io/finalizer"]
    assert len(runner.runs) == 1
    ev = runner.runs[0]["extravars"]
    assert ev["color_name"] == {"__ansible_unsafe": "blue"}
    assert ev["ansible_operator_meta"] == {
        "name": {"__ansible_unsafe": "w1"},
        "namespace": {"__ansible_unsafe": "ns"},
    }
    assert "state" not in ev


def test_success_writes_status_and_skips_an_unchanged_resync(tmp_path):
    stats = {
        "operator_status": {"phase": "Ready"},
        "operator_events": [{"type": "Normal", "reason": "Created", "message": "cm made"}],
    }
    kube, runner, ctl, metrics = make(tmp_path, [result(stats=stats)])
    ctl.reconcile(KEY)
    assert status(kube)["phase"] == "Ready" and status(kube)["observedGeneration"] == 1
    assert cond(kube, "Available")["status"] == "True"
    events = [o for p, o in kube.objects.items() if "/events/" in p]
    assert [(e["reason"], e["count"]) for e in events] == [("Created", 1)]
    rv_after = kube.objects[PATH]["metadata"]["resourceVersion"]
    ctl.reconcile(KEY)  # status write bumped the resourceVersion: not an input, so skipped
    assert len(runner.runs) == 1
    assert sample(metrics, "etcd_runbook_operator_reconcile_skipped_total", kind="Widget") == 1
    assert kube.objects[PATH]["metadata"]["resourceVersion"] == rv_after, "a skip writes nothing"


def test_changes_that_matter_defeat_the_skip(tmp_path):
    kube, runner, ctl, _ = make(tmp_path)
    ctl.reconcile(KEY)
    obj = kube.objects[PATH]
    obj["metadata"]["annotations"] = {"unrelated.io/x": "1"}
    ctl.reconcile(KEY)
    assert len(runner.runs) == 1
    obj["metadata"]["annotations"] = {"test.runbook.io/pause": "true"}
    ctl.reconcile(KEY)
    assert len(runner.runs) == 2
    obj["spec"]["colorName"] = "red"
    obj["metadata"]["generation"] = 2
    ctl.reconcile(KEY)
    assert len(runner.runs) == 3


def test_max_age_forces_a_full_run(tmp_path):
    _kube, runner, ctl, _ = make(tmp_path, full_run_interval=0.0)
    ctl.reconcile(KEY)
    ctl.reconcile(KEY)
    assert len(runner.runs) == 2


def test_failure_sets_degraded_event_and_requeues_without_recording(tmp_path):
    kube, runner, ctl, _ = make(
        tmp_path,
        [
            result(False, task="create cm", msg="forbidden"),
            result(False, task="create cm", msg="forbidden"),
        ],
    )
    ctl.reconcile(KEY)
    d = cond(kube, "Degraded")
    assert (d["status"], d["reason"]) == ("True", "RunbookFailed")
    assert "create cm" in d["message"] and "forbidden" in d["message"]
    assert ctl.queue.failures(KEY) == 1
    ctl.reconcile(KEY)  # the status write's own event: backing off, skipped
    assert len(runner.runs) == 1
    ctl.skips.clock = lambda: 1e12  # the retry time has come
    ctl.reconcile(KEY)
    assert len(runner.runs) == 2
    warnings = [o for p, o in kube.objects.items() if "/events/" in p]
    assert len(warnings) == 1 and warnings[0]["count"] == 2, "identical events aggregate"
    assert warnings[0]["type"] == "Warning"


def test_no_progressing_flap_on_resync_but_on_new_generation(tmp_path):
    kube, _runner, ctl, _ = make(tmp_path, full_run_interval=0.0)
    ctl.reconcile(KEY)
    puts_before = [c for c in kube.calls if c == ("PUT", PATH + "/status")]
    ctl.reconcile(KEY)  # full run again, same outcome: no status write at all
    assert [c for c in kube.calls if c == ("PUT", PATH + "/status")] == puts_before
    kube.objects[PATH]["metadata"]["generation"] = 2
    seen = []
    real_replace = kube.replace

    def spy(path, body):
        if path.endswith("/status"):
            seen.append({c["type"]: c["status"] for c in body["status"]["conditions"]})
        return real_replace(path, body)

    kube.replace = spy  # type: ignore[method-assign]
    ctl.reconcile(KEY)
    assert seen[0]["Progressing"] == "True" and seen[0]["Available"] == "True"
    assert seen[-1]["Progressing"] == "False"


def test_status_write_retries_on_conflict(tmp_path):
    kube, _runner, ctl, _ = make(tmp_path, finalizer=None)
    kube.conflicts_to_inject = 2
    ctl.reconcile(KEY)
    assert status(kube)["observedGeneration"] == 1


def test_deletion_runs_finalizer_then_removes_it(tmp_path):
    kube, runner, ctl, _ = make(
        tmp_path, [result(), result(False, msg="etcd unreachable"), result()]
    )
    ctl.reconcile(KEY)
    kube.objects[PATH]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    ctl.reconcile(KEY)
    assert runner.runs[1]["extravars"]["state"] == "absent"
    assert kube.objects[PATH]["metadata"]["finalizers"] == ["test.runbook.io/finalizer"], (
        "a failed finalizer run keeps the finalizer"
    )
    ctl.skips.clock = lambda: 1e12  # past the retry time
    ctl.reconcile(KEY)
    assert PATH not in kube.objects, "finalizer removed after success, object gone"
    ctl.reconcile(KEY)  # 404: nothing to do
    assert len(runner.runs) == 3


@pytest.mark.parametrize(
    "meta, expected",
    [
        (
            {
                "ownerReferences": [
                    {
                        "apiVersion": "test.runbook.io/v1",
                        "kind": "Widget",
                        "name": "w1",
                        "controller": True,
                    }
                ],
                "labels": {"etcd.runbook.io/cluster": "zz"},
            },
            ("ns", "w1"),
        ),
        (
            {
                "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "controller": True}
                ],
                "labels": {"etcd.runbook.io/cluster": "w2"},
            },
            ("ns", "w2"),
        ),
        ({"labels": {}}, None),
    ],
)
def test_owner_key(meta, expected):
    watch = Watch(
        group="test.runbook.io", version="v1", kind="Widget", target=PB, owner_label=OWNER_LABEL
    )
    assert owner_key({"metadata": {"namespace": "ns", "name": "p", **meta}}, watch) == expected
    # Without an owner label only the controller reference counts.
    bare = Watch(group="test.runbook.io", version="v1", kind="Widget", target=PB)
    found = owner_key({"metadata": {"namespace": "ns", "name": "p", **meta}}, bare)
    assert found == (expected if expected == ("ns", "w1") else None)


def test_dependent_change_enqueues_owner_and_changes_fingerprint(tmp_path):
    _kube, runner, ctl, _ = make(tmp_path)
    pod = {
        "metadata": {
            "namespace": "ns",
            "name": "w1-0",
            "uid": "p1",
            "resourceVersion": "5",
            "labels": {"etcd.runbook.io/cluster": "w1"},
        }
    }
    ctl.intake.dependents[0]._cache[("ns", "w1-0")] = pod
    ctl.reconcile(KEY)
    ctl.intake.on_dependent("MODIFIED", pod)
    assert ctl.queue.get(0) == KEY
    ctl.queue.done(KEY)
    pod["metadata"]["resourceVersion"] = "6"  # e.g. the Pod went NotReady
    ctl.reconcile(KEY)
    assert len(runner.runs) == 2


def member_pod(uid: str, **meta) -> dict:
    return {
        "metadata": {
            "namespace": "ns",
            "name": "w1-0",
            "uid": uid,
            "labels": {"etcd.runbook.io/cluster": "w1"},
            **meta,
        }
    }


def test_outside_pod_deletion_preempts_the_run_in_flight_once(tmp_path):
    stopped = RunResult(status="stopped", rc=75, duration=1.0, artifact_dir=Path("/x"))
    kube, runner, ctl, metrics = make(tmp_path, [stopped, result()])
    runner.during_run = lambda: (
        ctl.intake.on_losable(
            "MODIFIED", member_pod("p1", deletionTimestamp="2026-01-01T00:00:00Z")
        ),
        ctl.intake.on_losable("DELETED", member_pod("p1")),  # same Pod: no second request
    )
    ctl.queue.add(KEY)
    assert ctl.queue.get(0) == KEY
    ctl.reconcile(KEY)
    assert runner.stop_requests == ["ns/w1"]
    degraded = [c for c in status(kube).get("conditions", []) if c["type"] == "Degraded"]
    assert all(c["status"] == "False" for c in degraded), degraded
    assert not [o for p, o in kube.objects.items() if "/events/" in p], "no failure Event"
    assert ctl.queue.failures(KEY) == 0, "a preempted run is not a failure to back off from"
    labels = {"kind": "Widget", "result": "preempted"}
    assert sample(metrics, "etcd_runbook_operator_reconcile_total", **labels) == 1
    ctl.queue.done(KEY)
    assert ctl.queue.get(0) == KEY, "reconciled again at once"
    runner.during_run = None
    ctl.reconcile(KEY)
    assert len(runner.runs) == 2 and cond(kube, "Available")["status"] == "True"


def test_a_new_generation_preempts_the_run_in_flight(tmp_path):
    stopped = RunResult(status="stopped", rc=75, duration=1.0, artifact_dir=Path("/x"))
    kube, runner, ctl, _ = make(tmp_path, [stopped, result()])

    def spec_changed() -> None:
        obj = kube.objects[PATH]
        ctl.intake.on_primary("MODIFIED", obj)  # the same generation (a status write): no
        assert runner.stop_requests == []
        obj["spec"]["size"] = 1
        obj["metadata"]["generation"] = 2
        ctl.intake.on_primary("MODIFIED", obj)

    runner.during_run = spec_changed
    ctl.queue.add(KEY)
    assert ctl.queue.get(0) == KEY
    ctl.reconcile(KEY)
    assert runner.stop_requests == ["ns/w1"]
    assert ctl.queue.failures(KEY) == 0
    ctl.queue.done(KEY)
    assert ctl.queue.get(0) == KEY, "reconciled again at once, with the new spec"


def test_runbook_deletions_and_idle_objects_do_not_preempt(tmp_path):
    _kube, runner, ctl, _ = make(tmp_path)
    own = {"test.runbook.io/deleted-by-runbook": "upgrade"}
    runner.during_run = lambda: ctl.intake.on_losable("DELETED", member_pod("p2", annotations=own))
    ctl.reconcile(KEY)
    runner.during_run = None
    ctl.intake.on_losable("DELETED", member_pod("p3"))  # no run in flight: the queue is enough
    assert runner.stop_requests == []
    assert ctl.queue.get(0) == KEY


def ready_pod(name, uid, ready="True", **meta):
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": uid,
            "resourceVersion": "1",
            "labels": {"etcd.runbook.io/cluster": "w1"},
            **meta,
        },
        "status": {"conditions": [{"type": "Ready", "status": ready}]},
    }


def test_a_failing_object_backs_off_exponentially_but_not_from_urgent_changes(tmp_path):
    kube, runner, ctl, _ = make(tmp_path, [result(False, task="t", msg="m")] * 6)
    now = [0.0]
    ctl.skips.clock = lambda: now[0]
    cache = ctl.intake.dependents[0]._cache
    cache[("ns", "w1-0")] = ready_pod("w1-0", "p0")
    ctl.reconcile(KEY)
    assert len(runner.runs) == 1
    # Churn of a failing object (its own status writes, a restart counter, a Pod's resourceVersion)
    # waits for the retry time.
    cache[("ns", "w1-0")]["metadata"]["resourceVersion"] = "2"
    ctl.reconcile(KEY)
    assert len(runner.runs) == 1
    # Urgent: a member Pod turns NotReady, a Pod disappears, the spec changes.
    cache[("ns", "w1-0")]["status"]["conditions"][0]["status"] = "False"
    ctl.reconcile(KEY)
    assert len(runner.runs) == 2
    del cache[("ns", "w1-0")]
    ctl.reconcile(KEY)
    assert len(runner.runs) == 3
    kube.objects[PATH]["spec"]["colorName"] = "green"
    kube.objects[PATH]["metadata"]["generation"] = 2
    ctl.reconcile(KEY)
    assert len(runner.runs) == 4
    # The delays double with each failure.
    assert ctl.queue.failures(KEY) == 4
    now[0] = 7.9  # the fourth failure backs off 1 * 2**3 = 8 s
    ctl.reconcile(KEY)
    assert len(runner.runs) == 4
    now[0] = 8.0
    ctl.reconcile(KEY)
    assert len(runner.runs) == 5


def test_a_failure_the_role_announced_is_not_announced_twice(tmp_path):
    stats = {
        "operator_conditions": {
            "Degraded": {"status": "True", "reason": "Refused", "message": "m"}
        },
        "operator_events": [{"type": "Warning", "reason": "Refused", "message": "m"}],
    }
    kube, _runner, ctl, _ = make(tmp_path, [result(False, stats=stats, task="t", msg="m")])
    ctl.reconcile(KEY)
    warnings = [o for p, o in kube.objects.items() if "/events/" in p]
    assert [(e["reason"], e["count"]) for e in warnings] == [("Refused", 1)]


def test_a_failing_finalizer_backs_off_too(tmp_path):
    kube, runner, ctl, _ = make(tmp_path, [result(False, task="t", msg="paused")] * 3)
    now = [0.0]
    ctl.skips.clock = lambda: now[0]
    kube.objects[PATH]["metadata"]["finalizers"] = [FIN.name]
    kube.objects[PATH]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    ctl.reconcile(KEY)
    ctl.reconcile(KEY)  # its own status write: waits for the retry time
    assert len(runner.runs) == 1
    kube.objects[PATH]["metadata"]["annotations"] = {"test.runbook.io/delete-while-paused": "1"}
    ctl.reconcile(KEY)  # the override: at once
    assert len(runner.runs) == 2
    assert kube.objects[PATH]["metadata"]["finalizers"] == [FIN.name], "kept while it fails"


def test_events_told_in_flight_go_out_once_and_status_follows_the_run(tmp_path):
    added = {"type": "Normal", "reason": "MemberAdded", "message": "added w-1"}
    done = {"type": "Normal", "reason": "Reconciled", "message": "3 members"}
    stats = {"operator_status": {"readyMembers": 3}, "operator_events": [added, done]}
    kube, runner, ctl, _ = make(tmp_path, [result(stats=stats)])
    seen_in_flight: list[dict] = []

    def look_while_running() -> None:
        # The run's progress thread writes within its interval: watch the object meanwhile.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and "readyMembers" not in status(kube):
            time.sleep(0.01)
        seen_in_flight.append(copy.deepcopy(status(kube)))

    runner.told = [
        {"operator_progress": {"status": {"readyMembers": 2}}},
        {"operator_events": [added]},
    ]
    runner.during_run = None
    original_run = runner.run

    def run_and_look(*args, **kwargs):
        res = original_run(*args, **kwargs)
        look_while_running()
        return res

    runner.run = run_and_look  # type: ignore[method-assign]
    ctl.reconcile(KEY)
    assert seen_in_flight[0]["readyMembers"] == 2, "the run's look is written while in flight"
    assert seen_in_flight[0].get("observedGeneration") is None
    assert status(kube)["readyMembers"] == 3 and status(kube)["observedGeneration"] == 1
    events = sorted((o["reason"], o["count"]) for p, o in kube.objects.items() if "/events/" in p)
    assert events == [("MemberAdded", 1), ("Reconciled", 1)], "nothing sent twice"
