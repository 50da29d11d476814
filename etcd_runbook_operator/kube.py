"""A small JSON-in/JSON-out layer over the official client's transport.

Custom resources, Pods, Leases and Events all go through the same few verbs on raw dicts: the
watcher never needs the generated models, and a single code path keeps list/watch identical for
every kind it watches.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

__all__ = ["ApiException", "Kube", "Resource", "load_api_client"]


@dataclass(frozen=True)
class Resource:
    group: str  # "" for the core API
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, sub: str = "") -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace and self.namespaced:
            base += f"/namespaces/{quote(namespace)}"
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name)}"
            if sub:
                base += f"/{sub}"
        return base


EVENTS = Resource("", "v1", "events", "Event")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")


def load_api_client(kubeconfig: str | None, pool_size: int = 32) -> client.ApiClient:
    """--kubeconfig, else in-cluster, else $KUBECONFIG / ~/.kube/config."""
    cfg = client.Configuration()
    if kubeconfig:
        config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    else:
        try:
            config.load_incluster_config(client_configuration=cfg)
        except config.ConfigException:
            config.load_kube_config(client_configuration=cfg)
    # Every informer holds a connection for its long-lived watch; workers need their own.
    cfg.connection_pool_maxsize = pool_size
    return client.ApiClient(configuration=cfg)


class Kube:
    def __init__(self, api_client: client.ApiClient, request_timeout: float = 30.0) -> None:
        self.api = api_client
        self.request_timeout = request_timeout
        self._fenced = ""

    def fence(self, why: str) -> None:
        """From now on every write fails without being sent (reads go on): the watcher lost
        its Lease, and another replica may lead."""
        self._fenced = why

    def _call(
        self,
        method: str,
        path: str,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = None,
    ) -> Any:
        params = [(k, v) for k, v in (query or {}).items() if v not in (None, "")]
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        req = self.api.param_serialize(
            method,
            path,
            query_params=params,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        resp = self.api.call_api(*req, _request_timeout=timeout or self.request_timeout)
        return resp

    def request(
        self,
        method: str,
        path: str,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> dict[str, Any]:
        if self._fenced and method != "GET":
            raise ApiException(status=0, reason=f"{method} {path} not sent: {self._fenced}")
        resp = self._call(method, path, query, body, content_type, timeout)
        data = resp.read()
        if not 200 <= resp.status <= 299:
            raise ApiException.from_response(
                http_resp=resp, body=data.decode(errors="replace"), data=None
            )
        return json.loads(data) if data else {}

    def get(
        self, path: str, query: dict[str, Any] | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        return self.request("GET", path, query, timeout=timeout)

    def create(
        self, path: str, body: dict[str, Any], timeout: float | None = None
    ) -> dict[str, Any]:
        return self.request("POST", path, body=body, timeout=timeout)

    def replace(
        self, path: str, body: dict[str, Any], timeout: float | None = None
    ) -> dict[str, Any]:
        return self.request("PUT", path, body=body, timeout=timeout)

    def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.request("PATCH", path, body=body, content_type="application/merge-patch+json")

    def delete(self, path: str) -> dict[str, Any]:
        return self.request("DELETE", path)

    def watch(
        self, path: str, query: dict[str, Any], timeout_seconds: int
    ) -> Iterator[dict[str, Any]]:
        """Stream watch events; the server ends the stream after about timeout_seconds."""
        q = dict(query, watch="true", timeoutSeconds=timeout_seconds, allowWatchBookmarks="true")
        resp = self._call("GET", path, q, timeout=(10.0, timeout_seconds + 30.0))
        if not 200 <= resp.status <= 299:
            data = resp.read()
            raise ApiException.from_response(
                http_resp=resp, body=data.decode(errors="replace"), data=None
            )
        raw = resp.response
        try:
            for line in iter_resp_lines(raw):
                if line.strip():
                    yield json.loads(line)
        finally:
            raw.release_conn()

    def discover(self, group: str, version: str, kind: str) -> Resource:
        """Find a kind's plural and scope through API discovery (watches.yaml gives only kind)."""
        doc = self.get(f"/apis/{group}/{version}" if group else f"/api/{version}")
        for res in doc.get("resources", []):
            if res.get("kind") == kind and "/" not in res.get("name", ""):
                return Resource(group, version, res["name"], kind, bool(res.get("namespaced")))
        raise LookupError(f"kind {kind} not served by {group}/{version}")
