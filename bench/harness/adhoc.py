"""One Ansible module run the way a person runs it: `ansible localhost -m MODULE -a JSON`, with
the repository's ansible.cfg, so a benchmark's end-to-end figure includes ansible's start-up."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
ANSIBLE = REPO / ".venv" / "bin" / "ansible"


def run_module(module: str, args: dict[str, Any], timeout: float) -> dict[str, Any]:
    """The module's result for localhost as ansible reports it (`failed`, `changed`, its own
    keys); RuntimeError when ansible gave no result at all."""
    proc = subprocess.run(
        [str(ANSIBLE), "localhost", "-m", module, "-a", json.dumps(args)],
        cwd=REPO,
        env=dict(
            os.environ,
            ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
            # The JSON stdout callback makes the result machine readable.
            ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
            ANSIBLE_STDOUT_CALLBACK="json",
            ANSIBLE_NOCOLOR="1",
            ANSIBLE_FORCE_COLOR="0",
        ),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    try:
        result = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    except (ValueError, KeyError, IndexError) as exc:
        raise RuntimeError(
            f"ansible -m {module} gave no result (rc={proc.returncode}):\n"
            f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
        ) from exc
    if not isinstance(result, dict):
        raise RuntimeError(f"ansible -m {module}: unexpected result {result!r}")
    return result
