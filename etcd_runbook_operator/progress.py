"""What a run in flight tells, written while it runs (docs/operator.md, "Progress").

A run's set_stats reach the watcher as they happen (ansible-runner's event handler). Events
(`operator_events`) are sent then, not at the end of a run that may take minutes, and the
object's status takes the run's latest look (`operator_progress`) with Progressing naming the
latest announced step, so `kubectl get -w` follows a scale or a roll. The event handler only
records: a thread of the run's own does the API calls, at most one round every `interval`
seconds, so a slow API server never holds up the playbook. The end of the run is reported as
before; the Events already sent are not sent again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

# Events and status of one run; `step` is the latest Event, None when none came.
Emit = Callable[[dict[str, Any]], None]
WriteStatus = Callable[[dict[str, Any], "dict[str, Any] | None"], None]


class RunProgress:
    def __init__(self, emit: Emit, write_status: WriteStatus | None, interval: float) -> None:
        self._emit = emit
        self._write_status = write_status
        self._interval = interval
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._events: list[Any] = []  # told, not yet sent
        self._progress: dict[str, Any] | None = None  # the latest look, not yet written
        self._step: dict[str, Any] | None = None
        self._sent = 0
        self._events_failed = False
        self._thread = threading.Thread(target=self._loop, name="run-progress", daemon=True)
        self._thread.start()

    def __call__(self, told: dict[str, Any]) -> None:
        """One set_stats of the run (from the event handler): record it, wake the writer."""
        events = told.get("operator_events")
        progress = told.get("operator_progress")
        with self._lock:
            if isinstance(events, list):
                self._events.extend(events)
            if isinstance(progress, dict):
                self._progress = progress
        if isinstance(events, list) or isinstance(progress, dict):
            self._wake.set()

    def close(self, timeout: float = 60.0) -> int:
        """Stop writing; how many of the run's `operator_events` were already sent (the first
        ones, in order: set_stats concatenates the lists in the order they were told)."""
        self._closing.set()
        self._wake.set()
        self._thread.join(timeout)
        with self._lock:
            return self._sent

    def _loop(self) -> None:
        while True:
            self._wake.wait()
            if self._closing.is_set():
                return
            self._wake.clear()
            with self._lock:
                events, self._events = self._events, []
                progress, self._progress = self._progress, None
            self._send(events, progress)
            if self._closing.wait(self._interval):
                return

    def _send(self, events: list[Any], progress: dict[str, Any] | None) -> None:
        # Sent Events stay a prefix of what the run told: after a failure or once closing, the
        # end of the run sends the rest, in order.
        for event in events:
            if self._closing.is_set() or self._events_failed:
                break
            if isinstance(event, dict) and event.get("reason"):
                try:
                    self._emit(event)
                except Exception:
                    log.exception("sending a run's Event while in flight failed")
                    self._events_failed = True
                    break
                self._step = event
            with self._lock:
                self._sent += 1
        if self._write_status is None or (progress is None and not events):
            return
        try:
            self._write_status(progress or {}, self._step)
        except Exception:  # a courtesy: the end of the run writes the whole status again
            log.exception("writing a run's status while in flight failed")
