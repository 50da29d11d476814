"""Ending every process the watcher's runs started, wherever they went.

ansible-playbook runs each task in a worker that starts a session of its own (os.setsid), and
this project's modules run inside that worker: a run ended by killing its process group, as
ansible-runner's cancel does, leaves the task it was in running on to its end (a membership
change, a wait of minutes). When runs must be over now (the watcher lost its Lease and another
replica may lead soon), every process descended from the watcher is frozen, then killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections import defaultdict
from pathlib import Path

PROC = Path("/proc")
# Rounds of looking for new descendants while freezing: each round stops the processes found,
# so a round finds new ones only where a process forked between two looks.
ROUNDS = 20


def parents(proc: Path = PROC) -> dict[int, int]:
    """Each process ID and its parent's, as /proc shows them now."""
    found = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
        except OSError:  # gone meanwhile
            continue
        # The command name may hold spaces and parentheses: the fields after it are plain.
        fields = stat[stat.rindex(b")") + 2 :].split()
        found[int(entry.name)] = int(fields[1])
    return found


def descendants(root: int, parent_of: dict[int, int]) -> set[int]:
    """The processes whose chain of parents leads to `root` (not `root` itself)."""
    children: dict[int, list[int]] = defaultdict(list)
    for pid, parent in parent_of.items():
        if pid != parent:
            children[parent].append(pid)
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)


def kill_descendants(root: int | None = None) -> int:
    """SIGKILL every process descended from `root` (default: this process); the number
    killed. They are first frozen (SIGSTOP), looking again until no new one appears: a frozen
    process neither forks nor exits, so none of its children escapes to another parent
    before it is found, whatever session or process group it made for itself."""
    root = os.getpid() if root is None else root
    frozen: set[int] = set()
    for _ in range(ROUNDS):
        new = descendants(root, parents()) - frozen
        if not new:
            break
        for pid in new:
            _signal(pid, signal.SIGSTOP)
        frozen |= new
    for pid in frozen:
        _signal(pid, signal.SIGKILL)
    return len(frozen)
