"""Reconcile logic against an in-memory API server and a recording runner."""

import copy
import dataclasses
import time
from pathlib import Path

import pytest

from etcd_runbook_operator import config as config_module
from etcd_runbook_operator import faults, reconcile
from etcd_runbook_operator.config import Dependent, Finalizer, Target, Watch
from etcd_runbook_operator.controller import Controller
from etcd_runbook_operator.events import EventRecorder
from etcd_runbook_operator.intake import owner_key
from etcd_runbook_operator.kube import Resource
from etcd_runbook_operator.metrics import Metrics
from etcd_runbook_operator.nodes import NodeSilence
from etcd_runbook_operator.reconcile import requeue_after
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


def test_a_run_that_asks_to_look_again_is_queued_and_not_skipped_then(tmp_path):
    # A runbook waiting out a deadline (a node unreachable for spec.nodeLossTimeout) asks for a
    # run when it passes, though nothing the watcher sees will have changed.
    stats = {"operator_requeue_after": 30}
    _kube, runner, ctl, _ = make(tmp_path, [result(stats=stats), result()])
    now = [1000.0]
    ctl.skips.clock = lambda: now[0]
    ctl.reconcile(KEY)
    assert [key for _, _, key in ctl.queue._delayed] == [KEY]
    assert ctl.queue._delayed[0][0] - time.monotonic() == pytest.approx(30, abs=2)
    now[0] += 29
    ctl.reconcile(KEY)
    assert len(runner.runs) == 1, "before its time, an unchanged resync is still skipped"
    now[0] += 1
    ctl.reconcile(KEY)
    assert len(runner.runs) == 2
    # That run asked nothing: back to the skip rule's own bound.
    now[0] += 30
    ctl.reconcile(KEY)
    assert len(runner.runs) == 2


@pytest.mark.parametrize(
    ("asked", "seconds"),
    [
        (None, None),
        (30, 30.0),
        ("12.5", 12.5),
        (0, None),
        (-5, None),
        (True, None),
        ("soon", None),
        (float("nan"), None),
        ([30], None),
        (0.01, 1.0),
        (10**9, 3600.0),
    ],
)
def test_what_a_run_may_ask_for(asked, seconds):
    stats = {} if asked is None else {"operator_requeue_after": asked}
    assert requeue_after(stats) == seconds


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


def test_the_failing_task_and_its_message_reach_the_operator_s_log(tmp_path, caplog):
    """kubectl logs shows why a run failed, bounded, as the Degraded condition says it."""
    _kube, _runner, ctl, _ = make(
        tmp_path, [result(False, task="Act | Create the member", msg="quota exceeded " * 400)]
    )
    with caplog.at_level("WARNING", logger="etcd_runbook_operator.reconcile"):
        ctl.reconcile(KEY)
    (line,) = [r.getMessage() for r in caplog.records if "Create the member" in r.getMessage()]
    assert "task 'Act | Create the member' failed: quota exceeded" in line
    assert len(line) < 2100 and line.endswith("\u2026")


def test_a_failed_modules_reason_names_degraded_and_the_warning(tmp_path):
    """A role that says nothing of a failed step (the backup's write refused as NameTaken):
    the module's own word, not RunbookFailed, and the message names the object."""
    msg = "NameTaken: CronJob ns/nightly exists and is not this resource's to write"
    kube, _runner, ctl, _ = make(
        tmp_path, [result(False, task="write", msg=msg, reason="NameTaken")]
    )
    ctl.reconcile(KEY)
    d = cond(kube, "Degraded")
    assert (d["status"], d["reason"]) == ("True", "NameTaken") and "CronJob ns/nightly" in d[
        "message"
    ]
    warnings = [o for p, o in kube.objects.items() if "/events/" in p]
    assert [(w["type"], w["reason"]) for w in warnings] == [("Warning", "NameTaken")]
    assert "CronJob ns/nightly" in warnings[0]["message"]


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


def controller_ref(kind="Widget", api_version="test.runbook.io/v1", name="w1", controller=True):
    return {"apiVersion": api_version, "kind": kind, "name": name, "controller": controller}


# A dependent that people make themselves: it names its Widget in spec.widget.name.
GADGET = Dependent(
    "test.runbook.io", "v1", "Gadget", "gadgets", owner_field=("spec", "widget", "name")
)


@pytest.mark.parametrize(
    "obj, without_field, expected",
    [
        # The controller ownerReference to the watched kind wins over the label and the field.
        pytest.param(
            {
                "metadata": {
                    "ownerReferences": [controller_ref()],
                    "labels": {OWNER_LABEL: "zz"},
                },
                "spec": {"widget": {"name": "yy"}},
            },
            ("ns", "w1"),
            ("ns", "w1"),
            id="ownerReference",
        ),
        # A controller of another kind or group, or a reference that is not the controller, is
        # no owner: the label is next, then the field.
        pytest.param(
            {
                "metadata": {
                    "ownerReferences": [controller_ref("ReplicaSet", "apps/v1", "r")],
                    "labels": {OWNER_LABEL: "w2"},
                },
                "spec": {"widget": {"name": "yy"}},
            },
            ("ns", "w2"),
            ("ns", "w2"),
            id="label-before-field",
        ),
        pytest.param(
            {
                "metadata": {
                    "ownerReferences": [
                        controller_ref(api_version="other.io/v1"),
                        controller_ref(controller=False),
                    ]
                },
                "spec": {"widget": {"name": "w3"}},
            },
            None,
            ("ns", "w3"),
            id="field-when-no-controller-of-the-kind",
        ),
        pytest.param(
            {"metadata": {"labels": {OWNER_LABEL: ""}}, "spec": {"widget": {"name": "w4"}}},
            None,
            ("ns", "w4"),
            id="empty-label-then-field",
        ),
        pytest.param({"metadata": {"labels": {}}}, None, None, id="nothing"),
        pytest.param({"metadata": {}, "spec": {}}, None, None, id="field-missing"),
        pytest.param({"metadata": {}, "spec": {"widget": {}}}, None, None, id="leaf-missing"),
        pytest.param({"metadata": {}, "spec": None}, None, None, id="spec-null"),
        pytest.param(
            {"metadata": {}, "spec": {"widget": "w1"}}, None, None, id="path-through-a-string"
        ),
        pytest.param({"metadata": {}, "spec": {"widget": [{"name": "w1"}]}}, None, None, id="list"),
        pytest.param({"metadata": {}, "spec": {"widget": {"name": ""}}}, None, None, id="empty"),
        pytest.param({"metadata": {}, "spec": {"widget": {"name": 7}}}, None, None, id="int"),
        pytest.param(
            {"metadata": {}, "spec": {"widget": {"name": {"n": "w1"}}}}, None, None, id="map"
        ),
        # Names that would address another API path than the owner's.
        pytest.param(
            {"metadata": {}, "spec": {"widget": {"name": "w1/status"}}}, None, None, id="slash"
        ),
        pytest.param({"metadata": {}, "spec": {"widget": {"name": ".."}}}, None, None, id="dots"),
    ],
)
def test_owner_key(obj, without_field, expected):
    obj = {**obj, "metadata": {"namespace": "ns", "name": "p", **obj["metadata"]}}
    watch = Watch(
        group="test.runbook.io", version="v1", kind="Widget", target=PB, owner_label=OWNER_LABEL
    )
    # A dependent without ownerField: only the reference and the label count.
    assert owner_key(obj, watch, Dependent("", "v1", "Pod", "pods")) == without_field
    assert owner_key(obj, watch, GADGET) == expected


def test_owner_key_without_owner_label():
    # Without an owner label only the controller reference counts, then the field.
    bare = Watch(group="test.runbook.io", version="v1", kind="Widget", target=PB)
    labelled = {"namespace": "ns", "name": "p", "labels": {OWNER_LABEL: "w2"}}
    assert owner_key({"metadata": labelled}, bare, GADGET) is None
    named = {"metadata": labelled, "spec": {"widget": {"name": "w3"}}}
    assert owner_key(named, bare, GADGET) == ("ns", "w3")
    owned = {"metadata": {**labelled, "ownerReferences": [controller_ref()]}}
    assert owner_key(owned, bare, Dependent("", "v1", "Pod", "pods")) == ("ns", "w1")


def test_dependent_change_enqueues_owner_and_changes_fingerprint(tmp_path):
    _kube, runner, ctl, _ = make(tmp_path)
    pod = member_pod("p1", resourceVersion="5")
    ctl.intake.dependents[0]._cache[("ns", "w1-0")] = pod
    ctl.reconcile(KEY)
    ctl.intake.on_dependent(DEPENDENTS[0], "MODIFIED", pod)
    assert ctl.queue.get(0) == KEY
    ctl.queue.done(KEY)
    pod["metadata"]["resourceVersion"] = "6"  # e.g. the Pod went NotReady
    ctl.reconcile(KEY)
    assert len(runner.runs) == 2


GADGETS = Resource("test.runbook.io", "v1", "gadgets", "Gadget")


def gadget(namespace: str, name: str, widget: object) -> dict:
    return {
        "apiVersion": "test.runbook.io/v1",
        "kind": "Gadget",
        "metadata": {"namespace": namespace, "name": name, "uid": f"{namespace}-{name}"},
        "spec": {"widget": {"name": widget}},
    }


def test_a_dependent_named_by_field_queues_its_owner_and_is_one_of_its_dependents(tmp_path):
    # A person's Gadget names its Widget in the spec and carries no label: its informer has no
    # selector (`selector: {}`) while the Pods' keeps the entry's dependentSelector.
    everything = dataclasses.replace(GADGET, selector="")
    kube, runner, ctl, _ = make(
        tmp_path,
        [result(False, task="t", msg="needs a gadget"), result()],
        dependents=(*DEPENDENTS, everything),
        dependent_selector="app.kubernetes.io/managed-by=test",
    )
    assert [(i.resource.plural, i.label_selector) for i in ctl.intake.dependents] == [
        ("pods", "app.kubernetes.io/managed-by=test"),
        ("persistentvolumeclaims", "app.kubernetes.io/managed-by=test"),
        ("gadgets", ""),
    ]
    now = [0.0]
    ctl.skips.clock = lambda: now[0]
    ctl.reconcile(KEY)  # the runbook refuses for want of a gadget: backing off
    assert len(runner.runs) == 1 and ctl.queue.failures(KEY) == 1
    for obj in (
        gadget("ns", "mine", "w1"),
        gadget("other", "same-name-elsewhere", "w1"),  # (other, w1): not ours
        gadget("ns", "unnamed", 7),
    ):
        kube.put_object(GADGETS.path(obj["metadata"]["namespace"], obj["metadata"]["name"]), obj)
    informer = ctl.intake.dependents[2]
    informer._list()  # the informer's first list: ADDED for each
    queued = {ctl.queue.get(0), ctl.queue.get(0)}
    assert queued == {KEY, ("other", "w1")} and ctl.queue.depth() == 0
    # Only the field names it: the skip rule counts it by its spec.
    seen = [(s.obj["metadata"]["name"], s.by_spec) for s in ctl.intake.dependents_of(KEY)]
    assert seen == [("mine", True)]
    # A new dependent is urgent: it does not wait for the retry time.
    ctl.reconcile(KEY)
    assert len(runner.runs) == 2 and cond(kube, "Degraded")["status"] == "False"


def test_a_person_s_dependent_runs_its_owner_on_spec_changes_not_on_status_writes(tmp_path):
    # A person's Gadget (named by field only): its own runbook writes its status three times a
    # snapshot; none of that starts a run of its Widget, nor breaks the Widget's backoff.
    kube, runner, ctl, _ = make(
        tmp_path,
        [result(), result(), result(False, task="t", msg="m"), result()],
        dependents=(*DEPENDENTS, GADGET),
    )
    now = [0.0]
    ctl.skips.clock = lambda: now[0]
    mine = {**gadget("ns", "mine", "w1"), "status": {"phase": "Scheduled"}}
    mine["metadata"].update(generation=1, resourceVersion="10")
    cache = ctl.intake.dependents[2]._cache
    cache[("ns", "mine")] = mine
    ctl.reconcile(KEY)
    assert len(runner.runs) == 1
    for rv, status in (("11", {"phase": "Running"}), ("12", {"lastSnapshot": {"sha256": "ab"}})):
        mine["metadata"]["resourceVersion"] = rv
        mine["status"].update(status)
        ctl.reconcile(KEY)
    assert len(runner.runs) == 1
    mine["spec"]["destination"] = {"volume": {"claimName": "snaps"}}
    mine["metadata"].update(generation=2, resourceVersion="13")
    ctl.reconcile(KEY)
    assert len(runner.runs) == 2
    # Backing off after a failure: its phase is not urgent, its deletion is.
    kube.objects[PATH]["metadata"]["generation"] = 2
    ctl.reconcile(KEY)
    assert len(runner.runs) == 3 and ctl.queue.failures(KEY) == 1
    mine["status"]["phase"] = "Failed"
    mine["metadata"]["resourceVersion"] = "14"
    ctl.reconcile(KEY)
    assert len(runner.runs) == 3
    del cache[("ns", "mine")]
    ctl.reconcile(KEY)
    assert len(runner.runs) == 4


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
            DEPENDENTS[0], "MODIFIED", member_pod("p1", deletionTimestamp="2026-01-01T00:00:00Z")
        ),
        ctl.intake.on_losable(
            DEPENDENTS[0], "DELETED", member_pod("p1")
        ),  # same Pod: no second request
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


@pytest.mark.parametrize("ends", [result(), result(ok=False)], ids=["done", "failed"])
def test_a_run_that_ends_after_a_member_is_lost_is_followed_by_a_run_at_once(tmp_path, ends):
    """The loss came too late to stop the run (no task boundary left): the run it queued is
    neither skipped for the start fingerprint (the inputs are back to what they were: the
    member the run made is gone again) nor held back by a failure's backoff."""
    _kube, runner, ctl, _ = make(tmp_path, [ends, result()])
    runner.during_run = lambda: ctl.intake.on_losable(DEPENDENTS[0], "DELETED", member_pod("p1"))
    ctl.queue.add(KEY)
    assert ctl.queue.get(0) == KEY
    ctl.reconcile(KEY)
    assert runner.stop_requests == ["ns/w1"]
    ctl.queue.done(KEY)
    assert ctl.queue.get(0) == KEY
    runner.during_run = None
    ctl.reconcile(KEY)
    assert len(runner.runs) == 2


def test_a_member_lost_after_a_run_defeats_the_skip_though_the_inputs_look_the_same(tmp_path):
    _kube, runner, ctl, _ = make(tmp_path, [result(), result()])
    ctl.reconcile(KEY)
    ctl.reconcile(KEY)
    assert len(runner.runs) == 1, "nothing changed: skipped"
    ctl.intake.on_losable(DEPENDENTS[0], "DELETED", member_pod("p1"))
    assert ctl.queue.get(0) == KEY
    ctl.reconcile(KEY)
    assert len(runner.runs) == 2


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


def test_spec_changes_and_lost_members_go_ahead_of_resyncs(tmp_path):
    kube, _runner, ctl, _ = make(tmp_path)
    obj = kube.objects[PATH]
    other = ("ns", "w2")
    ctl.intake.on_primary("ADDED", obj)  # first sight: nothing was waiting before it
    assert ctl.queue.get(0) == KEY
    ctl.queue.done(KEY)
    ctl.queue.add(other)  # a resync, queued first
    ctl.intake.on_primary("MODIFIED", obj)  # the same generation (a status write)
    assert [ctl.queue.get(0), ctl.queue.get(0)] == [other, KEY]
    ctl.queue.done(other)
    ctl.queue.done(KEY)
    ctl.queue.add(other)
    obj["metadata"]["generation"] = 2
    ctl.intake.on_primary("MODIFIED", obj)  # a spec change: ahead of the resync
    assert [ctl.queue.get(0), ctl.queue.get(0)] == [KEY, other]
    ctl.queue.done(other)
    ctl.queue.done(KEY)
    ctl.queue.add(other)
    ctl.intake.on_losable(DEPENDENTS[0], "DELETED", member_pod("p9"))  # a member Pod lost
    assert [ctl.queue.get(0), ctl.queue.get(0)] == [KEY, other]


def test_runbook_deletions_and_idle_objects_do_not_preempt(tmp_path):
    _kube, runner, ctl, _ = make(tmp_path)
    own = {"test.runbook.io/deleted-by-runbook": "upgrade"}
    runner.during_run = lambda: ctl.intake.on_losable(
        DEPENDENTS[0], "DELETED", member_pod("p2", annotations=own)
    )
    ctl.reconcile(KEY)
    runner.during_run = None
    ctl.intake.on_losable(
        DEPENDENTS[0], "DELETED", member_pod("p3")
    )  # no run in flight: the queue is enough
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


def _lease(node: str, renewed: str) -> dict:
    return {
        "metadata": {"name": node, "namespace": "kube-node-lease"},
        "spec": {"renewTime": renewed},
    }


def test_the_owner_of_a_pod_on_a_silent_node_runs_though_nothing_it_watches_changed(tmp_path):
    # A node whose kubelet stopped: no Pod event comes until the node controller's grace period
    # (50 s) is over; its Lease stops being renewed after 10 s.
    _kube, runner, ctl, _ = make(tmp_path, node_silence=15.0)
    now = [0.0]
    assert ctl.intake.silence is not None
    ctl.intake.silence.clock = lambda: now[0]
    pod = {**member_pod("p1", resourceVersion="5"), "spec": {"nodeName": "n2"}}
    ctl.intake.dependents[0]._cache[("ns", "w1-0")] = pod
    ctl.reconcile(KEY)
    ctl.intake.on_lease("ADDED", _lease("n2", "t0"))
    ctl.intake.on_lease("ADDED", _lease("n1", "t0"))
    now[0] = 10.0
    ctl.intake.on_lease("MODIFIED", _lease("n1", "t1"))
    assert ctl.intake.silence.newly_silent() == []
    ctl.reconcile(KEY)
    assert len(runner.runs) == 1, "nothing changed: skipped"

    now[0] = 16.0
    for node in ctl.intake.silence.newly_silent():
        ctl.intake.run_owners_on(node, "silent")
    assert ctl.queue.get(0) == KEY
    ctl.queue.done(KEY)
    ctl.reconcile(KEY)
    assert len(runner.runs) == 2, "the silence made the run skip-proof"
    # Named once per silence; a renewal ends it and runs the owner again.
    now[0] = 26.0
    assert ctl.intake.silence.newly_silent() == ["n1"]
    ctl.intake.on_lease("MODIFIED", _lease("n2", "t2"))
    assert ctl.queue.get(0) == KEY


@pytest.mark.parametrize(
    ("events", "at", "silent"),
    [
        # Renewed within the threshold: not silent.
        ([(0, "ADDED", "t0"), (10, "MODIFIED", "t1")], 20, []),
        # The same renewTime again (a relist) is no renewal.
        ([(0, "ADDED", "t0"), (10, "ADDED", "t0")], 16, ["n"]),
        ([(0, "ADDED", "t0")], 15, []),
        ([(0, "ADDED", "t0")], 15.1, ["n"]),
        # A Lease deleted (its Node deleted): silent at once, said by the event itself.
        ([(0, "ADDED", "t0"), (1, "DELETED", "t0")], 1, []),
    ],
)
def test_which_nodes_are_silent(events, at, silent):
    now = [0.0]
    tracker = NodeSilence(15.0, clock=lambda: now[0])
    for when, event, renewed in events:
        now[0] = when
        tracker.seen(event, _lease("n", renewed))
    now[0] = at
    assert tracker.newly_silent() == silent


def test_node_silence_needs_pods_among_the_dependents(tmp_path):
    (tmp_path / "pb.yml").write_text("[]\n")
    with pytest.raises(config_module.ConfigError, match="nodeSilence needs Pods"):
        config_module._watch(
            {
                "group": "g.io",
                "version": "v1",
                "kind": "W",
                "playbook": "pb.yml",
                "nodeSilence": "15s",
                "dependents": [{"version": "v1", "kind": "PersistentVolumeClaim"}],
            },
            tmp_path,
            "watches.yaml: entry 0",
        )


def test_a_silent_or_deleted_node_preempts_its_owners_run_in_flight(tmp_path):
    stopped = RunResult(status="stopped", rc=75, duration=1.0, artifact_dir=Path("/x"))
    _kube, runner, ctl, _ = make(tmp_path, [stopped, result(), stopped], node_silence=15.0)
    pod = {**member_pod("p1", resourceVersion="5"), "spec": {"nodeName": "n2"}}
    ctl.intake.dependents[0]._cache[("ns", "w1-0")] = pod
    # The node goes silent while a run is in flight: the run stops, and the owner is next.
    runner.during_run = lambda: ctl.intake.run_owners_on("n2", "is silent", preempt=True)
    ctl.reconcile(KEY)
    assert runner.stop_requests == ["ns/w1"]
    assert ctl.queue.failures(KEY) == 0, "a preempted run is not a failure"
    # It comes back while a run is in flight: nothing to stop.
    runner.during_run = lambda: ctl.intake.run_owners_on("n2", "renews its Lease again")
    ctl.intake.urgent(KEY)
    ctl.reconcile(KEY)
    assert runner.stop_requests == ["ns/w1"]
    # Its Lease deleted (the Node deleted) preempts.
    runner.during_run = lambda: ctl.intake.on_lease("DELETED", _lease("n2", "t0"))
    ctl.intake.urgent(KEY)
    ctl.reconcile(KEY)
    assert runner.stop_requests == ["ns/w1", "ns/w1"]
    assert len(runner.runs) == 3


def test_a_fault_point_is_armed_by_annotation_once_and_kills_before_any_status(
    tmp_path, monkeypatch
):
    monkeypatch.setenv(faults.ENABLE_ENV, "enabled")
    fired = RunResult(
        status="failed",
        rc=faults.FAULT_RC,
        duration=0.01,
        artifact_dir=tmp_path,
        fault="after-member-add",
    )
    kube, runner, ctl, _ = make(tmp_path, results=[fired])
    kube.objects[PATH]["metadata"]["annotations"] = {
        "test.runbook.io/fault-points": "after-member-add,not-a-point"
    }
    killed = []

    def restart() -> None:
        killed.append(dict(status(kube)))
        raise SystemExit(137)

    monkeypatch.setattr(reconcile, "_killed_and_restarted", restart)
    with pytest.raises(SystemExit):
        ctl.reconcile(KEY)
    assert [p.name for p in runner.runs[0]["faults"]] == ["after-member-add"]
    # Killed before the run's outcome was written: no generation is marked observed.
    assert len(killed) == 1 and "observedGeneration" not in killed[0], killed
    # Once per object: the next run arms nothing.
    ctl.reconcile(KEY)
    assert runner.runs[1]["faults"] == []


def test_fault_points_are_ignored_unless_the_operator_enables_them(tmp_path, monkeypatch):
    monkeypatch.delenv(faults.ENABLE_ENV, raising=False)
    kube, runner, ctl, _ = make(tmp_path)
    kube.objects[PATH]["metadata"]["annotations"] = {
        "test.runbook.io/fault-points": "after-member-add"
    }
    ctl.reconcile(KEY)
    assert runner.runs[0]["faults"] == []
