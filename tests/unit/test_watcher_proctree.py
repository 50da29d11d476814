"""Ending every process of the runs (etcd_runbook_operator/proctree.py), and the watcher's
shutdown when it lost its Lease (main.py): runs ended before another replica may lead."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from etcd_runbook_operator import main
from etcd_runbook_operator.kube import ApiException, Kube
from etcd_runbook_operator.proctree import descendants, kill_descendants, parents


@pytest.mark.parametrize(
    ("parent_of", "root", "found"),
    [
        ({2: 1, 3: 2, 4: 3, 5: 1}, 2, {3, 4}),
        ({2: 1, 3: 2, 4: 3, 5: 1}, 1, {2, 3, 4, 5}),
        ({2: 1, 3: 9}, 2, set()),
        ({1: 1, 2: 1}, 1, {2}),  # a process that is its own parent is not its descendant
    ],
)
def test_descendants_follow_the_chain_of_parents(parent_of, root, found):
    assert descendants(root, parent_of) == found


# A run as ansible-playbook makes one: a task worker that starts a session of its own, and
# what it starts in turn; each writes its PID down and then beats into a file.
TREE = r"""
import os, sys, time
out = sys.argv[1]
def beat(tag):
    with open(f"{out}/{tag}.pid", "w") as f:
        f.write(str(os.getpid()))
    for _ in range(600):
        with open(f"{out}/{tag}.beats", "a") as f:
            f.write(f"{time.time()}\n")
        time.sleep(0.1)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        beat("grandchild")
    beat("worker")
beat("run")
"""


def _pids(out: Path) -> dict[str, int]:
    return {p.stem: int(p.read_text()) for p in out.glob("*.pid") if p.read_text()}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_every_descendant_dies_the_workers_in_sessions_of_their_own_too(tmp_path):
    """Killing the run's process group (ansible-runner's cancel) would leave the worker."""
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        run = subprocess.Popen([sys.executable, "-c", TREE, str(tmp_path)])
        deadline = time.monotonic() + 20
        while len(_pids(tmp_path)) < 3:
            assert time.monotonic() < deadline, "the tree did not start"
            time.sleep(0.05)
        pids = _pids(tmp_path)
        assert os.getsid(pids["worker"]) != os.getsid(pids["run"])
        mine = descendants(os.getpid(), parents())
        assert set(pids.values()) <= mine and holder.pid in mine

        assert kill_descendants(run.pid) == 2  # the worker and what it started
        run.kill()
        run.wait(10)
        for tag in ("worker", "grandchild"):
            deadline = time.monotonic() + 10
            while _alive(pids[tag]):
                assert time.monotonic() < deadline, f"the {tag} lives on"
                time.sleep(0.05)
            size = (tmp_path / f"{tag}.beats").stat().st_size
            time.sleep(0.3)
            assert (tmp_path / f"{tag}.beats").stat().st_size == size, f"the {tag} still beats"
        assert holder.poll() is None, "only the descendants of the root"
    finally:
        holder.kill()
        holder.wait(10)


def test_a_fenced_kube_sends_no_write():
    kube = Kube(SimpleNamespace())  # type: ignore[arg-type]
    kube.fence("leadership lost")
    for write in (
        lambda: kube.create("/api/v1/namespaces/x/events", {}),
        lambda: kube.replace("/apis/g/v1/namespaces/x/things/a/status", {}),
        lambda: kube.merge_patch("/apis/g/v1/namespaces/x/things/a", {}),
        lambda: kube.delete("/apis/g/v1/namespaces/x/things/a"),
    ):
        with pytest.raises(ApiException, match="leadership lost"):
            write()


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _Controller:
    """A controller whose one run ends only when stopped at a task boundary (`obeys`)."""

    def __init__(self, runner: _Runner, clock: _Clock) -> None:
        self.runner, self.clock = runner, clock
        self.waits: list[float | None] = []

    def stop_intake(self) -> None:
        self.runner.log.append("intake stopped")

    def wait_idle(self, timeout: float | None) -> bool:
        self.waits.append(timeout)
        if timeout is not None and self.runner.running:
            self.clock.now += timeout  # waited it out
        return not self.runner.running


class _Runner:
    def __init__(self, obeys: bool, log: list[str]) -> None:
        self.obeys, self.log, self.running = obeys, log, True

    def stop_all_at_task_boundary(self) -> int:
        self.log.append("asked to stop")
        self.running = not self.obeys
        return 1

    def in_flight(self) -> int:
        return int(self.running)

    def kill_all(self) -> int:
        self.log.append("killed")
        self.running = False
        return 4

    def close(self) -> None:
        self.log.append("closed")


@pytest.mark.parametrize("obeys", [True, False], ids=["stops at a boundary", "mid-task"])
def test_with_the_lease_lost_runs_end_before_another_replica_may_lead(obeys):
    log: list[str] = []
    clock = _Clock()
    runner = _Runner(obeys, log)
    elector = SimpleNamespace(
        expires_at=lambda: 103.0 + main.KILL_MARGIN + 2,  # renewed 10 s ago, 15 s lease
        clock=clock,
        release=lambda: log.append("released"),
    )
    kube = SimpleNamespace(fence=lambda why: log.append(f"fenced: {why}"))
    controller = _Controller(runner, clock)
    op: Any = main.Operator.__new__(main.Operator)
    op.__dict__.update(
        stop=threading.Event(),
        metrics=SimpleNamespace(leader=SimpleNamespace(set=lambda v: None)),
        kube=kube,
        controllers=[controller],
        runner=runner,
        elector=elector,
        args=SimpleNamespace(shutdown_grace_period=60),
    )
    op.shutdown(lost=True)
    assert log[0] == "fenced: leadership lost", "nothing written once the Lease may be another's"
    assert "released" not in log
    if obeys:
        assert "killed" not in log
    else:
        assert log.index("killed") > log.index("asked to stop")
        assert clock.now <= elector.expires_at() - main.KILL_MARGIN, "killed in time"
    assert controller.waits[0] == pytest.approx(5.0)
