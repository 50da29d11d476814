"""etcd's own snapshot tool, run as a process: `etcdutl` (3.5+) or `etcdctl` (3.4).

Restore must use the tool of the etcd version that will run the restored data. etcd 3.4 has
no etcdutl; its `etcdctl snapshot restore` does the same job, and from 3.4.31 on (checked in
its source: the flags appear between 3.4.25 and 3.4.31) it also has --bump-revision and
--mark-compacted. Whether the given tool has them is read from its --help, not guessed from
its version.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from typing import Any

from etcd_runbook.clients.etcd_errors import EtcdInputError, EtcdModuleError

TOOL_TIMEOUT = 600.0


@dataclass(frozen=True)
class SnapshotTool:
    path: str
    kind: str  # "etcdutl" or "etcdctl"
    version: str

    def _run(self, args: list[str], what: str) -> str:
        env = dict(os.environ, ETCDCTL_API="3")
        try:
            proc = subprocess.run(
                [self.path, *args],
                capture_output=True,
                text=True,
                env=env,
                timeout=TOOL_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EtcdModuleError(f"{what} with {self.path} failed: {exc}") from exc
        if proc.returncode != 0:
            output = (proc.stderr.strip() or proc.stdout.strip())[-2000:]
            raise EtcdModuleError(
                f"{what} with {self.path} failed (exit {proc.returncode}): {output}",
                reason="SnapshotToolFailed",
            )
        return proc.stdout

    def status(self, snapshot: str) -> dict[str, Any]:
        """`snapshot status -w json`: revision, totalKey, totalSize, hash (bbolt walked)."""
        out = self._run(["snapshot", "status", snapshot, "-w", "json"], "snapshot status")
        try:
            return dict(json.loads(out.strip().splitlines()[-1]))
        except (ValueError, IndexError) as exc:
            raise EtcdModuleError(f"cannot parse `snapshot status` output: {out!r}") from exc

    def supports_bump_revision(self) -> bool:
        return "--bump-revision" in self._run(["snapshot", "restore", "--help"], "restore --help")

    def restore_command(
        self,
        snapshot: str,
        data_dir: str,
        *,
        name: str,
        initial_cluster: str,
        initial_cluster_token: str,
        initial_advertise_peer_urls: str,
        bump_revision: int,
        skip_hash_check: bool = False,
    ) -> list[str]:
        command = [
            self.path,
            "snapshot",
            "restore",
            snapshot,
            f"--data-dir={data_dir}",
            f"--name={name}",
            f"--initial-cluster={initial_cluster}",
            f"--initial-cluster-token={initial_cluster_token}",
            f"--initial-advertise-peer-urls={initial_advertise_peer_urls}",
        ]
        if bump_revision > 0:
            # etcd requires --mark-compacted with a bump: watchers of revisions that never
            # existed in the new cluster get "compacted" instead of silently missing events.
            command += [f"--bump-revision={bump_revision}", "--mark-compacted"]
        if skip_hash_check:
            # A member's own database has no sha256 trailer: only `snapshot save` appends one.
            command.append("--skip-hash-check")
        return command

    def restore(self, command: list[str]) -> None:
        self._run(command[1:], "snapshot restore")


def find_tool(etcdutl: str | None, bin_dir: str | None) -> SnapshotTool:
    """The tool from an explicit binary path or a directory holding etcdutl (or, for 3.4,
    only etcdctl)."""
    if etcdutl:
        candidates = [etcdutl]
    elif bin_dir:
        candidates = [os.path.join(bin_dir, "etcdutl"), os.path.join(bin_dir, "etcdctl")]
    else:
        raise EtcdInputError("give etcdutl (the binary) or bin_dir (the directory holding it)")
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return _identify(path)
    raise EtcdInputError(f"no executable etcdutl/etcdctl found at {' or '.join(candidates)}")


def _identify(path: str) -> SnapshotTool:
    try:
        proc = subprocess.run(
            [path, "version"],
            capture_output=True,
            text=True,
            env=dict(os.environ, ETCDCTL_API="3"),
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EtcdInputError(f"cannot run {path} version: {exc}") from exc
    match = re.search(r"(etcdutl|etcdctl) version:\s*(\S+)", proc.stdout)
    if proc.returncode != 0 or match is None:
        raise EtcdInputError(f"{path} is not etcdutl or etcdctl: `version` printed {proc.stdout!r}")
    return SnapshotTool(path=path, kind=match.group(1), version=match.group(2))
