"""RunProgress: what a run tells in flight is sent in order, at most one round per interval,
and close() says how many Events were sent so the end of the run does not send them again."""

from __future__ import annotations

import threading
import time
from typing import Any

from etcd_runbook_operator.progress import RunProgress


def ev(reason: str) -> dict[str, Any]:
    return {"type": "Normal", "reason": reason, "message": reason.lower()}


class Recorder:
    def __init__(self, fail_on: str = "") -> None:
        self.emitted: list[str] = []
        self.writes: list[tuple[dict[str, Any], str | None, float]] = []
        self.fail_on = fail_on
        self.failed = 0
        self.lock = threading.Lock()

    def emit(self, event: dict[str, Any]) -> None:
        if event["reason"] == self.fail_on:
            self.failed += 1
            raise RuntimeError("API server down")
        with self.lock:
            self.emitted.append(event["reason"])

    def write(self, progress: dict[str, Any], step: dict[str, Any] | None) -> None:
        with self.lock:
            self.writes.append((progress, step["reason"] if step else None, time.monotonic()))


def wait_until(cond, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_events_go_out_in_order_and_close_counts_them():
    rec = Recorder()
    progress = RunProgress(rec.emit, rec.write, interval=0.05)
    progress({"operator_events": [ev("MemberAdded")]})
    progress({"operator_events": [ev("MemberPromoted"), "not an event", ev("MemberAdded")]})
    wait_until(lambda: len(rec.emitted) == 3)
    assert progress.close() == 4, "every entry told counts, sent or not sendable"
    assert rec.emitted == ["MemberAdded", "MemberPromoted", "MemberAdded"]
    assert rec.writes[-1][1] == "MemberAdded", "Progressing names the latest step"


def test_the_latest_look_wins_and_writes_are_spaced_by_the_interval():
    rec = Recorder()
    progress = RunProgress(rec.emit, rec.write, interval=0.3)
    progress({"operator_progress": {"status": {"readyMembers": 1}}})
    wait_until(lambda: len(rec.writes) == 1)
    for ready in (2, 3):  # within the interval: only the latest is written, once
        progress({"operator_progress": {"status": {"readyMembers": ready}}})
    wait_until(lambda: len(rec.writes) == 2)
    time.sleep(0.4)
    progress.close()
    assert [w[0]["status"]["readyMembers"] for w in rec.writes] == [1, 3]
    assert rec.writes[1][2] - rec.writes[0][2] >= 0.29


def test_without_status_management_only_events_go_out():
    rec = Recorder()
    progress = RunProgress(rec.emit, None, interval=0.01)
    progress({"operator_progress": {"status": {}}, "operator_events": [ev("Bootstrapped")]})
    wait_until(lambda: rec.emitted == ["Bootstrapped"])
    assert progress.close() == 1 and rec.writes == []


def test_after_a_failed_event_the_rest_wait_for_the_end_of_the_run_but_status_goes_on():
    rec = Recorder(fail_on="Lost")
    progress = RunProgress(rec.emit, rec.write, interval=0.01)
    progress({"operator_events": [ev("Started")]})
    wait_until(lambda: rec.emitted == ["Started"])
    progress({"operator_events": [ev("Lost")]})
    wait_until(lambda: rec.failed == 1)
    progress({"operator_events": [ev("MemberAdded")], "operator_progress": {"status": {"a": 1}}})
    wait_until(lambda: any(w[0] == {"status": {"a": 1}} for w in rec.writes))
    assert rec.emitted == ["Started"]
    # Sent Events are a prefix of what was told: the end sends Lost and MemberAdded, in order.
    assert progress.close() == 1


def test_what_is_told_after_close_is_left_to_the_end_of_the_run():
    rec = Recorder()
    progress = RunProgress(rec.emit, rec.write, interval=10)
    assert progress.close() == 0
    progress({"operator_events": [ev("Late")]})
    time.sleep(0.05)
    assert rec.emitted == []
