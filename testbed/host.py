"""This machine as the test bed uses it: the checkout, the build cache, etcd's binaries
(hack/etcd-bin), free loopback ports, and child processes that die with this one and are
always stopped."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

from testbed import TestbedError

REPO = Path(__file__).resolve().parent.parent
ETCD_BIN = REPO / "hack" / "etcd-bin"


def cache_root() -> Path:
    """Where hack/ caches what it builds ($ETCD_OPERATOR_CACHE), outside the checkout."""
    default = Path.home() / ".cache" / "etcd-runbook-operator"
    return Path(os.environ.get("ETCD_OPERATOR_CACHE", default))


_bin_dirs: dict[str, Path] = {}


def etcd_bin_dir(version: str) -> Path:
    """Directory holding etcd/etcdctl(/etcdutl) of `version` (3.5 or 3.5.35), built if needed.

    A failed build raises TestbedError with the build's output: a test needing etcd must fail
    loudly, never skip.
    """
    if version not in _bin_dirs:
        proc = subprocess.run([str(ETCD_BIN), version], capture_output=True, text=True)
        if proc.returncode != 0:
            raise TestbedError(f"hack/etcd-bin {version} failed:\n{proc.stderr.strip()}")
        _bin_dirs[version] = Path(proc.stdout.strip().splitlines()[-1])
    return _bin_dirs[version]


_handed_out: set[int] = set()


# Test processes side by side (pytest-xdist's PYTEST_XDIST_WORKER=gwN) each take ports from a
# block of their own, below the kernel's ephemeral range: a port one process found free and
# closed is then never the one another process's kernel hands out before etcd binds it.
_WORKER_BLOCK = 6000
_WORKER_BASE = 20000


def _worker_block() -> range | None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or not worker[2:].isdigit():
        return None
    start = _WORKER_BASE + int(worker[2:]) * _WORKER_BLOCK
    if start + _WORKER_BLOCK > 32768:
        return None
    return range(start, start + _WORKER_BLOCK)


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback port nobody listens on now, never handed out twice by this process."""
    block = _worker_block()
    if block is not None:
        for port in block:
            if port not in _handed_out and _bindable(port):
                _handed_out.add(port)
                return port
        raise TestbedError(f"no free loopback port left in {block}")
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in _handed_out:
            _handed_out.add(port)
            return port
    raise TestbedError("no free loopback port found")


def die_with_parent() -> None:
    """A Popen preexec_fn: the child gets SIGKILL when this process ends, however it ends."""
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def stop_process(proc: subprocess.Popen[Any], grace: float = 10) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds; always reaped."""
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
