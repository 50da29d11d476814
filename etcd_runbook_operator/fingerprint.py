"""The skip rule: do not start ansible-runner when none of a reconcile's inputs changed.

Two fingerprints of what the watcher can see of an object's inputs:

* `fingerprint`: generation, spec, the annotations that matter and the resourceVersion of every
  dependent. After a SUCCESSFUL run the fingerprint taken at its start is recorded; a later
  reconcile with the same fingerprint is skipped while the last full run is younger than
  `max_age`. What the watcher cannot see (the managed system's own state) is why full runs still
  happen every `max_age`. A dependent lost by an outside hand clears what was recorded, and a
  run preempted records nothing: the loss can bring the inputs back to what they were at the
  start of the last run (a member that run made, destroyed again), which must not read as
  "nothing changed".
* `urgent_fingerprint`: only what must never wait: generation, spec, those annotations, and for
  each dependent whether it exists, is being deleted and is ready. After a FAILED run the object
  backs off (exponentially, see WorkQueue.add_rate_limited): reconciles before the retry time are
  skipped unless the urgent fingerprint changed. Status writes, restart counters and the other
  churn of a failing object do not start a run; a spec change or a lost dependent does at once.

A dependent counted `by_spec` (intake.py decides: one that only its `ownerField` maps to the
owner, a person's object such as their scheduled EtcdBackup) enters both fingerprints by what
the owner's runbook decides on: its uid and name (it exists), its generation and whatever it
holds besides metadata and status (its spec), and whether it is being deleted. Never its
resourceVersion or status: its own runbook's status writes start no run of the owner, and never
make a failing owner's reconcile urgent.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


@dataclass(frozen=True, eq=False)
class Seen:
    """A dependent as the skip rule counts it: in full, or only by what its spec says."""

    obj: dict[str, Any]
    by_spec: bool = False


def _by_spec(dependent: dict[str, Any]) -> tuple[str, ...]:
    """Exists (uid, name), its spec (the generation, and the content itself for kinds without
    one or whose data is not under spec), and whether it is being deleted."""
    meta = _meta(dependent)
    content = {k: v for k, v in dependent.items() if k not in ("metadata", "status")}
    digest = hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode())
    return (
        "by-spec",
        meta.get("uid", ""),
        meta.get("name", ""),
        str(meta.get("generation", "")),
        digest.hexdigest(),
        str(bool(meta.get("deletionTimestamp"))),
    )


def _changed(seen: Seen) -> tuple[str, ...]:
    if seen.by_spec:
        return _by_spec(seen.obj)
    # List items carry no kind: the uid tells a Pod from a PVC of the same name.
    meta = _meta(seen.obj)
    return (meta.get("uid", ""), meta.get("name", ""), meta.get("resourceVersion", ""))


def _urgent(seen: Seen) -> tuple[str, ...]:
    """Whether it exists, is being deleted and is ready (a Pod's Ready condition, else the
    object's phase: a claim's Bound). One counted by spec is urgent by the same key as in the
    full fingerprint: a new one, a spec change or a deletion; never its phase."""
    if seen.by_spec:
        return _by_spec(seen.obj)
    dependent = seen.obj
    meta = _meta(dependent)
    status = dependent.get("status") or {}
    ready = next(
        (str(c.get("status")) for c in status.get("conditions") or [] if c.get("type") == "Ready"),
        str(status.get("phase") or ""),
    )
    return (
        meta.get("uid", ""),
        meta.get("name", ""),
        str(bool(meta.get("deletionTimestamp"))),
        ready,
    )


def _fingerprint(
    obj: dict[str, Any],
    dependents: Iterable[Seen],
    annotation_prefixes: Iterable[str],
    dependent_key: Callable[[Seen], tuple[str, ...]],
) -> str:
    meta = _meta(obj)
    prefixes = tuple(annotation_prefixes)
    doc = {
        "generation": meta.get("generation"),
        "spec": obj.get("spec"),
        "annotations": {
            k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith(prefixes)
        },
        "dependents": sorted(dependent_key(d) for d in dependents),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


def fingerprint(
    obj: dict[str, Any], dependents: Iterable[Seen], annotation_prefixes: Iterable[str]
) -> str:
    return _fingerprint(obj, dependents, annotation_prefixes, _changed)


def urgent_fingerprint(
    obj: dict[str, Any], dependents: Iterable[Seen], annotation_prefixes: Iterable[str]
) -> str:
    return _fingerprint(obj, dependents, annotation_prefixes, _urgent)


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

    def backing_off(self, key: Hashable, urgent: str) -> bool:
        """The last run failed, its retry time has not come and nothing urgent changed."""
        with self._lock:
            failed = self._failed.get(key)
        return failed is not None and failed.urgent == urgent and self.clock() < failed.retry_at

    def should_skip(self, key: Hashable, fp: str, urgent: str) -> bool:
        with self._lock:
            failed = self._failed.get(key)
            last = self._last.get(key)
        if failed is not None:
            return self.backing_off(key, urgent)
        return last is not None and last[0] == fp and self.clock() - last[1] < self.max_age

    def record_success(self, key: Hashable, fp: str, look_again: float | None = None) -> None:
        """`look_again`: the run asked to be run again within this many seconds whatever
        changes (a deadline it is waiting out), so its fingerprint stops counting then."""
        started = self.clock()
        if look_again is not None:
            # Dated back so that its age reaches max_age exactly when the run wants to look.
            started -= max(0.0, self.max_age - look_again)
        with self._lock:
            self._last[key] = (fp, started)
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
