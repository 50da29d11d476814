"""The fork server (etcd_runbook_operator/forkserver.py) with real ansible-runner runs: which
runs are forked from it, which start the real ansible-playbook, and that a run never outlives
its client. (Every test of test_watcher_runner.py also runs through it.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from etcd_runbook_operator.forkserver import CLIENT, ForkServer, frozen_difference
from etcd_runbook_operator.runner import PlaybookRunner

REPO = Path(__file__).resolve().parents[2]
FORKED = Path(__file__).resolve().parent / "watcher_fixtures" / "forked.yml"


@pytest.mark.parametrize(
    ("server", "run", "differs"),
    [
        ({"A": "1", "ANSIBLE_NOCOLOR": "True"}, {"A": "1", "ANSIBLE_NOCOLOR": "True"}, []),
        # What ansible-runner and the watcher change from run to run is read at run time.
        (
            {"ERO_STOP_FILE": "/a/stop", "TMPDIR": "/a", "AWX_ISOLATED_DATA_DIR": "/a/x"},
            {"ERO_STOP_FILE": "/b/stop", "TMPDIR": "/b", "AWX_ISOLATED_DATA_DIR": "/b/x"},
            [],
        ),
        # Ansible reads its settings at import: any other difference, set or unset.
        ({"ANSIBLE_NOCOLOR": "True"}, {"ANSIBLE_NOCOLOR": "False"}, ["ANSIBLE_NOCOLOR"]),
        ({}, {"ANSIBLE_FORKS": "1", "HOME": "/h"}, ["ANSIBLE_FORKS", "HOME"]),
        ({"LANG": "C.UTF-8"}, {}, ["LANG"]),
    ],
)
def test_which_environments_may_be_forked(server, run, differs):
    assert frozen_difference(server, run) == differs


def forked_run(tmp_path, server: ForkServer, env: dict[str, str], nap: int = 0):
    """The client as ansible-runner starts it, on forked.yml; returns the Popen."""
    markers = tmp_path / "m"
    markers.mkdir(exist_ok=True)
    return subprocess.Popen(
        [
            sys.executable,
            "-I",
            "-S",
            str(CLIENT),
            server.ensure(),
            str(FORKED),
            "-e",
            f'{{"marker_dir": "{markers}", "nap": {nap}}}',
        ],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.fixture
def server():
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="True")
    started = ForkServer(env)
    started.ensure(wait=30)
    yield started
    started.close()


def test_a_run_is_forked_only_under_the_servers_settings(tmp_path, server):
    same = dict(server._env)
    proc = forked_run(tmp_path, server, same)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "forked=1" in out, out
    other = dict(same, ANSIBLE_FORKS="3")
    proc = forked_run(tmp_path, server, other)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "forked=" in out and "forked=1" not in out, out


def test_no_server_runs_the_real_ansible_playbook(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-I", "-S", str(CLIENT), str(tmp_path / "no-socket"), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout.startswith("ansible-playbook [core 2.19"), proc


def server_children(server: ForkServer) -> list[int]:
    """The keepers and runs of `server`: forks of it in its session. (A run's task workers
    start sessions of their own, as with ansible-playbook started afresh.)"""
    assert server._proc is not None
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == server._proc.pid:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, session = fields[0], int(fields[3])
        ours = b"forkserver.py" in cmdline and session == server._proc.pid
        if ours and state != "Z":
            found.append(int(entry.name))
    return found


def sleeping_run(tmp_path, server: ForkServer) -> subprocess.Popen:
    """A forked run of forked.yml, returned once its task sleeps (its shell wrote its pid)."""
    proc = forked_run(tmp_path, server, dict(server._env), nap=60)
    sleeper = tmp_path / "m" / "sleeper"
    deadline = time.monotonic() + 60
    while not sleeper.exists() or not sleeper.read_text().strip():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    return proc


def test_a_run_ends_with_its_client(tmp_path, server):
    proc = sleeping_run(tmp_path, server)
    assert len(server_children(server)) == 2, "a keeper and its run"
    proc.kill()  # as ansible-runner's hard cancel does
    proc.wait(10)
    deadline = time.monotonic() + 10
    while server_children(server):
        assert time.monotonic() < deadline, "the run outlived its killed client"
        time.sleep(0.1)


def test_signals_to_the_client_reach_the_run(tmp_path, server):
    proc = sleeping_run(tmp_path, server)
    proc.send_signal(signal.SIGINT)  # ansible-runner's terminate begins so
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode != 0 and "User interrupted execution" in out, out


def test_the_watchers_runs_are_forked(tmp_path):
    runner = PlaybookRunner(REPO, tmp_path / "artifacts", forkserver=True)
    try:
        from etcd_runbook_operator.config import Target

        assert runner._forkserver is not None
        runner._forkserver.ensure(wait=30)
        for _ in range(2):
            res = runner.run(
                Target(playbook=FORKED),
                {"marker_dir": str(tmp_path)},
                tmp_path / "artifacts" / "w",
                3,
                60,
            )
            assert res.ok, res
            stdout = (res.artifact_dir / "stdout").read_text()
            assert "forked=1" in stdout, stdout
    finally:
        runner.close()
