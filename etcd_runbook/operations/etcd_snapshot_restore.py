"""Restore a snapshot into a new member data dir, once, leaving a marker that says so.

etcd's tool writes the data dir in place and leaves a half-written one behind when it fails
(disk full, killed). So the restore goes into a staging dir, is moved into place when
complete, and a marker file naming the snapshot (by sha256) and the new cluster's identity
is written last. A second run finds the marker and changes nothing; any other
non-empty data dir is refused, never overwritten. etcd ignores unknown files in a data dir
(it logs a warning for them at start).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from typing import Any

from etcd_runbook.clients.etcd_errors import EtcdRefusedError
from etcd_runbook.clients.etcd_snapshot_tool import SnapshotTool

MARKER = ".etcd-runbook-restore.json"
STAGING_PREFIX = ".restore-"


@dataclass(frozen=True)
class RestoreSpec:
    snapshot_sha256: str
    name: str
    initial_cluster: str
    initial_cluster_token: str
    initial_advertise_peer_urls: str
    bump_revision: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_marker(data_dir: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(data_dir, MARKER), encoding="utf-8") as handle:
            marker = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return marker if isinstance(marker, dict) else {}


def _entries(data_dir: str) -> list[str]:
    """What the data dir holds, ignoring staging dirs a killed earlier run left behind."""
    return [e for e in os.listdir(data_dir) if not e.startswith(STAGING_PREFIX)]


def already_restored(data_dir: str, spec: RestoreSpec) -> bool:
    """True when `data_dir` holds this very restore; raises when it holds anything else
    (an empty or missing dir is False: restore into it)."""
    if not os.path.exists(data_dir):
        return False
    if not os.path.isdir(data_dir):
        raise EtcdRefusedError(f"data_dir {data_dir} exists and is not a directory")
    if not _entries(data_dir):
        return False
    marker = read_marker(data_dir)
    if marker is None:
        raise EtcdRefusedError(
            f"refusing to restore into {data_dir}: it is not empty and was not written by a "
            "restore of this module (it may hold a live member's data); give a new, empty "
            "data_dir"
        )
    wanted = spec.as_dict()
    differences = [
        f"{key}: {marker.get(key)!r} there, {value!r} asked"
        for key, value in wanted.items()
        if marker.get(key) != value
    ]
    if differences:
        raise EtcdRefusedError(
            f"refusing to restore into {data_dir}: it already holds a different restore "
            f"({'; '.join(differences)}); remove it yourself if it is not needed, or give "
            "another data_dir"
        )
    return True


def restore_command(
    tool: SnapshotTool, snapshot: str, data_dir: str, spec: RestoreSpec, *, skip_hash_check: bool
) -> list[str]:
    """The tool's command line restoring `snapshot` into `data_dir` as `spec` says."""
    return tool.restore_command(
        snapshot,
        data_dir,
        name=spec.name,
        initial_cluster=spec.initial_cluster,
        initial_cluster_token=spec.initial_cluster_token,
        initial_advertise_peer_urls=spec.initial_advertise_peer_urls,
        bump_revision=spec.bump_revision,
        skip_hash_check=skip_hash_check,
    )


def restore(
    tool: SnapshotTool,
    snapshot: str,
    data_dir: str,
    spec: RestoreSpec,
    *,
    skip_hash_check: bool = False,
) -> list[str]:
    """Run the tool into a staging dir inside `data_dir` (same filesystem, even when
    data_dir is a mount point), move its member/ dir up, write the marker last; returns the
    command as it would read for `data_dir` itself. `skip_hash_check`: the snapshot is a
    member's own database, which has no hash trailer."""
    os.makedirs(data_dir, mode=0o700, exist_ok=True)
    for leftover in os.listdir(data_dir):
        if leftover.startswith(STAGING_PREFIX):
            shutil.rmtree(os.path.join(data_dir, leftover), ignore_errors=True)
    staging = tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=data_dir)
    try:
        target = os.path.join(staging, "data")
        command = restore_command(tool, snapshot, target, spec, skip_hash_check=skip_hash_check)
        tool.restore(command)
        for entry in os.listdir(target):
            os.rename(os.path.join(target, entry), os.path.join(data_dir, entry))
        marker = {**spec.as_dict(), "tool": tool.path, "tool_version": tool.version}
        partial = os.path.join(staging, MARKER)
        with open(partial, "w", encoding="utf-8") as handle:
            json.dump(marker, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.rename(partial, os.path.join(data_dir, MARKER))
        return [part.replace(target, data_dir) for part in command]
    finally:
        shutil.rmtree(staging, ignore_errors=True)
