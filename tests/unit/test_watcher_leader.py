import threading

from urllib3.exceptions import ReadTimeoutError

from etcd_runbook_operator.kube import LEASES
from etcd_runbook_operator.leader import LeaderElector
from tests.unit.watcher_fakes import FakeKube


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pair():
    kube, clock = FakeKube(), Clock()
    a = LeaderElector(kube, "sys", "lock", "a", clock=clock)
    b = LeaderElector(kube, "sys", "lock", "b", clock=clock)
    return kube, clock, a, b


def holder(kube):
    return kube.objects[LEASES.path("sys", "lock")]["spec"]["holderIdentity"]


def test_only_one_candidate_holds_the_lease():
    kube, clock, a, b = pair()
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    clock.now += 10
    assert a.try_acquire_or_renew(), "renewal by the holder"
    assert not b.try_acquire_or_renew()
    assert holder(kube) == "a"


def test_takeover_only_after_lease_duration_without_renewal():
    kube, clock, a, b = pair()
    a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    clock.now += 14
    assert not b.try_acquire_or_renew()
    clock.now += 2
    assert b.try_acquire_or_renew()
    spec = kube.objects[LEASES.path("sys", "lock")]["spec"]
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1


def test_release_lets_a_standby_take_over_at_once():
    _kube, _clock, a, b = pair()
    a.try_acquire_or_renew()
    a.is_leader.set()
    assert not b.try_acquire_or_renew()
    a.release()
    assert b.try_acquire_or_renew()


def test_release_reads_again_when_its_own_renewal_lands_first():
    """A renewal in flight when the stop came lands between the release's read and write: the
    release gets 409 and reads again, instead of leaving the standby to wait out the lease."""
    kube, _clock, a, b = pair()
    a.try_acquire_or_renew()
    a.is_leader.set()
    replace, raced = kube.replace, []

    def renewal_first(path, body, timeout=None):
        if not raced:
            raced.append(path)
            a.try_acquire_or_renew()
        return replace(path, body, timeout)

    kube.replace = renewal_first
    a.release()
    assert raced and holder(kube) is None
    assert b.try_acquire_or_renew()


def test_renew_failure_past_the_deadline_means_lost():
    kube, clock, a, _ = pair()
    started = threading.Event()
    a.retry_period = 0.01
    stop = threading.Event()
    t = threading.Thread(target=a.run, args=(stop, started.set), daemon=True)
    t.start()
    assert started.wait(2)
    # Someone else holds the lease now (we were partitioned away): our renewals fail...
    with kube.lock:
        kube.objects[LEASES.path("sys", "lock")]["spec"].update(holderIdentity="b", renewTime="x")
    threading.Event().wait(0.1)
    assert a.is_leader.is_set() and not a.lost.is_set(), "not lost before the renew deadline"
    clock.now += 11  # ...for longer than the renew deadline (10 s)
    t.join(5)
    stop.set()
    assert a.lost.is_set() and not a.is_leader.is_set()


def test_a_renewal_counts_from_when_it_was_sent():
    """Another candidate reads our renewal after it was sent, and waits the lease from then:
    a slow answer must not move our own idea of when the Lease runs out later."""
    kube, clock, a, _ = pair()
    replace = kube.replace

    def slow(path, body, timeout=None):
        clock.now += 3  # the answer comes 3 s after the request was sent
        return replace(path, body, timeout)

    assert a.try_acquire_or_renew()
    sent = clock.now
    kube.replace = slow
    assert a.try_acquire_or_renew()
    assert a.expires_at() == sent + a.lease_duration


def test_every_lease_request_is_bounded_and_a_hung_one_is_a_failed_round():
    kube, _clock, a, _ = pair()
    seen: list[float | None] = []
    get = kube.get

    def timed(path, query=None, timeout=None):
        seen.append(timeout)
        return get(path, query, timeout)

    kube.get = timed
    a.try_acquire_or_renew()
    a.try_acquire_or_renew()
    assert seen and all(t is not None and t < a.renew_deadline for t in seen)

    def hung(path, query=None, timeout=None):
        raise ReadTimeoutError(None, path, "read timed out")

    kube.get = hung
    assert a.try_acquire_or_renew() is False


def test_leadership_is_overdue_after_the_renew_deadline_even_if_the_renew_loop_hangs():
    _kube, clock, a, _ = pair()
    assert a.try_acquire_or_renew()
    a.is_leader.set()
    clock.now += a.renew_deadline - 0.1
    assert not a.overdue()
    clock.now += 0.1  # no renewal since: the loop may be stuck in a request
    assert a.overdue()
    assert a.expires_at() - clock.now == a.lease_duration - a.renew_deadline
