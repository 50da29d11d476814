"""Reconcile one object: finalizer bookkeeping, the skip rule, at most one ansible-runner
run, then status and Events from what the run reported (docs/operator.md has the contract)."""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import Any, NoReturn

from . import conditions, faults
from .config import Target, Watch
from .events import EventRecorder
from .extravars import build_extravars
from .fingerprint import Seen, SkipTracker, fingerprint, urgent_fingerprint
from .inflight import InFlight, run_name
from .informer import ObjKey, obj_key
from .kube import ApiException, Kube, Resource
from .metrics import Metrics
from .proctree import kill_descendants
from .progress import RunProgress
from .runner import PlaybookRunner, RunResult
from .status import now_rfc3339, update_finalizers, update_status
from .workqueue import WorkQueue

log = logging.getLogger(__name__)

# At most one round of mid-run writes (Events, then status) per this many seconds of a run.
PROGRESS_INTERVAL = 2.0
# A failed task's message in the log: enough for a module's error, not a dump of objects.
FAILURE_LOG_LIMIT = 2000


# A runbook waiting out a deadline of its own asks for a run no sooner than this, and no later
# than the longest.
REQUEUE_MIN, REQUEUE_MAX = 1.0, 3600.0


def requeue_after(stats: Any) -> float | None:
    """The seconds a successful run asked to be run again within (`operator_requeue_after`),
    bounded; None when it asked nothing or something that is not a number."""
    value = stats.get("operator_requeue_after") if isinstance(stats, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    if seconds != seconds or seconds <= 0:  # NaN, or nothing to wait for
        return None
    return min(max(seconds, REQUEUE_MIN), REQUEUE_MAX)


def _killed_and_restarted() -> NoReturn:
    """What a SIGKILL and the container's restart do, at once: every process this one started
    is killed, nothing more is written, and a fresh start of the operator replaces this one
    (exec: same command line, in-memory state gone, the state directory kept) without the
    kubelet's back-off between restarts, which several points in one test would wait out."""
    kill_descendants()
    logging.shutdown()
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])


class Reconciler:
    def __init__(
        self,
        kube: Kube,
        watch: Watch,
        resource: Resource,
        runner: PlaybookRunner,
        recorder: EventRecorder,
        metrics: Metrics,
        queue: WorkQueue,
        in_flight: InFlight,
        dependents_of: Callable[[ObjKey], list[Seen]],
        runner_timeout: float,
        shutting_down: threading.Event,
    ) -> None:
        self.kube = kube
        self.watch = watch
        self.resource = resource
        self.runner = runner
        self.recorder = recorder
        self.metrics = metrics
        self.queue = queue
        self.in_flight = in_flight
        self.dependents_of = dependents_of
        self.runner_timeout = runner_timeout
        self.shutting_down = shutting_down
        self.skips = SkipTracker(watch.full_run_interval)

    def reconcile(self, key: ObjKey) -> None:
        namespace, name = key
        try:
            obj = self.kube.get(self.resource.path(namespace, name))
        except ApiException as exc:
            if exc.status == 404:
                self.skips.forget(key)
                self.queue.forget(key)
                self.metrics.forget(self.watch.kind, namespace, name)
                return
            raise
        # As read, before anything is written: a restarted operator's gauges come back with its
        # first look at each object, not with the next status that differs.
        self.metrics.observe(self.watch.kind, obj)
        meta = obj["metadata"]
        fin = self.watch.finalizer
        if meta.get("deletionTimestamp"):
            if fin and fin.name in (meta.get("finalizers") or []):
                urgent = urgent_fingerprint(
                    obj, self.dependents_of(key), self.watch.fingerprint_annotations
                )
                if self.skips.backing_off(key, urgent):
                    self.metrics.reconcile_skipped.labels(self.watch.kind).inc()
                    return
                self._finalize(key, obj, fin.name, fin.target, urgent)
            return
        if fin and fin.name not in (meta.get("finalizers") or []):
            added = update_finalizers(
                self.kube,
                self.resource,
                namespace,
                name,
                lambda f: [*f, fin.name] if fin.name not in f else f,
            )
            if added is None:
                return
            obj = added
        dependents = self.dependents_of(key)
        fp = fingerprint(obj, dependents, self.watch.fingerprint_annotations)
        urgent = urgent_fingerprint(obj, dependents, self.watch.fingerprint_annotations)
        if self.skips.should_skip(key, fp, urgent):
            log.debug(
                "%s %s/%s: nothing changed (or backing off after a failure), playbook skipped",
                self.watch.kind,
                namespace,
                name,
            )
            self.metrics.reconcile_skipped.labels(self.watch.kind).inc()
            self.metrics.reconcile_total.labels(self.watch.kind, "skipped").inc()
            return
        generation = int(obj["metadata"].get("generation") or 0)
        if self.watch.manage_status:
            self._write_status(
                key, lambda o: conditions.before_run(o.get("status"), generation, now_rfc3339())
            )
        self.in_flight.begin(key, generation)
        try:
            result, sent = self._run(obj, self.watch.target, generation)
        finally:
            preempted = self.in_flight.end(key)
        if result is None:
            return
        if preempted and result.status == "stopped":
            # Not a failure: the event that preempted the run queued the object again.
            self.metrics.reconcile_total.labels(self.watch.kind, "preempted").inc()
            self.queue.add(key)
            return
        self._report(key, obj, result, generation, sent)
        if preempted:
            # It ended (done or failed) before its next task boundary, after what preempted
            # it: the fingerprints of its start no longer say what it saw, so the run queued
            # by the preemption is neither skipped nor held back by a backoff.
            self.skips.forget(key)
            self.queue.forget(key)
        elif result.ok:
            look_again = requeue_after(result.stats)
            self.skips.record_success(key, fp, look_again)
            self.queue.forget(key)
            if look_again is not None:
                self.queue.add_after(key, look_again)
        else:
            self.skips.record_failure(key, urgent, self.queue.add_rate_limited(key))

    def _finalize(
        self, key: ObjKey, obj: dict[str, Any], fin_name: str, target: Target, urgent: str
    ) -> None:
        namespace, name = key
        generation = int(obj["metadata"].get("generation") or 0)
        result, sent = self._run(obj, target, generation)
        if result is None:
            return
        self._report(key, obj, result, generation, sent)
        if not result.ok:
            # The finalizer stays: deleting now could orphan data the runbook did not clean up.
            self.skips.record_failure(key, urgent, self.queue.add_rate_limited(key))
            return
        update_finalizers(
            self.kube, self.resource, namespace, name, lambda f: [x for x in f if x != fin_name]
        )
        self.skips.forget(key)
        self.queue.forget(key)

    def _write_status(
        self, key: ObjKey, compute: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> None:
        """update_status, then the object's gauges (metrics.py) set from the status written."""
        written = update_status(self.kube, self.resource, *key, compute)
        if written is not None:
            self.metrics.observe(self.watch.kind, written)

    def _progress(self, obj: dict[str, Any], generation: int) -> RunProgress:
        """Mid-run Events and status of one run of `obj` (progress.py)."""
        namespace, name = obj_key(obj)

        def emit(event: dict[str, Any]) -> None:
            self.recorder.emit(
                obj,
                str(event.get("type", "Normal")),
                str(event["reason"]),
                str(event.get("message", "")),
            )

        def write_status(progress: dict[str, Any], step: dict[str, Any] | None) -> None:
            self._write_status(
                (namespace, name),
                lambda o: conditions.during_run(
                    o.get("status"), generation, progress, step, now_rfc3339()
                ),
            )

        return RunProgress(
            emit, write_status if self.watch.manage_status else None, PROGRESS_INTERVAL
        )

    def _run(
        self, obj: dict[str, Any], target: Target, generation: int
    ) -> tuple[RunResult | None, int]:
        """One ansible-runner run, and how many of its Events were sent while it ran; no result
        when it was stopped for shutdown (not a failure)."""
        meta = obj["metadata"]
        kind = self.watch.kind
        extravars = build_extravars(self.watch, obj, target)
        artifact_parent = (
            self.runner.artifacts_dir
            / kind.lower()
            / (meta.get("namespace") or "_cluster")
            / meta["name"]
        )
        log.info(
            "%s %s/%s: running %s",
            kind,
            meta.get("namespace"),
            meta["name"],
            target.playbook or target.role,
        )
        progress = self._progress(obj, generation)
        uid = str(meta.get("uid") or "")
        ledger = faults.Ledger(self.runner.artifacts_dir / ".fault-points")
        armed = faults.armed(obj, self.watch.group, ledger.fired(uid)) if faults.enabled() else []
        try:
            result = self.runner.run(
                target,
                extravars,
                artifact_parent,
                self.watch.max_runner_artifacts,
                self.runner_timeout,
                name=run_name(obj_key(obj)),
                on_stats=progress,
                faults=armed,
            )
        finally:
            sent = progress.close()
        if result.fault:
            ledger.record(uid, result.fault)
            log.warning(
                "%s %s/%s: fault point %s fired; the operator is killed and starts again",
                kind,
                meta.get("namespace"),
                meta["name"],
                result.fault,
            )
            _killed_and_restarted()
        self.metrics.playbook_duration.labels(kind, result.status).observe(result.duration)
        log.info(
            "%s %s/%s: %s in %.1fs (artifacts %s)",
            kind,
            meta.get("namespace"),
            meta["name"],
            result.status,
            result.duration,
            result.artifact_dir,
        )
        if not result.ok and result.failed_task:
            # Where operator-sdk's users look first (kubectl logs): the failing task and its
            # message, as the Degraded condition carries them (no_log output stays hidden).
            log.warning(
                "%s %s/%s: %s",
                kind,
                meta.get("namespace"),
                meta["name"],
                conditions.short(self._failure_text(result), FAILURE_LOG_LIMIT),
            )
        if result.status == "stopped" and self.shutting_down.is_set():
            self.metrics.reconcile_total.labels(kind, "stopped").inc()
            return None, sent
        if result.status == "stopped" and self.in_flight.is_preempted(obj_key(obj)):
            return result, sent  # counted by reconcile()
        self.metrics.reconcile_total.labels(kind, "success" if result.ok else "failure").inc()
        return result, sent

    def _failure_text(self, result: RunResult) -> str:
        if result.status in ("timeout", "stopped"):
            return (
                f"the playbook exceeded the runner timeout of {self.runner_timeout:.0f}s "
                "and was stopped at a task boundary"
            )
        if result.failed_task:
            return f"task {result.failed_task!r} failed: {result.failed_msg}"
        return f"the playbook failed (status {result.status}, rc {result.rc})"

    def _report(
        self, key: ObjKey, obj: dict[str, Any], result: RunResult, generation: int, sent: int
    ) -> None:
        stats = result.stats if isinstance(result.stats, dict) else {}
        told = stats.get("operator_events") or []
        announced = {
            str(ev["reason"]) for ev in told[:sent] if isinstance(ev, dict) and ev.get("reason")
        }
        for ev in told[sent:]:
            if isinstance(ev, dict) and ev.get("reason"):
                announced.add(str(ev["reason"]))
                self.recorder.emit(
                    obj,
                    str(ev.get("type", "Normal")),
                    str(ev["reason"]),
                    str(ev.get("message", "")),
                )
        failure = "" if result.ok else self._failure_text(result)
        if not result.ok:
            degraded = (stats.get("operator_conditions") or {}).get("Degraded") or {}
            reason = degraded.get("reason") if isinstance(degraded, dict) else None
            message = degraded.get("message") if isinstance(degraded, dict) else None
            # One Warning per failed run: the role's own, when it sent one for this reason.
            reason = reason or result.failed_reason or "RunbookFailed"
            if str(reason) not in announced:
                self.recorder.emit(obj, "Warning", str(reason), str(message or failure))
        if self.watch.manage_status:
            self._write_status(
                key,
                lambda o: conditions.after_run(
                    o.get("status"),
                    generation,
                    result.ok,
                    stats,
                    failure,
                    now_rfc3339(),
                    result.failed_reason or "RunbookFailed",
                ),
            )
