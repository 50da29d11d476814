import threading
import time

from etcd_runbook_operator.informer import Informer
from etcd_runbook_operator.kube import ApiException, Resource
from tests.unit.watcher_fakes import FakeKube

WIDGETS = Resource("test.runbook.io", "v1", "widgets", "Widget")


def widget(name, rv):
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}


def run_until(inf, kube, cond, timeout=5.0):
    stop = threading.Event()
    t = inf.start(stop)
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    t.join(2)
    return cond()


def test_list_then_watch_from_the_list_resource_version():
    kube = FakeKube()
    kube.put_object(WIDGETS.path("ns", "a"), widget("a", "1"))
    kube.watch_scripts = [[{"type": "MODIFIED", "object": widget("a", "200")}]]
    seen = []
    inf = Informer(kube, WIDGETS, lambda t, o: seen.append((t, o["metadata"]["resourceVersion"])))
    assert run_until(inf, kube, lambda: len(seen) >= 2)
    assert seen[0][0] == "ADDED" and seen[1] == ("MODIFIED", "200")
    watches = [p for m, p in kube.calls if m == "WATCH"]
    list_rv = next(p for m, p in kube.calls if m == "WATCH").split("rv=")[1]
    assert list_rv != "None" and watches[0].startswith(WIDGETS.path())
    assert inf.synced.is_set() and inf.get(("ns", "a"))["metadata"]["resourceVersion"] == "200"


def test_410_as_error_event_or_http_status_relists():
    kube = FakeKube()
    kube.put_object(WIDGETS.path("ns", "a"), widget("a", "1"))
    gone_event = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}
    kube.watch_scripts = [[gone_event], ApiException(status=410, reason="Gone"), []]
    restarts = []
    inf = Informer(kube, WIDGETS, lambda t, o: None, on_restart=restarts.append, backoff_base=0.01)
    assert run_until(inf, kube, lambda: inf.lists >= 3)
    assert restarts[:2] == ["gone", "gone"]


def test_relist_reports_objects_deleted_while_not_watching():
    kube = FakeKube()
    kube.put_object(WIDGETS.path("ns", "a"), widget("a", "1"))
    seen = []

    def gone_after_delete():
        del kube.objects[WIDGETS.path("ns", "a")]
        raise ApiException(status=410, reason="Gone")

    class Script(list):
        def __iter__(self):
            return gone_after_delete()

    kube.watch_scripts = [Script()]
    inf = Informer(kube, WIDGETS, lambda t, o: seen.append(t), backoff_base=0.01)
    assert run_until(inf, kube, lambda: "DELETED" in seen)
    assert inf.items() == []


def test_errors_back_off_and_never_end_the_loop():
    kube = FakeKube()
    kube.watch_scripts = [RuntimeError("connection reset")] * 3 + [[]]
    restarts = []
    inf = Informer(
        kube,
        WIDGETS,
        lambda t, o: None,
        on_restart=restarts.append,
        backoff_base=0.05,
        backoff_max=0.2,
    )
    started = time.monotonic()
    assert run_until(inf, kube, lambda: len(restarts) >= 4)
    assert restarts[:3] == ["error"] * 3
    # jittered 0.05, 0.1, 0.2 at >= half each: at least 0.175 s spent backing off
    assert time.monotonic() - started >= 0.17


def test_start_with_an_expired_resource_version_lists():
    kube = FakeKube()
    kube.put_object(WIDGETS.path("ns", "a"), widget("a", "1"))
    kube.watch_scripts = [ApiException(status=410, reason="Gone")]
    inf = Informer(
        kube, WIDGETS, lambda t, o: None, initial_resource_version="1", backoff_base=0.01
    )
    assert run_until(inf, kube, lambda: inf.synced.is_set())
    assert next(p.split("rv=")[1] for m, p in kube.calls if m == "WATCH") == "1"
