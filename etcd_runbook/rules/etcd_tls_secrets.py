"""Which of a cluster's TLS Secrets the runbook's etcd client connects with: one choice for
the look (which dials the members first) and for the role's modules after it, so both speak
to etcd with the same material."""

from __future__ import annotations

from typing import Any


def client_material(
    secrets: list[dict[str, Any]], server: str, client: str
) -> tuple[str, str, str] | None:
    """(ca.crt, tls.crt, tls.key), base64 as read, the etcd client connects with: the server
    Secret's CA and the client Secret's pair. When one of them is gone another Secret read
    for the cluster stands in (a ca.crt of any, in name order; the pair of the server Secret,
    else of any kubernetes.io/tls one): the role's certificates all chain to the cluster's CA
    and each may authenticate a client, so one lost Secret does not leave the runbook blind.
    None when nothing holds them."""
    data = {str((s.get("metadata") or {}).get("name")): s.get("data") or {} for s in secrets}
    tls = {
        str((s.get("metadata") or {}).get("name"))
        for s in secrets
        if s.get("type") == "kubernetes.io/tls"
    }
    others = sorted(n for n in data if n not in (server, client))
    ca = next(
        (data[n]["ca.crt"] for n in [server, client, *others] if data.get(n, {}).get("ca.crt")), ""
    )
    pairs = [client] + [n for n in [server, *others] if n in tls]
    pair = next(
        (
            (data[n]["tls.crt"], data[n]["tls.key"])
            for n in pairs
            if {"tls.crt", "tls.key"} <= set(data.get(n, {}))
        ),
        None,
    )
    return (ca, *pair) if ca and pair else None


def secret_names(cluster: str, tls: Any) -> dict[str, str]:
    """The TLS Secrets of a cluster by role (ca, peer, server, client): those `spec.tls.secrets`
    names, else the ones the runbook makes, `<cluster>-<role>-tls` (the CA `<cluster>-ca`)."""
    named = (tls if isinstance(tls, dict) else {}).get("secrets") or {}
    return {
        "ca": f"{cluster}-ca",
        "peer": named.get("peer") or f"{cluster}-peer-tls",
        "server": named.get("server") or f"{cluster}-server-tls",
        "client": named.get("client") or f"{cluster}-client-tls",
    }
