"""Which objects have a run in flight, shared by the intake (which preempts a run when a
member is lost or the spec changes) and the reconcile (which begins and ends runs). Below
both, so neither imports the other (the layers in pyproject.toml's import-linter contracts).
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from .informer import ObjKey

log = logging.getLogger(__name__)


class Stopper(Protocol):
    """What preemption needs of the runner: ask a named run to stop at its next task
    boundary; whether it was running."""

    def stop_at_task_boundary(self, name: str) -> bool: ...


def run_name(key: ObjKey) -> str:
    return f"{key[0]}/{key[1]}"


class InFlight:
    """Which objects have a run in flight (and for which generation), and which of those runs
    were asked to stop early."""

    def __init__(self, runner: Stopper, kind: str) -> None:
        self._runner = runner
        self._kind = kind
        self._lock = threading.Lock()
        self._running: dict[ObjKey, int] = {}
        self._preempted: set[ObjKey] = set()

    def begin(self, key: ObjKey, generation: int) -> None:
        with self._lock:
            self._running[key] = generation

    def end(self, key: ObjKey) -> bool:
        """The run of `key` is over; returns whether it had been preempted."""
        with self._lock:
            self._running.pop(key, None)
            preempted = key in self._preempted
            self._preempted.discard(key)
        return preempted

    def older_than(self, key: ObjKey, generation: int) -> bool:
        with self._lock:
            return key in self._running and generation > self._running[key]

    def is_preempted(self, key: ObjKey) -> bool:
        with self._lock:
            return key in self._preempted

    def preempt(self, key: ObjKey, why: str) -> None:
        with self._lock:
            if key not in self._running or key in self._preempted:
                return
            self._preempted.add(key)
        if self._runner.stop_at_task_boundary(run_name(key)):
            log.info(
                "%s %s/%s: %s; the run in flight stops at its next task boundary",
                self._kind,
                *key,
                why,
            )
