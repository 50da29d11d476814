"""The labelled-namespaces mode: a controller with no namespace of its own watches those the
Enrolment enrolls, and stops acting in one once it is withdrawn (the real API server's side is
tests/operator/test_labelled_namespaces.py)."""

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from etcd_runbook_operator.config import Dependent, Target, Watch
from etcd_runbook_operator.controller import Controller
from etcd_runbook_operator.enrolment import Enrolment
from etcd_runbook_operator.events import EventRecorder
from etcd_runbook_operator.kube import Resource
from etcd_runbook_operator.metrics import Metrics
from tests.unit.watcher_fakes import FakeKube, FakeRunner

REPO = Path(__file__).resolve().parents[2]
WIDGETS = Resource("test.runbook.io", "v1", "widgets", "Widget")
WATCH = Watch(
    group="test.runbook.io",
    version="v1",
    kind="Widget",
    target=Target(playbook=Path("/pb.yml")),
    dependents=(Dependent("", "v1", "Pod", "pods", preempt_on_loss=True),),
)


def widget(namespace: str) -> dict:
    return {
        "apiVersion": "test.runbook.io/v1",
        "kind": "Widget",
        "metadata": {"name": "w1", "namespace": namespace, "uid": f"u-{namespace}"},
        "spec": {},
    }


def make(tmp_path, namespaces):
    # Duck-typed fakes where the constructors name the real collaborators.
    kube: Any = FakeKube()
    for ns in ("team-a", "team-b"):
        kube.put_object(WIDGETS.path(ns, "w1"), widget(ns))
    runner: Any = FakeRunner(tmp_path)
    metrics = Metrics()
    ctl = Controller(
        kube,
        WATCH,
        WIDGETS,
        runner,
        EventRecorder(kube),
        metrics,
        namespaces,
        runner_timeout=60,
        workers=1,
    )
    return kube, runner, ctl, metrics


def wait_until(predicate, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.01)


def test_nothing_is_watched_or_reconciled_before_its_namespace_is_enrolled(tmp_path):
    kube, runner, ctl, _ = make(tmp_path, [])
    assert ctl.intake.informers == [] and ctl.synced()
    ctl.reconcile(("team-a", "w1"))
    assert runner.runs == [] and kube.calls == [], "not enrolled: not even read"


def test_an_enrolled_namespace_is_listed_watched_and_reconciled_then_withdrawn(tmp_path):
    kube, runner, ctl, _ = make(tmp_path, [])
    stop = threading.Event()
    ctl.start(stop)
    try:
        ctl.enroll("team-a")
        ctl.enroll("team-a")  # a relist of the namespaces enrolls it again: one set of informers
        assert sorted(inf.name for inf in ctl.intake.informers) == ["pods@team-a", "widgets@team-a"]
        wait_until(lambda: any(r["name"] == "team-a/w1" for r in runner.runs))
        assert ("GET", WIDGETS.path("team-b")) not in kube.calls, "team-b is never listed"
        assert ctl.healthy()

        ctl.withdraw("team-a")
        assert ctl.intake.informers == [] and ctl.healthy()
        runs = len(runner.runs)
        # A key queued before the withdrawal is dropped, not run.
        ctl.reconcile(("team-a", "w1"))
        assert len(runner.runs) == runs
        assert not ctl.intake.covers("team-a")
    finally:
        ctl.stop_intake()
        stop.set()


def test_readiness_does_not_wait_for_a_namespace_the_operator_may_not_read(tmp_path):
    _kube, _runner, ctl, _ = make(tmp_path, [])
    ctl.intake.enroll("team-a")  # informers made, never started: as if every list were refused
    assert ctl.synced()
    # The static modes still wait for every informer.
    _kube, _runner, static, _ = make(tmp_path, ["team-a"])
    assert not static.synced()
    assert static.intake.covers("anything") and not static.intake.enroll("team-b")


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def enroll(self, namespace: str) -> None:
        self.calls.append(("enroll", namespace))

    def withdraw(self, namespace: str) -> None:
        self.calls.append(("withdraw", namespace))


def test_namespaces_entering_and_leaving_the_selector_are_enrolled_and_withdrawn():
    a, b = Recorder(), Recorder()
    kube: Any = FakeKube()
    enrolment = Enrolment(kube, "etcd.runbook.io/enrolled=true", [a, b], Metrics())
    assert enrolment.informer.label_selector == "etcd.runbook.io/enrolled=true"
    assert enrolment.informer.resource.path() == "/api/v1/namespaces"
    ns = {"metadata": {"name": "team-a"}}
    enrolment.on_namespace("ADDED", ns)
    enrolment.on_namespace("MODIFIED", {"metadata": {"name": "team-a", "deletionTimestamp": "x"}})
    enrolment.on_namespace("DELETED", ns)
    expected = [("enroll", "team-a"), ("enroll", "team-a"), ("withdraw", "team-a")]
    assert a.calls == expected and b.calls == expected


def test_namespace_and_namespace_selector_exclude_each_other():
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "operator.py"),
            "--namespace=team-a",
            "--namespace-selector=etcd.runbook.io/enrolled=true",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "--namespace and --namespace-selector exclude each other" in proc.stderr
