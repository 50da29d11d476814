"""One controller per watches.yaml entry: informers feed a work queue, workers reconcile.

A reconcile of one object: finalizer bookkeeping, the skip rule, at most one ansible-runner run,
then status and Events from what the run reported (docs/operator.md has the whole contract).

A dependent of a kind marked `preemptOnLoss` in watches.yaml (for etcd: a member Pod) that is
deleted by someone else while the object's reconcile run is in flight preempts that run: it
stops at its next task boundary (or between the attempts of an interruptible wait) and the
object is reconciled again at once, so a lost member is brought back in seconds instead of after
whatever the run was doing. The runbook marks what it deletes itself with the annotation named
by `preemptionOptOutAnnotation`; those never preempt. A new generation
of the object (its spec changed) preempts the same way: a run waiting for a learner that never
starts gives way at once to the run that cancels it (a lower spec.size).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

from . import conditions
from .config import Target, Watch
from .events import EventRecorder
from .extravars import build_extravars
from .fingerprint import SkipTracker, fingerprint, urgent_fingerprint
from .informer import Informer, ObjKey, obj_key
from .kube import ApiException, Kube, Resource
from .metrics import Metrics
from .runner import PlaybookRunner, RunResult
from .status import now_rfc3339, update_finalizers, update_status
from .workqueue import WorkQueue

log = logging.getLogger(__name__)

# UIDs of lost dependents already acted on, so the later events of one deletion do not preempt
# again.
_SEEN_DELETIONS = 1024


def owner_key(obj: dict[str, Any], watch: Watch) -> ObjKey | None:
    """The primary object a dependent belongs to: controller ownerReference, else the label."""
    meta = obj.get("metadata", {})
    namespace = meta.get("namespace") or ""
    for ref in meta.get("ownerReferences") or []:
        group = str(ref.get("apiVersion", "")).split("/")[0]
        if ref.get("controller") and ref.get("kind") == watch.kind and group == watch.group:
            return (namespace, ref["name"])
    owner = (meta.get("labels") or {}).get(watch.owner_label) if watch.owner_label else None
    return (namespace, owner) if owner else None


def run_name(key: ObjKey) -> str:
    return f"{key[0]}/{key[1]}"


class Controller:
    def __init__(
        self,
        kube: Kube,
        watch: Watch,
        resource: Resource,
        runner: PlaybookRunner,
        recorder: EventRecorder,
        metrics: Metrics,
        namespaces: list[str | None],
        runner_timeout: float,
        workers: int,
        queue: WorkQueue | None = None,
    ) -> None:
        self.kube = kube
        self.watch = watch
        self.resource = resource
        self.runner = runner
        self.recorder = recorder
        self.metrics = metrics
        self.runner_timeout = runner_timeout
        self.workers = workers
        self.queue = queue or WorkQueue()
        self.skips = SkipTracker(watch.full_run_interval)
        self.shutting_down = threading.Event()
        self._threads: list[threading.Thread] = []
        self._worker_threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._running: dict[ObjKey, int] = {}  # key -> generation the run in flight acts on
        self._preempted: set[ObjKey] = set()
        self._deletions_seen: deque[str] = deque(maxlen=_SEEN_DELETIONS)
        self.primary = [
            Informer(
                kube,
                resource,
                self._on_primary,
                ns,
                watch.selector,
                on_restart=self._restart_counter(resource),
            )
            for ns in namespaces
        ]
        self.dependents = [
            Informer(
                kube,
                res,
                self._on_losable if dep.preempt_on_loss else self._on_dependent,
                ns,
                watch.dependent_selector,
                on_restart=self._restart_counter(res),
            )
            for dep in (watch.dependents if watch.watch_dependent_resources else ())
            for res in [Resource(dep.group, dep.version, dep.plural, dep.kind)]
            for ns in namespaces
        ]

    def _restart_counter(self, resource: Resource) -> Any:
        counter = self.metrics.watch_restarts
        return lambda reason: counter.labels(resource.plural, reason).inc()

    # --- event intake -------------------------------------------------------------------------
    def _enqueue(self, key: ObjKey) -> None:
        self.queue.add(key)
        self.metrics.queue_depth.labels(self.watch.kind).set(self.queue.depth())

    def _on_primary(self, event: str, obj: dict[str, Any]) -> None:
        key = obj_key(obj)
        generation = int(obj.get("metadata", {}).get("generation") or 0)
        with self._lock:
            newer = key in self._running and generation > self._running[key]
        if newer:
            self._preempt(key, f"generation {generation} of the spec")
        self._enqueue(key)

    def _on_dependent(self, event: str, obj: dict[str, Any]) -> None:
        key = owner_key(obj, self.watch)
        if key:
            self._enqueue(key)

    def _on_losable(self, event: str, obj: dict[str, Any]) -> None:
        key = owner_key(obj, self.watch)
        if key and self._lost_by_outside_hand(event, obj):
            what = f"{obj.get('kind', 'dependent')} {obj['metadata'].get('name')}"
            self._preempt(key, f"{what} deleted")
        self._on_dependent(event, obj)

    def _lost_by_outside_hand(self, event: str, obj: dict[str, Any]) -> bool:
        """First sight of a deletion of this dependent that the runbook did not make itself."""
        meta = obj.get("metadata", {})
        if event != "DELETED" and not meta.get("deletionTimestamp"):
            return False
        if self.watch.preemption_opt_out_annotation in (meta.get("annotations") or {}):
            return False
        uid = str(meta.get("uid") or meta.get("name"))
        with self._lock:
            if uid in self._deletions_seen:
                return False
            self._deletions_seen.append(uid)
        return True

    def _preempt(self, key: ObjKey, why: str) -> None:
        with self._lock:
            if key not in self._running or key in self._preempted:
                return
            self._preempted.add(key)
        if self.runner.stop_at_task_boundary(run_name(key)):
            log.info(
                "%s %s/%s: %s; the run in flight stops at its next task boundary",
                self.watch.kind,
                *key,
                why,
            )

    def _is_preempted(self, key: ObjKey) -> bool:
        with self._lock:
            return key in self._preempted

    def dependents_of(self, key: ObjKey) -> list[dict[str, Any]]:
        return [
            d for inf in self.dependents for d in inf.items() if owner_key(d, self.watch) == key
        ]

    # --- lifecycle ----------------------------------------------------------------------------
    def synced(self) -> bool:
        return all(inf.synced.is_set() for inf in self.primary + self.dependents)

    def healthy(self) -> bool:
        return all(t.is_alive() for t in self._threads)

    def start(self, stop: threading.Event) -> None:
        for inf in self.primary + self.dependents:
            self._threads.append(inf.start(stop))
        resync = threading.Thread(target=self._resync, args=(stop,), name="resync", daemon=True)
        resync.start()
        self._threads.append(resync)
        for i in range(self.workers):
            t = threading.Thread(
                target=self._work, name=f"worker-{self.watch.kind}-{i}", daemon=True
            )
            t.start()
            self._worker_threads.append(t)
        self._threads.extend(self._worker_threads)

    def _resync(self, stop: threading.Event) -> None:
        while not stop.wait(self.watch.reconcile_period):
            for inf in self.primary:
                for obj in inf.items():
                    self._enqueue(obj_key(obj))

    def _work(self) -> None:
        while (key := self.queue.get()) is not None:
            try:
                self.reconcile(key)  # type: ignore[arg-type]
            except Exception:
                log.exception("%s %s: reconcile crashed", self.watch.kind, key)
                self.metrics.reconcile_total.labels(self.watch.kind, "failure").inc()
                self.queue.add_rate_limited(key)
            finally:
                self.queue.done(key)
                self.metrics.queue_depth.labels(self.watch.kind).set(self.queue.depth())

    def stop_intake(self) -> None:
        """Stop taking new work; runs in flight go on."""
        self.shutting_down.set()
        self.queue.shutdown()

    def wait_idle(self, timeout: float | None) -> bool:
        """Wait for the workers to leave; the timeout bounds the whole wait, not each join."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for t in self._worker_threads:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._worker_threads)

    # --- reconcile ----------------------------------------------------------------------------
    def reconcile(self, key: ObjKey) -> None:
        namespace, name = key
        try:
            obj = self.kube.get(self.resource.path(namespace, name))
        except ApiException as exc:
            if exc.status == 404:
                self.skips.forget(key)
                self.queue.forget(key)
                return
            raise
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
            update_status(
                self.kube,
                self.resource,
                namespace,
                name,
                lambda o: conditions.before_run(o.get("status"), generation, now_rfc3339()),
            )
        with self._lock:
            self._running[key] = generation
        try:
            result = self._run(obj, self.watch.target)
        finally:
            with self._lock:
                self._running.pop(key, None)
                preempted = key in self._preempted
                self._preempted.discard(key)
        if result is None:
            return
        if preempted and result.status == "stopped":
            # Not a failure: the Pod event that preempted the run queued the object again.
            self.metrics.reconcile_total.labels(self.watch.kind, "preempted").inc()
            self.queue.add(key)
            return
        self._report(key, obj, result, generation)
        if result.ok:
            self.skips.record_success(key, fp)
            self.queue.forget(key)
        else:
            self.skips.record_failure(key, urgent, self.queue.add_rate_limited(key))

    def _finalize(
        self, key: ObjKey, obj: dict[str, Any], fin_name: str, target: Target, urgent: str
    ) -> None:
        namespace, name = key
        generation = int(obj["metadata"].get("generation") or 0)
        result = self._run(obj, target)
        if result is None:
            return
        self._report(key, obj, result, generation)
        if not result.ok:
            # The finalizer stays: deleting now could orphan data the runbook did not clean up.
            self.skips.record_failure(key, urgent, self.queue.add_rate_limited(key))
            return
        update_finalizers(
            self.kube, self.resource, namespace, name, lambda f: [x for x in f if x != fin_name]
        )
        self.skips.forget(key)
        self.queue.forget(key)

    def _run(self, obj: dict[str, Any], target: Target) -> RunResult | None:
        """One ansible-runner run; None when it was stopped for shutdown (not a failure)."""
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
        result = self.runner.run(
            target,
            extravars,
            artifact_parent,
            self.watch.max_runner_artifacts,
            self.runner_timeout,
            name=run_name(obj_key(obj)),
        )
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
        if result.status == "stopped" and self.shutting_down.is_set():
            self.metrics.reconcile_total.labels(kind, "stopped").inc()
            return None
        if result.status == "stopped" and self._is_preempted(obj_key(obj)):
            return result  # counted by reconcile()
        self.metrics.reconcile_total.labels(kind, "success" if result.ok else "failure").inc()
        return result

    def _failure_text(self, result: RunResult) -> str:
        if result.status in ("timeout", "stopped"):
            return (
                f"the playbook exceeded the runner timeout of {self.runner_timeout:.0f}s "
                "and was stopped at a task boundary"
            )
        if result.failed_task:
            return f"task {result.failed_task!r} failed: {result.failed_msg}"
        return f"the playbook failed (status {result.status}, rc {result.rc})"

    def _report(self, key: ObjKey, obj: dict[str, Any], result: RunResult, generation: int) -> None:
        stats = result.stats if isinstance(result.stats, dict) else {}
        announced = set()
        for ev in stats.get("operator_events") or []:
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
            if str(reason or "RunbookFailed") not in announced:
                self.recorder.emit(
                    obj, "Warning", str(reason or "RunbookFailed"), str(message or failure)
                )
        if self.watch.manage_status:
            update_status(
                self.kube,
                self.resource,
                *key,
                lambda o: conditions.after_run(
                    o.get("status"), generation, result.ok, stats, failure, now_rfc3339()
                ),
            )
