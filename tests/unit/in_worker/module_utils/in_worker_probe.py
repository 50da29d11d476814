"""A module_utils file the probe module imports: found under ansible.module_utils either way."""

from __future__ import annotations

import os
import sys
from typing import Any


def process_facts() -> dict[str, Any]:
    """Whether this runs inside an Ansible worker process (the executor is loaded only there,
    never in a module's own process), and its process ID."""
    return {"in_worker": "ansible.executor.process.worker" in sys.modules, "pid": os.getpid()}
