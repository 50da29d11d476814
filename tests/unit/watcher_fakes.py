"""In-memory stand-ins for the API server and ansible-runner, for the watcher's unit tests.

FakeKube keeps objects by path and enforces what the watcher relies on: 404 for missing objects,
409 when a PUT carries a stale resourceVersion, /status PUTs touching only .status.
"""

from __future__ import annotations

import copy
import itertools
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from etcd_runbook_operator.kube import ApiException
from etcd_runbook_operator.runner import RunResult


class FakeKube:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self._rv = itertools.count(100)
        self.watch_scripts: list[Any] = []
        self.conflicts_to_inject = 0

    def next_rv(self) -> str:
        return str(next(self._rv))

    def put_object(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = self.next_rv()
        self.objects[path] = obj
        return copy.deepcopy(obj)

    def get(
        self, path: str, query: dict[str, Any] | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        with self.lock:
            self.calls.append(("GET", path))
            if path in self.objects:
                return copy.deepcopy(self.objects[path])
            items = [
                copy.deepcopy(o)
                for p, o in self.objects.items()
                if path
                in (p.rsplit("/", 1)[0], re.sub(r"/namespaces/[^/]+", "", p.rsplit("/", 1)[0]))
            ]
            if items or path.endswith(("pods", "persistentvolumeclaims", "widgets")):
                return {"metadata": {"resourceVersion": str(next(self._rv))}, "items": items}
            raise ApiException(status=404, reason="Not Found")

    def create(
        self, path: str, body: dict[str, Any], timeout: float | None = None
    ) -> dict[str, Any]:
        with self.lock:
            self.calls.append(("POST", path))
            full = f"{path}/{body['metadata']['name']}"
            if full in self.objects:
                raise ApiException(status=409, reason="AlreadyExists")
            return self.put_object(full, body)

    def replace(
        self, path: str, body: dict[str, Any], timeout: float | None = None
    ) -> dict[str, Any]:
        with self.lock:
            self.calls.append(("PUT", path))
            sub = path.endswith("/status")
            base = path[: -len("/status")] if sub else path
            current = self.objects.get(base)
            if current is None:
                raise ApiException(status=404, reason="Not Found")
            if self.conflicts_to_inject:
                self.conflicts_to_inject -= 1
                self.put_object(base, current)  # someone else wrote meanwhile
                raise ApiException(status=409, reason="Conflict")
            if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                raise ApiException(status=409, reason="Conflict")
            if sub:
                new = copy.deepcopy(current)
                new["status"] = copy.deepcopy(body.get("status"))
            else:
                new = copy.deepcopy(body)
                if "status" in current:
                    new["status"] = current["status"]
                if new["metadata"].get("deletionTimestamp") and not new["metadata"].get(
                    "finalizers"
                ):
                    del self.objects[base]
                    return new
            return self.put_object(base, new)

    def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.calls.append(("PATCH", path))
            current = self.objects.get(path)
            if current is None:
                raise ApiException(status=404, reason="Not Found")
            current = copy.deepcopy(current)
            current.update(body)
            return self.put_object(path, current)

    def watch(
        self, path: str, query: dict[str, Any], timeout_seconds: int
    ) -> Iterator[dict[str, Any]]:
        with self.lock:
            self.calls.append(("WATCH", f"{path}?rv={query.get('resourceVersion')}"))
            script = self.watch_scripts.pop(0) if self.watch_scripts else []
        if isinstance(script, Exception):
            raise script
        yield from script
        if not script:
            threading.Event().wait(0.05)


class FakeRunner:
    """Records runs; results come from a list (default: success with no stats)."""

    def __init__(self, artifacts_dir: Path, results: list[RunResult] | None = None) -> None:
        self.artifacts_dir = artifacts_dir
        self.results = list(results or [])
        self.runs: list[dict[str, Any]] = []
        self.stop_requests: list[str] = []
        # Called inside run(), as if events arrived while the playbook was in flight.
        self.during_run: Any = None
        # set_stats data handed to on_stats inside run(), as a playbook tells them in flight.
        self.told: list[dict[str, Any]] = []

    def stop_at_task_boundary(self, name: str) -> bool:
        self.stop_requests.append(name)
        return True

    def run(
        self,
        target: Any,
        extravars: dict[str, Any],
        artifact_parent: Path,
        keep: int,
        timeout: float,
        name: str = "",
        on_stats: Any = None,
        faults: Any = None,
    ) -> RunResult:
        self.runs.append(
            {"target": target, "extravars": extravars, "name": name, "faults": faults or []}
        )
        if self.during_run:
            self.during_run()
        for told in self.told:
            on_stats(told)
        if self.results:
            return self.results.pop(0)
        return RunResult(status="successful", rc=0, duration=0.01, artifact_dir=artifact_parent)


def result(
    ok: bool = True,
    stats: dict[str, Any] | None = None,
    task: str | None = None,
    msg: str | None = None,
    reason: str | None = None,
) -> RunResult:
    return RunResult(
        status="successful" if ok else "failed",
        rc=0 if ok else 2,
        duration=0.01,
        artifact_dir=Path("/nonexistent"),
        stats=stats or {},
        failed_task=task,
        failed_msg=msg,
        failed_reason=reason,
    )
