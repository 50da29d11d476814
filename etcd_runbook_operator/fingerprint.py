"""The skip rule: do not start ansible-runner when none of a reconcile's inputs changed.

Two fingerprints of what the watcher can see of an object's inputs:

* `fingerprint`: generation, spec, the annotations that matter and the resourceVersion of every
  dependent. After a SUCCESSFUL run the fingerprint taken at its start is recorded; a later
  reconcile with the same fingerprint is skipped while the last full run is younger than
  `max_age`. What the watcher cannot see (the managed system's own state) is why full runs still
  happen every `max_age`.
* `urgent_fingerprint`: only what must never wait: generation, spec, those annotations, and for
  each dependent whether it exists, is being deleted and is ready. After a FAILED run the object
  backs off (exponentially, see WorkQueue.add_rate_limited): reconciles before the retry time are
  skipped unless the urgent fingerprint changed. Status writes, restart counters and the other
  churn of a failing object do not start a run; a spec change or a lost dependent does at once.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any


def _digest(doc: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


def _inputs(obj: dict[str, Any], annotation_prefixes: Iterable[str]) -> dict[str, Any]:
    meta = obj.get("metadata", {})
    prefixes = tuple(annotation_prefixes)
    return {
        "generation": meta.get("generation"),
        "spec": obj.get("spec"),
        "annotations": {
            k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith(prefixes)
        },
    }


def fingerprint(
    obj: dict[str, Any],
    dependents: Iterable[dict[str, Any]],
    annotation_prefixes: Iterable[str],
) -> str:
    deps = sorted(
        (
            # List items carry no kind: the uid tells a Pod from a PVC of the same name.
            d.get("metadata", {}).get("uid", ""),
            d.get("metadata", {}).get("name", ""),
            d.get("metadata", {}).get("resourceVersion", ""),
        )
        for d in dependents
    )
    return _digest({**_inputs(obj, annotation_prefixes), "dependents": deps})


def _ready(dependent: dict[str, Any]) -> str:
    """A Pod's Ready condition, else the object's phase (a claim's Bound), else ''."""
    status = dependent.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready":
            return str(cond.get("status"))
    return str(status.get("phase") or "")


def urgent_fingerprint(
    obj: dict[str, Any],
    dependents: Iterable[dict[str, Any]],
    annotation_prefixes: Iterable[str],
) -> str:
    deps = sorted(
        (
            d.get("metadata", {}).get("uid", ""),
            d.get("metadata", {}).get("name", ""),
            bool(d.get("metadata", {}).get("deletionTimestamp")),
            _ready(d),
        )
        for d in dependents
    )
    return _digest({**_inputs(obj, annotation_prefixes), "dependents": deps})


@dataclass(frozen=True)
class _Failure:
    urgent: str
    retry_at: float


class SkipTracker:
    def __init__(self, max_age: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_age = max_age
        self.clock = clock
        self._last: dict[Hashable, tuple[str, float]] = {}
        self._failed: dict[Hashable, _Failure] = {}
        self._lock = threading.Lock()

    def should_skip(self, key: Hashable, fp: str, urgent: str) -> bool:
        with self._lock:
            failed = self._failed.get(key)
            last = self._last.get(key)
        if failed is not None:
            return failed.urgent == urgent and self.clock() < failed.retry_at
        return last is not None and last[0] == fp and self.clock() - last[1] < self.max_age

    def record_success(self, key: Hashable, fp: str) -> None:
        with self._lock:
            self._last[key] = (fp, self.clock())
            self._failed.pop(key, None)

    def record_failure(self, key: Hashable, urgent: str, delay: float) -> None:
        """Back off: until `delay` seconds from now only an urgent change starts a run."""
        with self._lock:
            self._last.pop(key, None)
            self._failed[key] = _Failure(urgent, self.clock() + delay)

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._last.pop(key, None)
            self._failed.pop(key, None)
