"""A small Kubernetes API client for the observation module and etcd_kube_object.

Why not the `kubernetes` package: importing it costs about half a CPU-second (every model
class is loaded), and the observation runs at every reconcile. This client reads JSON over
urllib3 with the same credentials the `kubernetes` package would pick, in the same order:
an explicit kubeconfig, $K8S_AUTH_KUBECONFIG, $KUBECONFIG (its first file), ~/.kube/config,
then the Pod's ServiceAccount. Kubeconfigs that need code to produce a credential (`exec`,
`auth-provider`) are handed to the `kubernetes` package's own loader, paying its import then.
The writes the runbooks make most (a member's claim and Pod, their records and labels) go
through `KubeReader.send` for the same reason; the rest stay with kubernetes.core.k8s.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote, urlencode

import urllib3
import yaml

from etcd_runbook.clients.etcd_common import private_file
from etcd_runbook.clients.etcd_errors import EtcdModuleError

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


class KubeError(EtcdModuleError):
    """The API server could not be reached or refused a read."""

    reason = "KubernetesError"


@dataclass
class KubeCredentials:
    server: str
    ca_file: str | None = None
    verify: bool = True
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = None


def _file_or_data(entry: dict[str, Any], key: str, name: str, base: str) -> str | None:
    """A kubeconfig names PEM either as a path (relative to the kubeconfig) or as data."""
    if entry.get(f"{key}-data"):
        return private_file(name, base64.b64decode(entry[f"{key}-data"]).decode())
    if entry.get(key):
        return os.path.join(base, os.path.expanduser(str(entry[key])))
    return None


def _named(items: list[dict[str, Any]] | None, name: str, what: str, path: str) -> dict[str, Any]:
    for item in items or []:
        if item.get("name") == name:
            return dict(item.get(what) or {})
    raise KubeError(f"kubeconfig {path}: no {what} named '{name}'")


def kubeconfig_path(explicit: str | None, env: dict[str, str], home: str) -> str | None:
    """The kubeconfig to use, or None for the in-cluster ServiceAccount."""
    if explicit:
        return explicit
    for var in ("K8S_AUTH_KUBECONFIG", "KUBECONFIG"):
        first = (env.get(var) or "").split(os.pathsep)[0]
        if first:
            return first
    default = os.path.join(home, ".kube", "config")
    return default if os.path.exists(default) else None


def from_kubeconfig(path: str, context: str | None) -> KubeCredentials:
    try:
        with open(path, encoding="utf-8") as handle:
            config = yaml.safe_load(handle) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise KubeError(f"kubeconfig {path} cannot be read: {exc}") from exc
    context_name = context or config.get("current-context") or ""
    ctx = _named(config.get("contexts"), context_name, "context", path)
    cluster = _named(config.get("clusters"), ctx.get("cluster", ""), "cluster", path)
    user = _named(config.get("users"), ctx.get("user", ""), "user", path) if ctx.get("user") else {}
    if "exec" in user or "auth-provider" in user:
        return _from_kubernetes_package(path, context_name)
    if "username" in user:
        raise KubeError(f"kubeconfig {path}: basic auth (username/password) is not supported")
    base = os.path.dirname(os.path.abspath(path))
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = _read(os.path.join(base, user["tokenFile"]))
    return KubeCredentials(
        server=str(cluster.get("server", "")).rstrip("/"),
        ca_file=_file_or_data(cluster, "certificate-authority", "kube-ca.crt", base),
        verify=not cluster.get("insecure-skip-tls-verify", False),
        cert_file=_file_or_data(user, "client-certificate", "kube-client.crt", base),
        key_file=_file_or_data(user, "client-key", "kube-client.key", base),
        token=token,
    )


def _from_kubernetes_package(path: str, context: str) -> KubeCredentials:
    from kubernetes import client, config

    conf = client.Configuration()
    config.load_kube_config(config_file=path, context=context, client_configuration=conf)
    token = (conf.api_key or {}).get("authorization", "")
    return KubeCredentials(
        server=conf.host.rstrip("/"),
        ca_file=conf.ssl_ca_cert,
        verify=conf.verify_ssl,
        cert_file=conf.cert_file,
        key_file=conf.key_file,
        token=token.removeprefix("Bearer ").strip() or None,
    )


def in_cluster(env: dict[str, str], account_dir: str = SERVICE_ACCOUNT) -> KubeCredentials:
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise KubeError(
            "no kubeconfig found and not running in a Pod: give kubeconfig, or set KUBECONFIG"
        )
    host = f"[{host}]" if ":" in host else host
    return KubeCredentials(
        server=f"https://{host}:{port}",
        ca_file=os.path.join(account_dir, "ca.crt"),
        token=_read(os.path.join(account_dir, "token")),
    )


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError as exc:
        raise KubeError(f"cannot read {path}: {exc}") from exc


def kube_argument_spec() -> dict[str, Any]:
    """The API server options of every module that talks to Kubernetes (doc fragment
    etcd_kube)."""
    return {"kubeconfig": {"type": "path"}, "context": {"type": "str"}}


def credentials(kubeconfig: str | None, context: str | None) -> KubeCredentials:
    """The module's own kubeconfig and context, else the environment's as kubernetes.core
    reads it (K8S_AUTH_CONTEXT: what a break-glass playbook's `-e context=` sets), else
    in-cluster."""
    path = kubeconfig_path(kubeconfig, dict(os.environ), os.path.expanduser("~"))
    context = context or os.environ.get("K8S_AUTH_CONTEXT") or None
    return from_kubeconfig(path, context) if path else in_cluster(dict(os.environ))


class KubeReader:
    """GETs against one API server; every answer is JSON, every failure a KubeError."""

    def __init__(self, creds: KubeCredentials, timeout: float) -> None:
        if not creds.server.startswith(("https://", "http://")):
            raise KubeError(f"the API server URL '{creds.server}' is not http(s)")
        self.server = creds.server
        self.headers = {"Accept": "application/json"}
        if creds.token:
            self.headers["Authorization"] = f"Bearer {creds.token}"
        kwargs: dict[str, Any] = {"timeout": urllib3.Timeout(total=timeout), "retries": False}
        if creds.server.startswith("https://"):
            context = ssl.create_default_context(cafile=creds.ca_file)
            if not creds.verify:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            if creds.cert_file:
                context.load_cert_chain(creds.cert_file, creds.key_file)
            kwargs["ssl_context"] = context
        self.http = urllib3.PoolManager(num_pools=1, maxsize=1, **kwargs)
        # The API server's clock at its last answer (its Date header, RFC 3339 UTC; '' before
        # one): durations between its own timestamps are measured on one clock.
        self.date = ""

    def get(self, path: str, query: dict[str, str] | None = None) -> dict[str, Any] | None:
        """The object at `path`, or None when it does not exist."""
        url = self.server + path + (f"?{urlencode(query)}" if query else "")
        try:
            response = self.http.request("GET", url, headers=self.headers)
        except urllib3.exceptions.HTTPError as exc:
            raise KubeError(f"API server {self.server} unreachable: {exc}") from exc
        self.date = http_date(response.headers.get("Date"))
        if response.status == 404:
            return None
        try:
            body = json.loads(response.data or b"{}")
        except ValueError as exc:
            raise KubeError(f"GET {path}: HTTP {response.status}, not JSON") from exc
        if response.status >= 400:
            reason = "Forbidden" if response.status in (401, 403) else "KubernetesError"
            message = str(body.get("message", ""))[:300]
            raise KubeError(f"GET {path}: HTTP {response.status}: {message}", reason=reason)
        return dict(body)

    def send(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        content_type: str = "application/json",
        query: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """A write; the object the API server answers with."""
        url = self.server + path + (f"?{urlencode(query)}" if query else "")
        headers = {**self.headers, "Content-Type": content_type}
        try:
            response = self.http.request(
                method,
                url,
                body=None if body is None else json.dumps(body).encode(),
                headers=headers,
            )
        except urllib3.exceptions.HTTPError as exc:
            raise KubeError(f"API server {self.server} unreachable: {exc}") from exc
        try:
            answer = json.loads(response.data or b"{}")
        except ValueError as exc:
            raise KubeError(f"{method} {path}: HTTP {response.status}, not JSON") from exc
        if response.status >= 400:
            reason = {401: "Forbidden", 403: "Forbidden", 404: "NotFound", 409: "Conflict"}
            message = str(answer.get("message", ""))[:300]
            raise KubeError(
                f"{method} {path}: HTTP {response.status}: {message}",
                reason=reason.get(response.status, "KubernetesError"),
            )
        return dict(answer)

    def items(self, path: str, label_selector: str, kind: str, api_version: str) -> list[Any]:
        """The objects of a list, each with the kind and apiVersion the list leaves out."""
        body = self.get(path, {"labelSelector": label_selector}) or {}
        return [
            {"apiVersion": api_version, "kind": kind, **item} for item in body.get("items") or []
        ]


def http_date(value: str | None) -> str:
    """An HTTP Date header as RFC 3339 UTC ("2026-11-25T10:00:00Z"); '' when there is none."""
    try:
        when = parsedate_to_datetime(value or "")
    except (TypeError, ValueError):
        return ""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if when.tzinfo else ""


def namespaced(group_version: str, namespace: str, plural: str, name: str = "") -> str:
    prefix = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    path = f"{prefix}/namespaces/{quote(namespace, safe='')}/{plural}"
    return f"{path}/{quote(name, safe='')}" if name else path
