"""The cluster's TLS Secrets: what they look like (never their data, but for the role's own
use under no_log) and what a run writes of them (`tls_plan`)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Any

from etcd_runbook.names import LABEL_TLS_FOR
from etcd_runbook.rules.cluster.common import _event, _meta, _refusal
from etcd_runbook.rules.cluster.spec import normalize_spec
from etcd_runbook.rules.etcd_tls_secrets import client_material

TLS_KEYS = ("tls.crt", "tls.key", "ca.crt")
# The certificates the role issues from the cluster's CA, and those a member Pod mounts (the
# client certificate is the operator's own).
TLS_LEAVES = ("peer", "server", "client")
TLS_MOUNTED = ("peer", "server")
_PEM_CERT = re.compile(r"-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----", re.DOTALL)


def pem_fingerprints(text: str) -> list[str]:
    """The SHA-256 of each certificate in PEM `text` (its DER), in order: what the plan
    compares certificates by, public and never the material itself."""
    found = []
    for body in _PEM_CERT.findall(text):
        try:
            der = base64.b64decode("".join(body.split()), validate=True)
        except binascii.Error:
            continue
        found.append(hashlib.sha256(der).hexdigest())
    return found


def tls_seen(secrets: list[dict[str, Any]], obj: dict[str, Any]) -> dict[str, Any]:
    """What the Secret of each purpose (ca, peer, server, client) of the EtcdCluster `obj`
    looks like, never its data: {found, type, keys, certs}; `certs` holds the fingerprints
    (`pem_fingerprints`) of the certificates in its tls.crt and ca.crt."""
    names = normalize_spec(obj, {})["secrets"]
    by_name = {_meta(s).get("name"): s for s in secrets}
    seen = {}
    for purpose, name in names.items():
        secret = by_name.get(name)
        data = (secret or {}).get("data") or {}
        certs = {}
        for field in ("tls.crt", "ca.crt"):
            try:
                certs[field] = pem_fingerprints(base64.b64decode(data.get(field) or "").decode())
            except (binascii.Error, UnicodeDecodeError):
                certs[field] = []
        seen[purpose] = {
            "found": secret is not None and bool(data),
            "type": (secret or {}).get("type", ""),
            "keys": sorted(data),
            "certs": certs,
        }
    return seen


def tls_material(secrets: list[dict[str, Any]], obj: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The decoded data of each purpose's Secret that exists (kept under no_log)."""
    names = normalize_spec(obj, {})["secrets"]
    by_name = {_meta(s).get("name"): s for s in secrets}
    material = {}
    for purpose, name in names.items():
        data = (by_name.get(name) or {}).get("data") or {}
        try:
            material[purpose] = {k: base64.b64decode(v).decode() for k, v in data.items()}
        except (binascii.Error, UnicodeDecodeError):
            continue
        if not material[purpose]:
            del material[purpose]
    return material


def tls_client(secrets: list[dict[str, Any]], obj: dict[str, Any]) -> dict[str, str]:
    """The decoded CA, certificate and key the runbook's etcd modules connect with (kept under
    no_log): what the look connected with (`client_material`). {} when nothing holds them."""
    names = normalize_spec(obj, {})["secrets"]
    chosen = client_material(secrets, names["server"], names["client"])
    if chosen is None:
        return {}
    try:
        return {
            k: base64.b64decode(v).decode()
            for k, v in zip(("ca", "cert", "key"), chosen, strict=True)
        }
    except (binascii.Error, UnicodeDecodeError):
        return {}


def tls_problems(tls: dict[str, Any], spec: dict[str, Any], cluster: str) -> list[dict[str, str]]:
    """Secrets named in spec.tls.secrets must exist and look like TLS material meant for this
    cluster: type kubernetes.io/tls with tls.crt, tls.key and ca.crt, and (checked by the read,
    which selects on it) the label etcd.runbook.io/tls-for=<cluster>, so an EtcdCluster cannot
    mount just any Secret of its namespace into its Pods. `tls` is `tls_seen`'s summary."""
    if not spec["tls"] or spec["tls_own"]:
        return []
    problems = []
    for purpose in ("peer", "server", "client"):
        secret = spec["secrets"][purpose]
        seen = tls.get(purpose) or {}
        field = f"spec.tls.secrets.{purpose}"
        why = ""
        if not seen.get("found"):
            why = (
                f"Secret {secret} does not exist in the cluster's namespace, or is not "
                f"labelled {LABEL_TLS_FOR}={cluster} (label it to confirm it is meant for "
                "this cluster)"
            )
        elif seen.get("type") != "kubernetes.io/tls":
            why = f"Secret {secret} is of type {seen.get('type')}, not kubernetes.io/tls"
        elif missing := [k for k in TLS_KEYS if k not in (seen.get("keys") or [])]:
            why = f"Secret {secret} lacks {', '.join(missing)}"
        if why:
            problems.append(
                _refusal(
                    "TLSSecretMissing" if not seen.get("found") else "TLSSecretInvalid",
                    field,
                    f"{field}: {why}; members without TLS material are not added",
                )
            )
    return problems


def tls_plan(
    seen: dict[str, Any] | None, spec: dict[str, Any], cluster: str, state: str
) -> dict[str, Any]:
    """What a run does about the cluster's TLS Secrets, from `tls_seen`'s summary (None: not
    looked at, nothing decided) and how far they may be in use (`state`, from `run_state`).
    Returns `issue` (certificates to issue), `new_ca` (issue them from a new CA, written over
    what exists), `ca_from` (the purpose whose ca.crt puts the CA Secret's certificate back),
    `write` (the purposes whose Secret this run writes), `unmountable` (purpose -> Secret a
    member Pod mounts that is not fit to mount: no member Pod is made then), `refusals` and
    `announce` (the Events of what is written).

    The role's own Secrets are made anew only where nothing holds them: a cluster that never
    ran, or one with no member Pod left and none of its TLS Secrets (re-created after a
    deletion, which deletes them). Otherwise a missing Secret is put back from what the
    members trust or refused, never replaced: new TLS material for a cluster that runs comes
    only from an explicit rotation (docs/next-runbooks.md), which will be decided here too."""
    out: dict[str, Any] = {
        "issue": [],
        "new_ca": False,
        "ca_from": "",
        "write": [],
        "unmountable": {},
        "refusals": [],
        "announce": [],
    }
    if seen is None or not spec["tls"]:
        return out
    if not spec["tls_own"]:
        out["refusals"] = tls_problems(seen, spec, cluster)
        fields = {r["field"] for r in out["refusals"]}
        out["unmountable"] = {
            p: spec["secrets"][p] for p in TLS_MOUNTED if f"spec.tls.secrets.{p}" in fields
        }
        return out
    return {**out, **_own_tls_plan(seen, spec["secrets"], state)}


def _own_tls_plan(seen: dict[str, Any], names: dict[str, str], state: str) -> dict[str, Any]:
    """`tls_plan` for the Secrets the role makes (spec.tls.secrets unset)."""
    ca = seen.get("ca") or {}
    leaves = {p: seen.get(p) or {} for p in TLS_LEAVES}
    missing = [p for p, s in leaves.items() if not s.get("found")]
    ca_usable = bool(ca.get("found")) and {"tls.crt", "tls.key"} <= set(ca.get("keys") or [])
    left = [p for p in ("ca", *TLS_LEAVES) if (seen.get(p) or {}).get("found")]
    if state == "new" or (state == "stopped" and not left):
        return _fresh_tls(names, state, missing, ca_usable)
    present = {p: s for p, s in leaves.items() if s.get("found")}
    if ca_usable:
        kept = _issue_from_ca(ca, present, names, missing)
    else:
        kept = _ca_key_lost(ca, present, names)
    lost = [p for p in missing if p not in kept["issue"]]
    return {
        "issue": kept["issue"],
        "ca_from": kept["ca_from"],
        "write": (["ca"] if kept["ca_from"] else []) + kept["issue"],
        "unmountable": {p: names[p] for p in TLS_MOUNTED if p in lost},
        "refusals": _lost_refusals(lost, names, kept["why_not"]) + kept["refusals"],
        "announce": kept["announce"],
    }


def _fresh_tls(
    names: dict[str, str], state: str, missing: list[str], ca_usable: bool
) -> dict[str, Any]:
    """Nothing holds the cluster's TLS material: a new CA and every certificate, or what is
    missing."""
    fresh = missing if ca_usable else list(TLS_LEAVES)
    made = ", ".join(fresh) + ("" if ca_usable else " and a new CA")
    created = _event("Normal", "CertificatesCreated", f"Created TLS certificates for {made}")
    if state == "stopped":
        created = _event(
            "Warning",
            "CertificatesCreated",
            f"Created TLS certificates for {made}: the cluster has run, but none of its "
            "TLS Secrets and no member Pod is left to hold its CA (a deleted EtcdCluster "
            "takes them along). Clients must trust the new CA (the ca.crt of Secret "
            f"{names['server']})",
        )
    return {
        "issue": fresh,
        "new_ca": not ca_usable,
        "write": fresh if ca_usable else ["ca", *fresh],
        "announce": [created] if fresh else [],
    }


def _trusted(secret: dict[str, Any]) -> list[str]:
    """The CA certificates a leaf Secret's ca.crt holds (fingerprints)."""
    return list(((secret.get("certs") or {}).get("ca.crt")) or [])


def _issue_from_ca(
    ca: dict[str, Any], present: dict[str, Any], names: dict[str, str], missing: list[str]
) -> dict[str, Any]:
    """The CA's key is there: the missing certificates are issued again from it, unless it is
    not the CA the certificates in use were issued from."""
    ca_cert = set(((ca.get("certs") or {}).get("tls.crt")) or [])
    strangers = [p for p in present if not ca_cert & set(_trusted(present[p]))]
    if strangers:
        refusal = _refusal(
            "TLSCAMismatch",
            "spec.tls",
            f"Secret {names['ca']}: its CA is not the one the certificates in use were "
            f"issued from (the ca.crt of Secret {names[strangers[0]]}): nothing is "
            "issued from it. Put back the CA Secret those certificates came from",
        )
        return {
            "issue": [],
            "ca_from": "",
            "why_not": f"Secret {names['ca']} holds another CA than the one the members trust",
            "refusals": [refusal],
            "announce": [],
        }
    announce = [
        _event(
            "Warning",
            "TLSSecretRestored",
            f"Secret {names[p]} was missing: issued again from the cluster's CA "
            f"(Secret {names['ca']}), which every member trusts; no other Secret changed",
        )
        for p in missing
    ]
    return {"issue": missing, "ca_from": "", "why_not": "", "refusals": [], "announce": announce}


def _ca_key_lost(
    ca: dict[str, Any], present: dict[str, Any], names: dict[str, str]
) -> dict[str, Any]:
    """The CA's private key is lost: nothing is issued, and no new CA is made while the
    cluster's certificates are in use. The CA's certificate is put back when its Secret is
    gone and every certificate left trusts the same one CA."""
    kinds = {tuple(_trusted(present[p])) for p in present}
    ca_from = ""
    announce = []
    if not ca.get("found") and len(kinds) == 1 and len(next(iter(kinds))) == 1:
        ca_from = next(iter(present))
        back = f" Its certificate is put back from the ca.crt of Secret {names[ca_from]}."
        announce.append(
            _event(
                "Warning",
                "TLSSecretRestored",
                f"Secret {names['ca']} was missing: its certificate put back from the ca.crt "
                f"of Secret {names[ca_from]} (the CA every member trusts); its private key "
                "was kept nowhere else and is lost",
            )
        )
    elif ca.get("found"):
        back = ""
    else:
        back = (
            " Its certificate cannot be put back either: no Secret of the cluster holds "
            "one CA certificate that all agree on."
        )
    refusal = _refusal(
        "TLSCAKeyLost",
        "spec.tls",
        f"Secret {names['ca']}: the cluster's CA private key (tls.key) is gone, and it "
        "is kept nowhere else. No new CA is made while the cluster's certificates "
        f"are in use: its members and clients trust this one.{back} The members keep "
        "running on their certificates, but none can be issued again: restore Secret "
        f"{names['ca']} with its tls.key from a backup of it (kubectl apply); without "
        "one, only a certificate rotation to a new CA can (docs/next-runbooks.md)",
    )
    return {
        "issue": [],
        "ca_from": ca_from,
        "why_not": f"the CA's private key is lost (Secret {names['ca']}, tls.key)",
        "refusals": [refusal],
        "announce": announce,
    }


def _lost_refusals(lost: list[str], names: dict[str, str], why_not: str) -> list[dict[str, str]]:
    """A refusal for each Secret gone that cannot be issued again, said first."""
    return [
        _refusal(
            "TLSSecretLost",
            "spec.tls",
            f"Secret {names[p]} is gone and cannot be issued again: {why_not}. "
            + (
                "The running members keep the copy they mount; a member whose Pod is gone is "
                "not re-made until it is back (it mounts it). "
                if p in TLS_MOUNTED
                else "The runbook reaches etcd with another of the cluster's certificates. "
            )
            + f"Restore Secret {names[p]} from a backup of it",
        )
        for p in lost
    ]
