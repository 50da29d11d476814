# Loaded by ansible-playbook (not by the watcher) from ANSIBLE_CALLBACK_PLUGINS.
"""Stop a playbook run at a task boundary when the watcher asks for it.

The watcher creates the file named by $ERO_STOP_FILE to ask a run to stop (SIGTERM after the
grace period, soft timeout, lost leadership, a lost member to handle first). Ansible calls
`v2_playbook_on_task_start` in the controller process before it hands the task to a worker; with
the linear strategy every worker of the previous task has returned by then, so exiting here never
cuts a module in half.

A test may also arm fault points ($ERO_FAULT_POINTS, etcd_runbook_operator/faults.py): at the
one it names, before a task starts or after it ended ok, the run exits with FAULT_RC, having
written the point's name to $ERO_FAULT_FIRED, and the watcher then ends its own process.

A wait (an `until` loop) is one task and can last minutes. A task tagged `interruptible` declares
that its attempts only read, so between two attempts (`v2_runner_retry`) the run may also stop:
the worker, which is sleeping or reading, is ended first.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
from typing import Any

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: ero_task_boundary
    type: aggregate
    short_description: Exit at the next task boundary when a stop file exists
    description:
      - Used by the etcd runbook operator's watcher for clean shutdown and timeouts.
    requirements:
      - the ERO_STOP_FILE environment variable
"""

# Exit status the watcher recognises as "stopped at a task boundary".
STOPPED_RC = 75
# ... and as "a fault point fired" (etcd_runbook_operator/faults.py).
FAULT_RC = 76
INTERRUPTIBLE_TAG = "interruptible"


class CallbackModule(CallbackBase):  # type: ignore[misc]  # ansible-core ships no types
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "ero_task_boundary"
    CALLBACK_NEEDS_ENABLED = True

    @staticmethod
    def _stop_requested() -> bool:
        stop_file = os.environ.get("ERO_STOP_FILE")
        return bool(stop_file and os.path.exists(stop_file))

    @staticmethod
    def _exit(why: str) -> None:
        sys.stdout.write(f"\nero_task_boundary: stop requested {why}\n")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(STOPPED_RC)

    def _maybe_stop(self, task: object) -> None:
        if self._stop_requested():
            self._exit(f"before task {task}")

    @staticmethod
    def _fault(when: str, task: Any) -> None:
        """Exit at an armed fault point: `when` is before or after `task`."""
        armed = os.environ.get("ERO_FAULT_POINTS")
        if not armed:
            return
        # The task's own name: get_name() puts "<role> : " before it in a role.
        name = str(getattr(task, "name", "") or "")
        for point in json.loads(armed):
            if point["when"] == when and name.startswith(point["task"]):
                with open(os.environ["ERO_FAULT_FIRED"], "w", encoding="utf-8") as fired:
                    fired.write(point["name"])
                sys.stdout.write(
                    f"\nero_task_boundary: fault point {point['name']} ({when} {name})\n"
                )
                sys.stdout.flush()
                os._exit(FAULT_RC)

    def v2_runner_on_ok(self, result: Any) -> None:
        self._fault("after", getattr(result, "_task", ""))

    def v2_runner_retry(self, result: Any) -> None:
        task = getattr(result, "_task", None)
        if INTERRUPTIBLE_TAG not in (getattr(task, "tags", None) or []):
            return
        if self._stop_requested():
            for worker in multiprocessing.active_children():
                worker.kill()
            self._exit(f"between the attempts of {task}")

    def v2_playbook_on_task_start(self, task: object, is_conditional: bool) -> None:
        self._fault("before", task)
        self._maybe_stop(task)

    def v2_playbook_on_handler_task_start(self, task: object) -> None:
        self._maybe_stop(task)
