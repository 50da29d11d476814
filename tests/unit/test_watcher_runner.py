"""The ansible-runner wrapper with REAL ansible-runner runs of tiny playbooks."""

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from etcd_runbook_operator.config import Target, Watch
from etcd_runbook_operator.extravars import build_extravars
from etcd_runbook_operator.faults import FAULT_RC, FaultPoint
from etcd_runbook_operator.runner import PlaybookRunner, _failure_reason, rotate_artifacts

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "watcher_fixtures"
SECRET = "s3cr3t-Zq9-value-never-on-disk"


def widget_watch(playbook: str, **vars_) -> Watch:
    return Watch(
        group="test.runbook.io",
        version="v1",
        kind="Widget",
        target=Target(playbook=FIXTURES / playbook, vars=vars_),
    )


# Every test runs twice: ansible-playbook started afresh, and forked from the fork server.
FORKSERVER = {"on": False}
RUNNERS: list[PlaybookRunner] = []


@pytest.fixture(autouse=True, params=[False, True], ids=["ansible-playbook", "forkserver"])
def forkserver(request):
    FORKSERVER["on"] = request.param
    yield request.param
    while RUNNERS:
        RUNNERS.pop().close()


def make_runner(tmp_path) -> PlaybookRunner:
    runner = PlaybookRunner(REPO, tmp_path / "artifacts", forkserver=FORKSERVER["on"])
    RUNNERS.append(runner)
    return runner


def run(tmp_path, playbook, timeout=60.0, on_stats=None, **vars_):
    watch = widget_watch(playbook, **vars_)
    obj = {
        "apiVersion": "test.runbook.io/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"colorName": "blue", "password": SECRET},
    }
    runner = make_runner(tmp_path)
    return runner, runner.run(
        watch.target,
        build_extravars(watch, obj, watch.target),
        tmp_path / "artifacts" / "widget" / "ns" / "w",
        3,
        timeout,
        on_stats=on_stats,
    )


def test_set_stats_reach_the_watcher_and_no_secret_in_artifacts_or_logs(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    _, res = run(tmp_path, "secret.yml")
    assert res.ok, res
    assert res.stats["operator_status"] == {"phase": "Ready", "colorName": "blue"}
    assert res.stats["operator_events"][0]["message"] == f"password has {len(SECRET)} characters"
    files = [p for p in (tmp_path / "artifacts").rglob("*") if p.is_file()]
    assert any(p.parent.name == "job_events" for p in files), "the run left artifacts to search"
    leaked = [str(p) for p in files if SECRET.encode() in p.read_bytes()]
    assert leaked == [], f"secret written to {leaked}"
    assert SECRET not in caplog.text
    command = (res.artifact_dir / "command").read_text()
    assert '"env"' not in command and "PATH" not in command


def test_failure_reports_the_failed_task_and_role_conditions(tmp_path):
    _, res = run(tmp_path, "fail.yml")
    assert not res.ok and res.status == "failed"
    assert res.failed_task == "Refuse the change"
    assert res.failed_msg == "refusing to shrink to 2 members"
    assert res.stats["operator_conditions"]["Degraded"]["reason"] == "UnsafeChange"


def test_a_looped_failure_names_the_failed_item_and_its_cause(tmp_path):
    _, res = run(tmp_path, "fail_loop.yml")
    assert not res.ok
    assert res.failed_task == "Patch each member"
    assert res.failed_msg == "One or more items failed; item 'm-1': pods \"m-1\" is forbidden"


@pytest.mark.parametrize(
    ("res", "reason"),
    [
        ({"msg": "NameTaken: Service ns/e ...", "reason": "NameTaken"}, "NameTaken"),
        ({"msg": "forbidden", "reason": "Forbidden"}, "Forbidden"),
        # The first failed item of a loop.
        (
            {
                "msg": "One or more items failed",
                "results": [
                    {"failed": False, "reason": "Ignored"},
                    {"failed": True, "reason": "NameTaken"},
                ],
            },
            "NameTaken",
        ),
        # Not a word a condition may carry, or none given.
        ({"msg": "x", "reason": "not a word"}, None),
        ({"msg": "x", "reason": 3}, None),
        ({"msg": "x"}, None),
    ],
)
def test_the_failed_modules_reason_word(res, reason):
    assert _failure_reason(res) == reason


def test_rotation_keeps_the_newest(tmp_path):
    for name in ["20260101T000000.000001Z-0", "20260101T000000.000002Z-1", "20260102T000000.0Z-2"]:
        (tmp_path / name).mkdir()
    rotate_artifacts(tmp_path, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "20260101T000000.000002Z-1",
        "20260102T000000.0Z-2",
    ]


def test_real_runs_rotate_to_max_runner_artifacts(tmp_path):
    for _ in range(4):
        _, res = run(tmp_path, "secret.yml")
    kept = sorted(p.name for p in res.artifact_dir.parent.iterdir())
    assert len(kept) == 3 and kept[-1] == res.artifact_dir.name


def wait_for(path: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_stop_request_ends_the_run_at_the_next_task_boundary(tmp_path):
    markers = tmp_path / "m"
    markers.mkdir()
    runner = make_runner(tmp_path)
    watch = widget_watch("sleep.yml", marker_dir=str(markers), nap=3)
    out = {}
    t = threading.Thread(
        target=lambda: out.setdefault(
            "res",
            runner.run(
                watch.target,
                build_extravars(watch, {"metadata": {"name": "w"}}, watch.target),
                tmp_path / "artifacts" / "w",
                2,
                60,
            ),
        )
    )
    t.start()
    wait_for(markers / "task1-started")
    assert runner.stop_all_at_task_boundary() == 1
    t.join(60)
    assert out["res"].status == "stopped"
    assert (markers / "task1-done").exists(), "the task in flight was not cut"
    assert not (markers / "task2-done").exists(), "no task started after the stop request"


def test_soft_timeout_stops_at_a_task_boundary(tmp_path):
    markers = tmp_path / "m"
    markers.mkdir()
    _, res = run(tmp_path, "sleep.yml", timeout=3.0, marker_dir=str(markers), nap=4)
    assert res.status == "stopped"
    assert not (markers / "task2-done").exists()
    # Wherever the deadline fell, a task that started also finished.
    assert (markers / "task1-started").exists() == (markers / "task1-done").exists()


def sigterm_run(tmp_path, grace: float):
    markers = tmp_path / "m"
    markers.mkdir()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [
            sys.executable,
            str(FIXTURES / "sigterm_harness.py"),
            str(markers),
            str(grace),
            str(tmp_path / "artifacts"),
            str(FORKSERVER["on"]),
        ],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(markers / "task1-started")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    return proc.returncode, markers, out


def test_sigterm_lets_the_run_in_flight_finish_within_the_grace_period(tmp_path):
    rc, markers, out = sigterm_run(tmp_path, grace=30)
    assert rc == 0, out
    assert (markers / "task2-done").exists(), out
    assert "shutting down" in out


def test_sigterm_after_grace_stops_at_a_task_boundary(tmp_path):
    rc, markers, out = sigterm_run(tmp_path, grace=0.5)
    assert rc == 0, out
    assert (markers / "task1-done").exists(), out
    assert not (markers / "task2-done").exists(), out
    assert "asked to stop at the next task boundary" in out


def wait_run(tmp_path, tags: list[str], attempts: int):
    """Start wait.yml in a thread; returns (runner, markers, result holder, thread)."""
    markers = tmp_path / "m"
    markers.mkdir()
    runner = make_runner(tmp_path)
    watch = widget_watch("wait.yml", marker_dir=str(markers), attempts=attempts, wait_tags=tags)
    out: dict = {}
    t = threading.Thread(
        target=lambda: out.setdefault(
            "res",
            runner.run(
                watch.target,
                build_extravars(watch, {"metadata": {"name": "w"}}, watch.target),
                tmp_path / "artifacts" / "w",
                2,
                120,
                name="ns/w",
            ),
        )
    )
    t.start()
    wait_for(markers / "scratch")
    return runner, markers, out, t


def test_interruptible_wait_stops_between_attempts_and_leaves_no_scratch(tmp_path):
    runner, markers, out, t = wait_run(tmp_path, ["interruptible"], attempts=60)
    scratch = Path((markers / "scratch").read_text())
    assert scratch.is_dir() and not str(scratch).startswith(str(tmp_path))
    assert runner.stop_at_task_boundary("other/name") is False
    time.sleep(1.5)  # inside the wait
    asked = time.monotonic()
    assert runner.stop_at_task_boundary("ns/w") is True
    t.join(60)
    assert out["res"].status == "stopped"
    assert time.monotonic() - asked < 10, "the stop waited for the whole wait"
    assert not (markers / "after-wait").exists()
    assert not scratch.exists(), "the run's scratch directory outlived it"


def test_untagged_wait_runs_to_its_end_before_stopping(tmp_path):
    runner, markers, out, t = wait_run(tmp_path, [], attempts=4)
    time.sleep(1.5)
    assert runner.stop_at_task_boundary("ns/w") is True
    t.join(60)
    assert out["res"].status == "stopped"
    assert out["res"].duration >= 4, "a wait without the tag was cut short"
    assert not (markers / "after-wait").exists()


# Strings as an attacker would write them into a custom resource: each must reach the run
# byte for byte, never evaluated (a lookup would run a command in the operator's process).
HOSTILE = [
    "{{ lookup('ansible.builtin.pipe', 'touch /tmp/ero-pwned') }}",
    "{{ 'a' ~ 'b' }}",
    "{{ 7 * 6 }}",
    "{% for x in range(3) %}{{ x }}{% endfor %}",
    "{# comment #}",
    "'\"\\n{{",
    "ünïcode {{ none }}",
]


def test_object_strings_arrive_in_the_run_as_data(tmp_path):
    watch = widget_watch("echo.yml", echo_out=str(tmp_path / "out.json"))
    obj = {
        "apiVersion": "test.runbook.io/v1",
        "kind": "Widget",
        "metadata": {
            "name": "w",
            "namespace": "ns",
            "annotations": {"x/a": HOSTILE[0], "x/b": HOSTILE[1]},
        },
        "spec": {"colorName": HOSTILE[2], "labels": {"k": HOSTILE[3], "l": HOSTILE[4:]}},
    }
    marker = Path("/tmp/ero-pwned")
    marker.unlink(missing_ok=True)
    runner = make_runner(tmp_path)
    res = runner.run(
        watch.target,
        build_extravars(watch, obj, watch.target),
        tmp_path / "artifacts" / "widget" / "ns" / "w",
        3,
        60.0,
    )
    assert res.ok, res
    assert not marker.exists(), "a lookup in an annotation ran a command"
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["object"] == obj
    assert out["color"] == HOSTILE[2]
    assert out["labels"] == {"k": HOSTILE[3], "l": HOSTILE[4:]}
    assert out["annotation"] == HOSTILE[0]
    assert out["meta"] == {"name": "w", "namespace": "ns"}


def test_set_stats_reach_on_stats_as_they_happen_in_the_order_the_end_aggregates(tmp_path):
    told: list[dict] = []
    _, res = run(tmp_path, "progress.yml", on_stats=told.append)
    assert res.ok, res
    events = [e for data in told for e in data.get("operator_events", [])]
    assert [e["reason"] for e in events] == ["MemberAdded", "MemberFenced", "MemberFenced", "Done"]
    # What was told in flight is a prefix of (here: equal to) what the end reports.
    assert res.stats["operator_events"] == events
    assert [d["operator_progress"] for d in told if "operator_progress" in d] == [
        {"status": {"readyMembers": 1}, "conditions": {"Available": {"status": "True"}}},
        {"status": {"readyMembers": 3}},
    ]


def test_a_failing_on_stats_never_fails_the_run(tmp_path):
    def broken(_data: dict) -> None:
        raise RuntimeError("API server down")

    _, res = run(tmp_path, "progress.yml", on_stats=broken)
    assert res.ok and len(res.stats["operator_events"]) == 4


@pytest.mark.parametrize(
    "when, task, fired, left",
    [
        # After the first step ended ok: nothing after it ran.
        ("after", "Step | First of", "p", {"first"}),
        # Before the third started: the second ran, the third did not.
        ("before", "Step | Third of", "p", {"first", "second"}),
        # A skipped step did not end ok: no point fires after it, the run goes on.
        ("after", "Step | Skipped of", None, {"first", "second", "third"}),
        # A point of no task in the run never fires.
        ("after", "Step | Fourth of", None, {"first", "second", "third"}),
    ],
)
def test_a_fault_point_ends_the_run_exactly_at_its_task_boundary(tmp_path, when, task, fired, left):
    markers = tmp_path / "m"
    markers.mkdir()
    runner = make_runner(tmp_path)
    watch = widget_watch("faults.yml", marker_dir=str(markers))
    result = runner.run(
        watch.target,
        build_extravars(watch, {"metadata": {"name": "w"}}, watch.target),
        tmp_path / "artifacts" / "w",
        2,
        60,
        faults=[FaultPoint("p", when, task, "a test's point")],
    )
    assert result.fault == fired
    assert (result.rc == FAULT_RC) == bool(fired) and result.ok != bool(fired)
    assert {p.name for p in markers.iterdir()} == left
