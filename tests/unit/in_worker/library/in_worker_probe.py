#!/usr/bin/python
"""A test module for plugins/action/normal.py: reports how it was run, and on request
misbehaves the ways a module can (output on fd 2 and stdout, an atexit handler, an
exception)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: in_worker_probe
short_description: Reports how it was run (tests of plugins/action/normal.py)
description:
  - Returns its process IDs, check and diff mode and the secret it was given (masked by no_log).
options:
  secret:
    description: Returned as given; no_log.
    type: str
  marker:
    description: A file an atexit handler writes its process ID to.
    type: path
  noise:
    description: Write to fd 1 and fd 2 before the result.
    type: bool
    default: false
  fail:
    description: Raise an exception instead of returning.
    type: bool
    default: false
author: etcd runbook operator maintainers
"""

EXAMPLES = r"""
- name: Probe
  in_worker_probe:
    secret: s3cret
"""

RETURN = r"""
pid:
  description: The module's process ID.
  returned: success
  type: int
"""

import atexit
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.in_worker_probe import process_facts


def write_pid(path: str) -> None:
    with open(path, "w") as handle:
        handle.write(str(os.getpid()))


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "secret": {"type": "str", "no_log": True},
            "marker": {"type": "path"},
            "noise": {"type": "bool", "default": False},
            "fail": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    marker = module.params["marker"]
    if marker:
        atexit.register(write_pid, marker)
    if module.params["noise"]:
        os.write(1, b"noise on fd 1\n")
        os.write(2, b"noise on fd 2\n")
    if module.params["fail"]:
        raise RuntimeError("the probe failed on purpose")
    module.warn("a warning from the probe")
    module.exit_json(
        changed=not module.check_mode,
        check_mode=module.check_mode,
        diff_mode=module._diff,
        secret=module.params["secret"],
        **process_facts(),
    )


if __name__ == "__main__":
    main()
