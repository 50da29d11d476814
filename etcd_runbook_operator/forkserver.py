"""A warm ansible-playbook: one process imports Ansible once, and each run is a fork of it.

ansible-playbook spends about half of a small run importing itself (0.25 s of 0.55 s here),
and the watcher starts one for every run. The fork server is a child process of the watcher
that imports ansible-playbook's modules once; ansible-runner then starts, in place of
ansible-playbook, the small client in forkserver_client.py. The client hands the server its
arguments, working directory, environment and its stdin, stdout and stderr (the pseudo-terminal
ansible-runner reads), and the server forks:

    server --fork--> keeper (holds the client's connection) --fork--> the run

The run is ansible-playbook's own `main()` in a process group of its own; the keeper tells the
client its process ID and, when it ends, its exit status, which the client exits with. Signals
the client gets (ansible-runner's timeout, its cancel) are passed to the run's process group;
if the client dies, the keeper ends the run's process group. (A task's worker starts a session
of its own, as under an ansible-playbook started afresh: it finishes the task it is in.)

Ansible reads its configuration when it is imported. A run whose environment differs from the
server's in anything Ansible reads at import (FROZEN) is not forked from the warm state: the
run then executes the real ansible-playbook with its own environment, as without the server.
Only what changes from run to run and is read later (ERO_STOP_FILE, TMPDIR, ansible-runner's
AWX_ISOLATED_DATA_DIR) may differ. So is the Ansible local temporary directory, made at import:
each run gets its own.

The server imports nothing that starts threads (gRPC is imported by the modules, in the run's
workers): a fork carries only the thread that called it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

CLIENT = Path(__file__).resolve().parent / "forkserver_client.py"
# What a run may set differently from the server and still be forked from it: read at run
# time, never at import.
PER_RUN = frozenset({"ERO_STOP_FILE", "TMPDIR", "AWX_ISOLATED_DATA_DIR", "PWD", "OLDPWD"})
# The largest message either side sends (the arguments, directory and environment of a run).
MAX_MESSAGE = 1 << 20


def frozen_difference(server: Mapping[str, str], run: Mapping[str, str]) -> list[str]:
    """The environment variables Ansible reads at import (its own ANSIBLE_* settings, and
    everything else it or Python may read then) that `run` sets differently from `server`.
    Empty: the run may be forked from the server's warm state."""
    keys = (set(server) | set(run)) - PER_RUN
    return sorted(k for k in keys if server.get(k) != run.get(k))


def send_message(sock: socket.socket, message: dict[str, Any], fds: list[int] = ()) -> None:  # type: ignore[assignment]
    data = json.dumps(message).encode()
    header = len(data).to_bytes(4, "big")
    if fds:
        socket.send_fds(sock, [header + data], list(fds))
    else:
        sock.sendall(header + data)


def receive_message(
    sock: socket.socket, max_fds: int = 0
) -> tuple[dict[str, Any] | None, list[int]]:
    """One message and the file descriptors sent with it; (None, []) when the peer closed."""
    if max_fds:
        data, fds, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE + 4, max_fds)
    else:
        data, fds = sock.recv(4), []
    if not data:
        return None, fds
    while len(data) < 4:
        more = sock.recv(4 - len(data))
        if not more:
            return None, fds
        data += more
    size = int.from_bytes(data[:4], "big")
    if size > MAX_MESSAGE:
        raise ValueError(f"message of {size} bytes")
    body = data[4:]
    while len(body) < size:
        more = sock.recv(size - len(body))
        if not more:
            return None, fds
        body += more
    return json.loads(body[:size]), fds


def ansible_playbook() -> str:
    """The real ansible-playbook, next to this interpreter (venv or image)."""
    return str(Path(sys.executable).parent / "ansible-playbook")


def _preload() -> None:
    """What every run imports, so that no run imports it again: the CLI, the executor, the
    linear strategy and the worker, the action plugins' base, the template engine."""
    import ansible.cli.playbook
    import ansible.executor.playbook_executor
    import ansible.executor.process.worker
    import ansible.executor.task_executor
    import ansible.module_utils.basic
    import ansible.plugins.action
    import ansible.plugins.callback
    import ansible.plugins.strategy.linear
    import ansible.template  # noqa: F401
    import urllib3  # noqa: F401
    import yaml  # noqa: F401


def _run(argv: list[str], cwd: str, env: dict[str, str], frozen: dict[str, str]) -> None:
    """In the run's process: become ansible-playbook with these arguments; never returns."""
    os.setpgid(0, 0)
    os.chdir(cwd)
    differs = frozen_difference(frozen, env)
    if differs:
        # Names only: values may be credentials.
        print(
            f"forkserver: the run sets {', '.join(differs[:5])} otherwise than the server: "
            "starting ansible-playbook afresh",
            file=sys.stderr,
            flush=True,
        )
        os.execve(ansible_playbook(), ["ansible-playbook", *argv], env)
    os.environ.clear()
    # Tells the run, and what it starts, that it was forked from the warm server.
    os.environ.update(env, ERO_FORKED_RUN="1")
    tempfile.tempdir = None
    import atexit
    import random

    from ansible import constants
    from ansible.cli.playbook import main
    from ansible.utils.path import cleanup_tmp_file

    random.seed()
    # Made at import, for the server: each run has its own, removed when it ends.
    atexit.unregister(cleanup_tmp_file)
    parent = os.path.dirname(constants.DEFAULT_LOCAL_TMP)
    constants.DEFAULT_LOCAL_TMP = tempfile.mkdtemp(
        prefix=f"ansible-local-{os.getpid()}", dir=parent
    )
    atexit.register(cleanup_tmp_file, constants.DEFAULT_LOCAL_TMP, warn=True)
    # The streams Python made at the server's start were for its files, not the terminal.
    sys.stdin = open(0, closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.argv = ["ansible-playbook", *argv]
    code = 0
    try:
        main(sys.argv)
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
    # As the interpreter would at exit (the local temporary directory, multiprocessing's
    # cleanup); then out, past the keeper's frames this process was forked inside.
    atexit._run_exitfuncs()
    os._exit(code)


def _keep(conn: socket.socket, frozen: dict[str, str]) -> None:
    """In the keeper: start the run, tell the client its pid and then its exit status; end its
    process group if the client goes away first. Never returns."""
    try:
        request, fds = receive_message(conn, max_fds=3)
        if request is None or len(fds) != 3:
            os._exit(1)
        pid = os.fork()
        if pid == 0:
            conn.close()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
                os.close(fd)
            try:
                _run(list(request["argv"]), str(request["cwd"]), dict(request["env"]), frozen)
            except BaseException:  # nothing may return into the server's code
                import traceback

                traceback.print_exc()
                os._exit(1)
        for fd in fds:
            os.close(fd)
        send_message(conn, {"pid": pid})
        ended = threading.Lock()
        threading.Thread(target=_end_when_client_goes, args=(conn, pid, ended), daemon=True).start()
        # Waited for without reaping first: until it is reaped its process ID (its group's)
        # cannot be taken by another process, and once it is, the thread above no longer acts.
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        ended.acquire()
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        with contextlib.suppress(OSError):
            send_message(conn, {"rc": code})
    finally:
        os._exit(0)


def _end_when_client_goes(conn: socket.socket, pid: int, ended: threading.Lock) -> None:
    """The client says nothing after its request: end of stream means it is gone, and so
    must the run be (unless it has ended: `ended` is then held by the keeper)."""
    with contextlib.suppress(OSError):
        while conn.recv(64):
            pass
    if ended.acquire(blocking=False):
        try:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        finally:
            ended.release()


def serve(path: str) -> None:
    """The server's loop (run as `python -P forkserver.py SOCKET`: it imports only the standard
    library and Ansible)."""
    watcher = os.getppid()
    _preload()
    frozen = dict(os.environ)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(path)
        listener.listen(64)
        # Checked between connections: the server never outlives the watcher that started it.
        listener.settimeout(1.0)
        while os.getppid() == watcher:
            _reap()
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(None)
            if os.fork() == 0:
                listener.close()
                _keep(conn, frozen)
            conn.close()


def _reap() -> None:
    """Waits for the keepers that have ended: their CPU time, and their runs', is then the
    server's children's, where /proc shows it (the benchmarks read it there)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


class ForkServer:
    """The watcher's handle on its fork server: started with the environment runs will have
    (the parts that are the same for every run), restarted if it has died."""

    def __init__(self, env: dict[str, str]) -> None:
        self._env = env
        self._dir = tempfile.mkdtemp(prefix="ero-forkserver-")
        self.socket = os.path.join(self._dir, "socket")
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def ensure(self, wait: float = 0.0) -> str:
        """The socket of a running server (started now if needed). A client that finds no one
        listening yet starts the real ansible-playbook: `wait` is for callers that want the
        server ready first (tests)."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                if self._proc is not None:
                    log.warning(
                        "the ansible fork server ended (%s): starting it again",
                        self._proc.returncode,
                    )
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.socket)
                # By path, with -P: the repository root (beside this package) holds
                # operator.py, which must never shadow the standard library's `operator`.
                self._proc = subprocess.Popen(
                    [sys.executable, "-P", __file__, self.socket],
                    env=self._env,
                    cwd=self._dir,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
        deadline = time.monotonic() + wait
        while not os.path.exists(self.socket) and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.socket

    def client_command(self, playbook: str) -> tuple[str, str]:
        """(binary, cmdline) for ansible-runner: the client, in place of ansible-playbook."""
        return sys.executable, f"-I -S {CLIENT} {self.ensure()} {playbook}"

    def close(self) -> None:
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                self._proc.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._proc.wait(5)
            with contextlib.suppress(OSError):
                os.unlink(self.socket)
                os.rmdir(self._dir)


if __name__ == "__main__":
    serve(sys.argv[1])
