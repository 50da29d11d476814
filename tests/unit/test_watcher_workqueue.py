import threading
import time

from etcd_runbook_operator.workqueue import WorkQueue


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_adds_coalesce_while_waiting():
    q = WorkQueue()
    for _ in range(5):
        q.add("a")
    q.add("b")
    assert q.depth() == 2
    assert q.get(0) == "a"
    assert q.get(0) == "b"
    assert q.get(0) is None


def test_event_during_a_run_gives_exactly_one_follow_up():
    q = WorkQueue()
    q.add("a")
    assert q.get(0) == "a"
    q.add("a")
    q.add("a")
    assert q.get(0) is None, "a key is never handed out while it is processed"
    q.done("a")
    assert q.get(0) == "a"
    q.done("a")
    assert q.get(0) is None


def test_rate_limited_backoff_doubles_and_forget_resets():
    clock = FakeClock()
    q = WorkQueue(base_delay=1.0, max_delay=5.0, clock=clock)
    assert [q.add_rate_limited("a") for _ in range(4)] == [1.0, 2.0, 4.0, 5.0]
    assert q.get(0) is None
    clock.now = 1.0
    assert q.get(0) == "a"
    q.forget("a")
    assert q.add_rate_limited("a") == 1.0


def test_one_run_per_key_and_parallelism_bound():
    q = WorkQueue()
    bound = 3
    running: dict[str, int] = {}
    peak = {"total": 0}
    runs: dict[str, int] = {}
    lock = threading.Lock()

    def worker() -> None:
        while (key := q.get()) is not None:
            with lock:
                running[key] = running.get(key, 0) + 1
                assert running[key] == 1, f"{key} ran twice at once"
                peak["total"] = max(peak["total"], sum(running.values()))
                runs[key] = runs.get(key, 0) + 1
            time.sleep(0.05)
            with lock:
                running[key] -= 1
            q.done(key)

    threads = [threading.Thread(target=worker) for _ in range(bound)]
    for t in threads:
        t.start()
    keys = [f"k{i}" for i in range(6)]
    for _ in range(4):
        for k in keys:
            q.add(k)
        time.sleep(0.02)
    deadline = time.monotonic() + 5
    while (q.depth() or any(running.values())) and time.monotonic() < deadline:
        time.sleep(0.02)
    q.shutdown()
    for t in threads:
        t.join(2)
    assert peak["total"] == bound
    # Four bursts of adds: at most one run in flight plus one follow-up per burst.
    assert all(1 <= runs[k] <= 4 for k in keys), runs


def test_shutdown_releases_waiting_workers():
    q = WorkQueue()
    got: list[object] = []
    t = threading.Thread(target=lambda: got.append(q.get()))
    t.start()
    time.sleep(0.05)
    q.shutdown()
    t.join(1)
    assert got == [None]
    q.add("x")
    assert q.depth() == 0


def test_an_urgent_key_goes_ahead_of_those_waiting():
    q = WorkQueue()
    for key in ("a", "b", "c"):
        q.add(key)
    q.add("d", urgent=True)  # new: to the front
    q.add("c", urgent=True)  # waiting: moved to the front, still once
    q.add("b")  # waiting: stays where it is
    assert [q.get(0) for _ in range(4)] == ["c", "d", "a", "b"]
    assert q.get(0) is None


def test_an_urgent_event_during_a_run_makes_an_urgent_follow_up():
    q = WorkQueue()
    q.add("a")
    assert q.get(0) == "a"
    q.add("b")
    q.add("a", urgent=True)
    q.done("a")
    assert q.get(0) == "a", "ahead of b, which waited before"
    q.done("a")
    q.add("a")
    assert q.get(0) == "b"
    q.done("b")
    assert q.get(0) == "a"
    q.done("a")
    q.add("c")
    assert q.get(0) == "c"
    q.add("c")  # a plain follow-up after an urgent one stays plain
    q.add("d")
    q.done("c")
    assert [q.get(0), q.get(0)] == ["d", "c"]
