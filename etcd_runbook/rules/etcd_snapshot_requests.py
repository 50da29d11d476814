"""What the etcd_snapshot module may be asked, decided before anything is read or written:
which arguments each state needs, the settings of a restore, and the sha256 a fetched
snapshot must have.

Each check returns its problem as a sentence for the person who wrote the task ("" when there
is none); the caller raises it as the module's error, so these stay pure.
"""

from __future__ import annotations

from typing import Any

Params = dict[str, Any]

RESTORE_NEEDS = ("data_dir", "name", "initial_advertise_peer_urls")


def stored_in(params: Params) -> str:
    """The kind of place that keeps the snapshots ("s3", "directory"), or "" for a file."""
    return "s3" if params["s3"] else "directory" if params["directory"] else ""


def request_problem(params: Params) -> str:
    """What each state needs, beyond what the argument spec can say."""
    state = params["state"]
    stored = stored_in(params)
    if params["member_data_dir"]:
        if state == "saved":
            return (
                "member_data_dir is a stopped member's database to copy out: only with "
                "state=fetched or state=restored"
            )
        if stored:
            return f"member_data_dir and {stored} are two sources: give one"
        for option in ("key", "prefix"):
            if params[option]:
                return f"member_data_dir is copied, not read from a store: drop {option}"
        if params["sha256"]:
            return "member_data_dir is copied and hashed here: drop sha256"
    if (params["key"] or params["prefix"]) and not stored:
        return "key and prefix name snapshots in a store: give s3 or directory"
    if params["backup"] and not (state == "saved" and stored):
        return "backup goes into a manifest: only with state=saved and a store"
    if state == "saved" and stored:
        if bool(params["key"]) == bool(params["prefix"]):
            return f"state=saved with {stored} needs exactly one of key or prefix"
        if params["path"]:
            return f"state=saved with {stored} writes no other file: drop path"
        return ""
    if state == "fetched" and not (stored or params["member_data_dir"]):
        return "state=fetched needs s3 or directory, and key (or member_data_dir)"
    if stored and not params["key"]:
        return f"state={state} with {stored} needs key (the snapshot to read)"
    if stored and params["prefix"]:
        return f"state={state} reads one snapshot: give key, not prefix"
    if not params["path"]:
        return f"state={state} needs path"
    return ""


def restore_problem(params: Params) -> str:
    """What a restore needs beyond the snapshot itself."""
    missing = [name for name in RESTORE_NEEDS if not params[name]]
    if missing:
        return f"state=restored needs {', '.join(missing)}"
    if params["bump_revision"] < 0:
        return "bump_revision must be 0 or more"
    return ""


def restore_settings(params: Params, sha256: str) -> dict[str, Any]:
    """The new cluster's identity for a restore of the snapshot with `sha256`: by default
    this member alone, under a token derived from the snapshot, so every member restored
    from one snapshot agrees and each snapshot gives a new cluster."""
    peer_urls = ",".join(params["initial_advertise_peer_urls"])
    return {
        "name": params["name"],
        "initial_cluster": params["initial_cluster"] or f"{params['name']}={peer_urls}",
        "initial_cluster_token": params["initial_cluster_token"] or f"restore-{sha256[:16]}",
        "initial_advertise_peer_urls": peer_urls,
        "bump_revision": params["bump_revision"],
    }


def expected_sha256(given: str | None, manifest: dict[str, Any] | None) -> str:
    """The sha256 a fetched snapshot must have: the one the task gives, else its manifest's;
    "" when neither says (the snapshot was never verified)."""
    recorded = manifest.get("sha256") if manifest else None
    return (given or "").strip().lower() or recorded or ""


def manifest_problem(where: str, expected: str, manifest: dict[str, Any] | None, size: int) -> str:
    """Why the stored snapshot of `size` bytes cannot be the one expected, by its manifest."""
    recorded = manifest.get("sha256") if manifest else None
    if recorded and recorded != expected:
        return f"snapshot {where} is recorded with sha256 {recorded}, not the expected {expected}"
    if manifest and recorded == expected and manifest.get("size") != size:
        return (
            f"snapshot {where} is {size} bytes, not the {manifest.get('size')} its manifest "
            "records: it is truncated or was replaced"
        )
    return ""
