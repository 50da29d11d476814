"""Restore a snapshot into a new member data dir, once, leaving a marker that says so.

etcd's tool writes the data dir in place and leaves a half-written one behind when it fails
(disk full, killed). So the restore goes into a temp dir beside the target and is renamed
into place only when complete, with a marker file inside it naming the snapshot (by sha256)
and the new cluster's identity. A second run finds the marker and changes nothing; any other
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

from ansible.module_utils.etcd_errors import EtcdRefusedError
from ansible.module_utils.etcd_snapshot_tool import SnapshotTool

MARKER = ".etcd-runbook-restore.json"


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


def already_restored(data_dir: str, spec: RestoreSpec) -> bool:
    """True when `data_dir` holds this very restore; raises when it holds anything else
    (an empty or missing dir is False: restore into it)."""
    if not os.path.exists(data_dir):
        return False
    if not os.path.isdir(data_dir):
        raise EtcdRefusedError(f"data_dir {data_dir} exists and is not a directory")
    if not os.listdir(data_dir):
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


def restore(tool: SnapshotTool, snapshot: str, data_dir: str, spec: RestoreSpec) -> list[str]:
    """Run the tool into a temp dir beside `data_dir`, then rename it into place; returns
    the command that was run."""
    parent = os.path.dirname(os.path.abspath(data_dir)) or "."
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(data_dir)}.restore-", dir=parent)
    try:
        target = os.path.join(staging, "data")
        command = tool.restore_command(
            snapshot,
            target,
            name=spec.name,
            initial_cluster=spec.initial_cluster,
            initial_cluster_token=spec.initial_cluster_token,
            initial_advertise_peer_urls=spec.initial_advertise_peer_urls,
            bump_revision=spec.bump_revision,
        )
        tool.restore(command)
        with open(os.path.join(target, MARKER), "w", encoding="utf-8") as handle:
            json.dump({**spec.as_dict(), "tool": tool.path, "tool_version": tool.version}, handle)
        os.chmod(target, 0o700)
        # rename(2) replaces an empty directory, so an empty data_dir (a fresh mount) is fine.
        os.rename(target, data_dir)
        return [part.replace(target, data_dir) for part in command]
    finally:
        shutil.rmtree(staging, ignore_errors=True)
