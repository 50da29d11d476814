"""ansible-playbook, as ansible-runner starts it when the watcher has a fork server.

    python -I -S forkserver_client.py SOCKET ANSIBLE-PLAYBOOK-ARGUMENTS...

Hands the fork server (forkserver.py) its arguments, working directory and environment and
its stdin, stdout and stderr; passes the signals it gets to the run's process group; exits as
the run exits. When no server answers it becomes the real ansible-playbook (exec), so a run
never depends on the server being up. Only the standard library, and no site packages (-S): it
starts in a few milliseconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys


def _real(argv: list[str]) -> None:
    path = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    os.execv(path, [path, *argv])


def _read_message(sock: socket.socket) -> dict[str, object] | None:
    data = b""
    while len(data) < 4:
        more = sock.recv(4 - len(data))
        if not more:
            return None
        data += more
    size = int.from_bytes(data, "big")
    body = b""
    while len(body) < size:
        more = sock.recv(size - len(body))
        if not more:
            return None
        body += more
    answer = json.loads(body)
    return answer if isinstance(answer, dict) else None


def main(args: list[str]) -> None:
    path, argv = args[0], args[1:]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        _real(argv)
    request = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    socket.send_fds(sock, [len(request).to_bytes(4, "big") + request], [0, 1, 2])
    started = _read_message(sock)
    if started is None or not isinstance(started.get("pid"), int):
        sys.exit(1)  # the server took the run but could not start it: said on its stderr
    pid = int(started["pid"])  # type: ignore[call-overload]

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    ended = _read_message(sock)
    code = ended.get("rc") if ended else None
    if not isinstance(code, int):
        sys.exit(1)
    if code < 0:  # the run was ended by a signal: so is this process, as its parent expects
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


if __name__ == "__main__":
    main(sys.argv[1:])
