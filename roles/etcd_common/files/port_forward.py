#!/usr/bin/env python3
"""Port-forwards to etcd members through the API server, for runs outside the cluster.

`ensure POD=UID ...` keeps exactly one live `kubectl port-forward` per given Pod (a re-created
Pod has a new UID and gets a new forward), bound to 127.0.0.1 on a free port, and prints
{"endpoints": {pod: "127.0.0.1:port"}, "failed": {pod: reason}} as JSON. `close` ends them
and removes the state directory. State lives in --state-dir (the run's private directory).
Each forward is a small supervisor that restarts kubectl on the same port when it exits (it
does when the member's container restarts) and ends when the state dir is removed or after
--max-seconds, so a forward left behind by a killed run still ends by itself.
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
MAX_FAILURES = 30  # kubectl exits within 10s this many times in a row: give up


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


def _spawn(args: argparse.Namespace, pod: str, uid: str) -> tuple[dict[str, Any], Any]:
    """Start a supervisor for one pod's forward (it listens a little later)."""
    port = _free_port()
    cmd = [
        sys.executable,
        __file__,
        "supervise",
        "--state-dir",
        str(args.state_dir),
        "--namespace",
        args.namespace,
        "--kubectl",
        args.kubectl,
        "--max-seconds",
        str(args.max_seconds),
        "--port",
        str(port),
        pod,
    ]
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return {"uid": uid, "port": port, "pid": proc.pid}, proc


def _await(
    args: argparse.Namespace, started: dict[str, tuple[dict[str, Any], Any]]
) -> dict[str, str]:
    """Wait (together, bounded) until each new forward listens; returns pod -> failure."""
    failed: dict[str, str] = {}
    pending = dict(started)
    deadline = time.monotonic() + START_TIMEOUT
    while pending and time.monotonic() < deadline:
        for pod, (entry, proc) in list(pending.items()):
            if proc.poll() is not None:
                failed[pod] = f"port-forward supervisor exited with {proc.returncode}"
                del pending[pod]
            elif _listening(int(entry["port"])):
                del pending[pod]
        time.sleep(0.2)
    for pod, (entry, _proc) in pending.items():
        _stop(entry)
        log = args.state_dir / f"{pod}.log"
        text = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
        failed[pod] = text[-1] if text else f"no port-forward within {START_TIMEOUT:.0f}s"
    return failed


def supervise(args: argparse.Namespace) -> int:
    """Keep `kubectl port-forward` running on one fixed local port (kubectl exits when the
    container restarts) until the run's state dir is gone, the time bound passes or SIGTERM."""
    pod = args.pods[0]
    deadline = time.monotonic() + args.max_seconds
    cmd = [
        args.kubectl,
        "port-forward",
        "--namespace",
        args.namespace,
        "--address",
        "127.0.0.1",
        f"pod/{pod}",
        f"{args.port}:{REMOTE_PORT}",
    ]
    # The context the run's modules use (a break-glass playbook's `-e context=`): kubectl
    # does not read kubernetes.core's variable itself.
    if os.environ.get("K8S_AUTH_CONTEXT"):
        cmd[1:1] = ["--context", os.environ["K8S_AUTH_CONTEXT"]]
    child: list[subprocess.Popen[bytes]] = []

    def on_term(signum: int, frame: object) -> None:
        for proc in child:
            proc.terminate()
        sys.exit(0)

    signal.signal(signal.SIGTERM, on_term)
    failures = 0
    # A run killed before its cleanup leaves the state dir behind: stop once the forward keeps
    # failing (the Pod or namespace is gone) instead of waiting for the time bound.
    while time.monotonic() < deadline and args.state_dir.is_dir() and failures < MAX_FAILURES:
        began = time.monotonic()
        with (args.state_dir / f"{pod}.log").open("ab") as out:
            child[:] = [subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out)]
        while child[0].poll() is None:
            if time.monotonic() > deadline or not args.state_dir.is_dir():
                child[0].terminate()
                return 0
            time.sleep(0.5)
        failures = failures + 1 if time.monotonic() - began < 10 else 0
        time.sleep(1.0)
    return 0


def ensure(args: argparse.Namespace) -> dict[str, Any]:
    wanted = dict(item.split("=", 1) for item in args.pods)
    state = _load(args.state_dir)
    for pod in list(state):
        entry = state[pod]
        if wanted.get(pod) != entry["uid"] or not _alive(int(entry["pid"])):
            _stop(entry)
            del state[pod]
    started = {pod: _spawn(args, pod, uid) for pod, uid in wanted.items() if pod not in state}
    failed = _await(args, started)
    state.update({pod: entry for pod, (entry, _proc) in started.items() if pod not in failed})
    _save(args.state_dir, state)
    endpoints = {pod: f"127.0.0.1:{state[pod]['port']}" for pod in sorted(state)}
    return {"endpoints": endpoints, "failed": failed}


def close(args: argparse.Namespace) -> dict[str, Any]:
    """End every forward and remove the run's directory (the supervisors stop on its own
    absence too, should a signal be missed)."""
    state = _load(args.state_dir)
    for entry in state.values():
        _stop(entry)
    shutil.rmtree(args.state_dir, ignore_errors=True)
    return {"closed": sorted(state)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("action", choices=["ensure", "close", "supervise"])
    parser.add_argument("pods", nargs="*", help="POD=UID of each member to forward to")
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--kubectl", default="kubectl")
    parser.add_argument("--max-seconds", type=int, default=3600)
    parser.add_argument("--port", type=int, default=0, help="supervise: the local port")
    args = parser.parse_intermixed_args()
    if not args.state_dir.is_dir():
        print(json.dumps({"msg": f"state dir {args.state_dir} does not exist"}))
        return 1
    if args.action == "supervise":
        return supervise(args)
    result = ensure(args) if args.action == "ensure" else close(args)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
