# Loaded by ansible-playbook (not by the watcher) from ANSIBLE_CALLBACK_PLUGINS.
"""Stop a playbook run at a task boundary when the watcher asks for it.

The watcher creates the file named by $ERO_STOP_FILE to ask a run to stop (SIGTERM after the
grace period, soft timeout, lost leadership). Ansible calls `v2_playbook_on_task_start` in the
controller process before it hands the task to a worker; with the linear strategy every worker
of the previous task has returned by then, so exiting here never cuts a module in half.
"""

from __future__ import annotations

import os
import sys

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


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "ero_task_boundary"
    CALLBACK_NEEDS_ENABLED = True

    def _maybe_stop(self, task: object) -> None:
        stop_file = os.environ.get("ERO_STOP_FILE")
        if stop_file and os.path.exists(stop_file):
            sys.stdout.write(f"\nero_task_boundary: stop requested before task {task}\n")
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(STOPPED_RC)

    def v2_playbook_on_task_start(self, task: object, is_conditional: bool) -> None:
        self._maybe_stop(task)

    def v2_playbook_on_handler_task_start(self, task: object) -> None:
        self._maybe_stop(task)
