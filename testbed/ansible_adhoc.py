"""Run one Ansible module the way a person does: `ansible localhost -m MODULE -a JSON`.

Module tests call `run_module` so each case goes through the real ansible CLI, the repo's
ansible.cfg (library/, module_utils/, the localhost inventory) and a real module process; the
snapshot benchmarks do, so their end-to-end figure includes ansible's start-up. The JSON stdout
callback makes the per-host result machine readable.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

from testbed import TestbedError
from testbed.host import REPO

ANSIBLE = REPO / ".venv" / "bin" / "ansible"


class AdhocError(TestbedError):
    """ansible itself failed before yielding a module result (bad CLI use, parse error)."""


def _command(
    module: str, args: dict[str, Any], check: bool, diff: bool, extra_vars: dict[str, Any]
) -> list[str]:
    cmd = [str(ANSIBLE), "localhost", "-m", module, "-a", json.dumps(args)]
    if extra_vars:
        cmd += ["-e", json.dumps(extra_vars)]
    if check:
        cmd.append("--check")
    if diff:
        cmd.append("--diff")
    return cmd


def _env(extra: dict[str, str]) -> dict[str, str]:
    return dict(
        os.environ,
        **extra,
        ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_STDOUT_CALLBACK="json",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
    )


def run_module(
    module: str,
    args: dict[str, Any],
    *,
    check: bool = False,
    diff: bool = False,
    timeout: float = 120,
    extra_vars: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run `module` on localhost with `args`; return its result dict for localhost.

    The dict is what the module returned as ansible reports it (`failed`, `changed`, `msg`,
    `diff` when asked for, the module's own keys). A module failure is a normal return with
    `failed: True`; AdhocError is raised only when ansible produced no result at all.
    """
    proc = subprocess.run(
        _command(module, args, check, diff, extra_vars or {}),
        cwd=REPO,
        env=_env(env or {}),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    try:
        report = json.loads(proc.stdout)
        result = report["plays"][0]["tasks"][0]["hosts"]["localhost"]
    except (ValueError, KeyError, IndexError) as exc:
        raise AdhocError(
            f"ansible -m {module} gave no result (rc={proc.returncode}):\n"
            f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
        ) from exc
    if not isinstance(result, dict):
        raise AdhocError(f"ansible -m {module}: unexpected result {result!r}")
    return result
