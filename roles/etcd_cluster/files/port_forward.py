#!/usr/bin/env python3
"""Port-forwards to etcd members through the API server, for runs outside the cluster.

`ensure POD=UID ...` keeps exactly one live `kubectl port-forward` per given Pod (a re-created
Pod has a new UID and gets a new forward), bound to 127.0.0.1 on a free port, and prints
{"endpoints": {pod: "127.0.0.1:port"}, "failed": {pod: reason}} as JSON. `close` ends them.
State lives in --state-dir (the run's private directory). Each kubectl runs under `timeout` so a
forward left behind by a killed run still ends by itself.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REMOTE_PORT = 2379
START_TIMEOUT = 20.0


def _load(state_dir: Path) -> dict[str, dict[str, Any]]:
    path = state_dir / "forwards.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _save(state_dir: Path, state: dict[str, dict[str, Any]]) -> None:
    (state_dir / "forwards.json").write_text(json.dumps(state))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop(entry: dict[str, Any]) -> None:
    # kubectl runs in its own session: end the whole group (timeout + kubectl).
    with contextlib.suppress(OSError):
        os.killpg(int(entry["pid"]), signal.SIGTERM)


def _start(args: argparse.Namespace, pod: str, uid: str) -> dict[str, Any]:
    port = _free_port()
    log = args.state_dir / f"{pod}.log"
    cmd = [
        args.kubectl,
        "port-forward",
        "--namespace",
        args.namespace,
        "--address",
        "127.0.0.1",
        f"pod/{pod}",
        f"{port}:{REMOTE_PORT}",
    ]
    timeout = shutil.which("timeout")
    if timeout:
        cmd = [timeout, "--kill-after=5", str(args.max_seconds), *cmd]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    entry = {"uid": uid, "port": port, "pid": proc.pid}
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            text = log.read_text(errors="replace").strip().splitlines()
            raise RuntimeError(text[-1] if text else f"kubectl exited with {proc.returncode}")
        if _listening(port):
            return entry
        time.sleep(0.2)
    _stop(entry)
    raise RuntimeError(f"kubectl port-forward did not listen within {START_TIMEOUT:.0f}s")


def ensure(args: argparse.Namespace) -> dict[str, Any]:
    wanted = dict(item.split("=", 1) for item in args.pods)
    state = _load(args.state_dir)
    endpoints: dict[str, str] = {}
    failed: dict[str, str] = {}
    for pod in list(state):
        entry = state[pod]
        if wanted.get(pod) != entry["uid"] or not _alive(int(entry["pid"])):
            _stop(entry)
            del state[pod]
    for pod, uid in sorted(wanted.items()):
        if pod not in state:
            try:
                state[pod] = _start(args, pod, uid)
            except (RuntimeError, OSError) as exc:
                failed[pod] = str(exc)
                continue
        endpoints[pod] = f"127.0.0.1:{state[pod]['port']}"
    _save(args.state_dir, state)
    return {"endpoints": endpoints, "failed": failed}


def close(args: argparse.Namespace) -> dict[str, Any]:
    state = _load(args.state_dir)
    for entry in state.values():
        _stop(entry)
    _save(args.state_dir, {})
    return {"closed": sorted(state)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("action", choices=["ensure", "close"])
    parser.add_argument("pods", nargs="*", help="POD=UID of each member to forward to")
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--kubectl", default="kubectl")
    parser.add_argument("--max-seconds", type=int, default=3600)
    args = parser.parse_args()
    if not args.state_dir.is_dir():
        print(json.dumps({"msg": f"state dir {args.state_dir} does not exist"}))
        return 1
    result = ensure(args) if args.action == "ensure" else close(args)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
