"""One playbook run through ansible-runner, with the watcher's safety rules around it.

* A fresh private data dir per run (mode 0700, outside the artifacts dir, deleted afterwards)
  holds env/extravars and env/envvars, so variables never reach a command line or artifact.
* Artifacts go to <artifacts>/<kind>/<namespace>/<name>/<ident>; the `command` file that
  ansible-runner writes there (it holds the whole process environment) is reduced to the command
  and cwd; only the newest `keep` runs are kept.
* Stopping is cooperative: the ero_task_boundary callback exits at the next task boundary when
  the run's stop file exists (soft timeout, shutdown after the grace period, lost leadership, a
  lost member to handle first), or between the retries of a task tagged `interruptible`.
  Only past the hard deadline does ansible-runner's cancel (SIGKILL of the process group) apply,
  and when runs must be over at once (`kill_all`: lost leadership, a second signal) every
  process the watcher started is killed, the task workers in sessions of their own included
  (proctree.py).
"""

from __future__ import annotations

import datetime
import itertools
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ansible_runner
import yaml
from ansible_runner.config.runner import RunnerConfig

from .ansible_callbacks.ero_task_boundary import STOPPED_RC
from .config import Target
from .faults import FAULT_RC, FaultPoint, run_env
from .forkserver import ForkServer
from .proctree import kill_descendants

log = logging.getLogger(__name__)

CALLBACK_DIR = Path(__file__).resolve().parent / "ansible_callbacks"
FACT_CACHE = "memory"


@dataclass
class RunResult:
    status: str  # successful | failed | timeout | stopped | canceled
    rc: int
    duration: float
    artifact_dir: Path
    stats: dict[str, Any] = field(default_factory=dict)
    failed_task: str | None = None
    failed_msg: str | None = None
    # The failed module's own word for why (NameTaken, Forbidden, S3AuthFailed ...), if any.
    failed_reason: str | None = None
    # The fault point the run ended at (faults.py), if one fired.
    fault: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "successful"


@dataclass
class _ActiveRun:
    stop_file: Path
    name: str
    hard_cancel: threading.Event = field(default_factory=threading.Event)


class _EventCollector:
    """Picks the facts the watcher needs out of ansible-runner's event stream, and hands each
    set_stats as it happens to `on_stats` (what a run tells while in flight)."""

    def __init__(self, on_stats: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.stats: dict[str, Any] = {}
        self.failed_task: str | None = None
        self.failed_msg: str | None = None
        self.failed_reason: str | None = None
        self.on_stats = on_stats

    def __call__(self, event: dict[str, Any]) -> bool:
        data = event.get("event_data") or {}
        kind = event.get("event")
        if kind == "playbook_on_stats":
            self.stats = data.get("artifact_data") or {}
        elif kind == "runner_on_ok" and self.on_stats is not None:
            for told in _set_stats_data(data.get("res") or {}):
                try:
                    self.on_stats(told)
                except Exception:  # progress is a courtesy: the run goes on regardless
                    log.exception("handling a run's set_stats while in flight failed")
        elif kind in ("runner_on_failed", "runner_on_unreachable") and not data.get(
            "ignore_errors"
        ):
            self.failed_task = data.get("task")
            self.failed_msg = _failure_message(data.get("res") or {})
            self.failed_reason = _failure_reason(data.get("res") or {})
        return True


def _set_stats_data(res: dict[str, Any]) -> list[dict[str, Any]]:
    """The data of a set_stats result, in order: one, or one per item of a looped task."""
    found = []
    for item in [res, *(res.get("results") or [])]:
        told = item.get("ansible_stats") if isinstance(item, dict) else None
        if isinstance(told, dict) and isinstance(told.get("data"), dict):
            found.append(told["data"])
    return found


def _failure_message(res: dict[str, Any]) -> str:
    """A looped task only says "One or more items failed": name the first failed item's cause,
    by its loop label (the item itself may be a whole Kubernetes object)."""
    msg = str(res.get("msg") or res.get("stderr") or "task failed")
    for item in res.get("results") or []:
        if isinstance(item, dict) and item.get("failed"):
            label = item.get("_ansible_item_label", item.get("item"))
            if isinstance(label, dict):
                label = (label.get("metadata") or {}).get("name")
            cause = str(item.get("msg") or item.get("stderr") or "failed")
            return f"{msg}; item {label!r}: {cause}" if label is not None else f"{msg}: {cause}"
    return msg


_REASON = re.compile(r"^[A-Z][A-Za-z0-9]{1,62}$")


def _failure_reason(res: dict[str, Any]) -> str | None:
    """The `reason` word the project's modules fail with (of the first failed item of a
    loop), if it is one: a condition reason must be a CamelCase word."""
    for item in [res, *(res.get("results") or [])]:
        if isinstance(item, dict) and (item is res or item.get("failed")):
            reason = item.get("reason")
            if isinstance(reason, str) and _REASON.match(reason):
                return reason
    return None


class PlaybookRunner:
    def __init__(
        self,
        project_dir: Path,
        artifacts_dir: Path,
        extra_env: dict[str, str] | None = None,
        hard_kill_after: float = 60.0,
        forkserver: bool = False,
    ) -> None:
        self.project_dir = project_dir
        self.artifacts_dir = artifacts_dir
        self.extra_env = dict(extra_env or {})
        self.hard_kill_after = hard_kill_after
        self._active: dict[int, _ActiveRun] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count()
        # Started now, so that it is warm before the first run (forkserver.py).
        self._forkserver = ForkServer(self._run_environment()) if forkserver else None
        if self._forkserver is not None:
            self._forkserver.ensure()

    def close(self) -> None:
        """Stops the fork server, if there is one (runs in flight go on without it)."""
        with self._lock:
            server, self._forkserver = self._forkserver, None
        if server is not None:
            server.close()

    def _run_environment(self) -> dict[str, str]:
        """The environment ansible-runner gives every run (its per-run parts aside): what the
        fork server imports Ansible under."""
        scratch = Path(tempfile.mkdtemp(prefix="ero-env-"))
        try:
            config = RunnerConfig(
                private_data_dir=str(scratch),
                project_dir=str(self.project_dir),
                playbook="playbook.yml",
                envvars=self._envvars(scratch / "stop", scratch),
                fact_cache_type=FACT_CACHE,
                quiet=True,
            )
            config.prepare()
            return {str(k): str(v) for k, v in config.env.items()}
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def stop_all_at_task_boundary(self) -> int:
        """Ask every run in flight to stop before its next task; returns how many."""
        with self._lock:
            runs = list(self._active.values())
        for run in runs:
            run.stop_file.touch()
        return len(runs)

    def stop_at_task_boundary(self, name: str) -> bool:
        """Ask the run in flight under `name` to stop before its next task; False if none."""
        with self._lock:
            runs = [r for r in self._active.values() if r.name == name]
        for run in runs:
            run.stop_file.touch()
        return bool(runs)

    def kill_all(self) -> int:
        """Last resort, mid-module: every process this watcher started is killed (the runs,
        their task workers, the fork server) and ansible-runner told so; how many."""
        with self._lock:
            for run in self._active.values():
                run.hard_cancel.set()
        return kill_descendants()

    def in_flight(self) -> int:
        with self._lock:
            return len(self._active)

    def _envvars(self, stop_file: Path, tmp: Path) -> dict[str, str]:
        env = {
            "ANSIBLE_CONFIG": str(self.project_dir / "ansible.cfg"),
            "ANSIBLE_CALLBACK_PLUGINS": str(CALLBACK_DIR),
            "ANSIBLE_CALLBACKS_ENABLED": "ero_task_boundary",
            "ANSIBLE_NO_TARGET_SYSLOG": "True",
            "ANSIBLE_DISPLAY_ARGS_TO_STDOUT": "False",
            "ANSIBLE_RETRY_FILES_ENABLED": "False",
            "ANSIBLE_NOCOLOR": "True",
            "ERO_STOP_FILE": str(stop_file),
            # Scratch files of the run (the role's client key, its port-forward state) live in the
            # private data dir, so they go with it even when the run stops before its cleanup.
            "TMPDIR": str(tmp),
            # ansible-playbook lives next to our interpreter (venv or image), maybe not on PATH.
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        }
        env.update(self.extra_env)
        return env

    @staticmethod
    def _role_playbook(pdd: Path, role: str) -> Path:
        play = [
            {
                "name": f"Run role {role}",
                "hosts": "localhost",
                "connection": "local",
                "gather_facts": False,
                "tasks": [{"ansible.builtin.import_role": {"name": role}}],
            }
        ]
        path = pdd / "role-playbook.yml"
        path.write_text(yaml.safe_dump(play))
        return path

    def run(
        self,
        target: Target,
        extravars: dict[str, Any],
        artifact_parent: Path,
        keep: int,
        timeout: float,
        name: str = "",
        on_stats: Callable[[dict[str, Any]], None] | None = None,
        faults: list[FaultPoint] | None = None,
    ) -> RunResult:
        ident = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S.%fZ")
        ident += f"-{next(self._ids)}"
        artifact_parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        pdd = Path(tempfile.mkdtemp(prefix="ero-run-"))
        active = _ActiveRun(stop_file=pdd / "stop", name=name)
        (pdd / "tmp").mkdir(mode=0o700)
        run_id = id(active)
        with self._lock:
            self._active[run_id] = active
        soft = threading.Timer(timeout, active.stop_file.touch)
        soft.daemon = True
        collector = _EventCollector(on_stats)
        started = time.monotonic()
        try:
            playbook = target.playbook or self._role_playbook(pdd, str(target.role))
            # The fork server's client in place of ansible-playbook (None: ansible-playbook).
            binary, cmdline = (
                self._forkserver.client_command(str(playbook)) if self._forkserver else (None, None)
            )
            soft.start()
            r = ansible_runner.run(
                private_data_dir=str(pdd),
                artifact_dir=str(artifact_parent),
                ident=ident,
                project_dir=str(self.project_dir),
                playbook=str(playbook),
                extravars=extravars,
                envvars={
                    **self._envvars(active.stop_file, pdd / "tmp"),
                    **run_env(faults or [], pdd / "fault-fired"),
                },
                quiet=True,
                timeout=int(timeout + self.hard_kill_after),
                cancel_callback=active.hard_cancel.is_set,
                event_handler=collector,
                rotate_artifacts=0,
                # No facts are gathered; a fact cache per run would only make each run's
                # environment differ (forkserver.py).
                fact_cache_type=FACT_CACHE,
                binary=binary,
                cmdline=cmdline,
            )
            status, rc = str(r.status), int(r.rc if r.rc is not None else -1)
        finally:
            soft.cancel()
            stopped = active.stop_file.exists()
            fired = pdd / "fault-fired"
            fault = fired.read_text() if fired.exists() else None
            with self._lock:
                self._active.pop(run_id, None)
            shutil.rmtree(pdd, ignore_errors=True)
        duration = time.monotonic() - started
        if rc == STOPPED_RC and stopped:
            status = "stopped"
        if rc != FAULT_RC:
            fault = None
        artifact_dir = artifact_parent / ident
        scrub_artifacts(artifact_dir)
        rotate_artifacts(artifact_parent, keep)
        return RunResult(
            status=status,
            rc=rc,
            duration=duration,
            artifact_dir=artifact_dir,
            stats=collector.stats,
            failed_task=collector.failed_task,
            failed_msg=collector.failed_msg,
            failed_reason=collector.failed_reason,
            fault=fault,
        )


def scrub_artifacts(artifact_dir: Path) -> None:
    """Drop the process environment ansible-runner records in the `command` artifact."""
    command_file = artifact_dir / "command"
    if command_file.exists():
        try:
            data = json.loads(command_file.read_text())
        except ValueError:
            data = {}
        command_file.write_text(
            json.dumps({"command": data.get("command"), "cwd": data.get("cwd")})
        )


def rotate_artifacts(artifact_parent: Path, keep: int) -> None:
    """Keep the `keep` newest run directories (idents sort by start time)."""
    runs = sorted(p for p in artifact_parent.iterdir() if p.is_dir())
    for old in runs[: max(0, len(runs) - keep)]:
        shutil.rmtree(old, ignore_errors=True)
