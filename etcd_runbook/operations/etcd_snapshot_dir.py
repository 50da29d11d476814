"""Snapshots kept in a directory: a PersistentVolumeClaim mounted into the backup or restore
Job, or, by hand, a local directory.

The layout is the store's (etcd_snapshot_catalog): `<root>/<key>` and its manifest
`<root>/<key>.json`, so a key means the same thing in a bucket and on a volume, and retention
and restore read both alike. A snapshot is written to a hidden temp file beside its key,
checked and fsynced, then renamed (etcd_snapshot_io.verified_rename); hidden names are never
listed, so a half-written snapshot is not a snapshot. The manifest is written the same way,
after the snapshot. Files are 0600 and new directories 0700: a snapshot holds every key.

Every filesystem failure becomes an `EtcdModuleError` whose `reason` a condition can carry:
VolumeMissing (the directory is not there: a claim not mounted), VolumeNotWritable,
VolumeFull, SnapshotMissing, VolumeError.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from etcd_runbook.clients.etcd_errors import EtcdInputError, EtcdModuleError
from etcd_runbook.clients.etcd_snapshot_io import (
    READ_CHUNK,
    HashingWriter,
    SnapshotFile,
    expect_snapshot,
    fsync_dir,
    replaced_atomically,
    save_atomically,
    verified_rename,
    write_all,
)
from etcd_runbook.rules.etcd_snapshot_catalog import (
    MANIFEST_MAX_BYTES,
    SnapshotCatalog,
    manifest_body,
    manifest_key,
    parse_manifest,
    rfc3339,
)

_REASONS = {
    errno.ENOENT: "VolumeMissing",
    errno.ENOTDIR: "VolumeMissing",
    errno.EACCES: "VolumeNotWritable",
    errno.EPERM: "VolumeNotWritable",
    errno.EROFS: "VolumeNotWritable",
    errno.ENOSPC: "VolumeFull",
    errno.EDQUOT: "VolumeFull",
}


class DirectoryError(EtcdModuleError):
    reason = "VolumeError"


def explain(exc: OSError, operation: str, path: str) -> DirectoryError:
    reason = _REASONS.get(exc.errno or 0, "VolumeError")
    hint = {
        "VolumeMissing": " (is the volume mounted there?)",
        "VolumeNotWritable": " (the volume is read-only, or its owner is another user)",
        "VolumeFull": " (the volume is full: prune, or give it more room)",
    }.get(reason, "")
    return DirectoryError(f"{operation} {path} failed: {exc.strerror or exc}{hint}", reason=reason)


class DirectoryStore(SnapshotCatalog):
    """The calls the modules make on a directory, each failure explained once here."""

    def __init__(self, root: str):
        if not root or not os.path.isabs(root):
            raise EtcdInputError(f"directory must be an absolute path, not {root!r}")
        self.root = os.path.normpath(root)

    def where(self, key: str | None = None) -> str:
        return os.path.join(self.root, key or "")

    def path(self, key: str) -> str:
        """The file of `key`, refusing a key that would leave the root or name a hidden
        file (temp files are hidden)."""
        parts = key.split("/")
        if not key or key.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise EtcdInputError(f"key {key!r} must be a relative path without . or .. parts")
        if any(p.startswith(".") for p in parts):
            raise EtcdInputError(f"key {key!r} names a hidden file; snapshots are never hidden")
        return os.path.join(self.root, *parts)

    def check_access(self, prefix: str = "", *, write: bool = False) -> None:
        if not os.path.isdir(self.root):
            raise DirectoryError(
                f"directory {self.root} does not exist (is the volume mounted there?)",
                reason="VolumeMissing",
            )
        if write and not os.access(self.root, os.W_OK | os.X_OK):
            raise DirectoryError(
                f"directory {self.root} is not writable by uid {os.getuid()} (the volume is "
                "read-only, or its owner is another user)",
                reason="VolumeNotWritable",
            )

    def stat(self, key: str) -> dict[str, Any] | None:
        path = self.path(key)
        try:
            found = os.stat(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise explain(exc, "stat", path) from None
        return {"key": key, "size": found.st_size, "time": _mtime(found.st_mtime)}

    def read_manifest(self, key: str) -> dict[str, Any] | None:
        path = self.path(manifest_key(key))
        try:
            with open(path, "rb") as handle:
                body = handle.read(MANIFEST_MAX_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise explain(exc, "read manifest", path) from None
        return parse_manifest(body)

    def write_manifest(self, key: str, manifest: dict[str, Any]) -> None:
        path = self.path(manifest_key(key))
        try:
            with replaced_atomically(path) as fd:
                write_all(fd, manifest_body(manifest))
        except OSError as exc:
            raise explain(exc, "write manifest", path) from None

    def remove(self, key: str) -> None:
        path = self.path(key)
        try:
            os.unlink(path)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise explain(exc, "delete", path) from None
        fsync_dir(os.path.dirname(path))

    def list_keys(self, prefix: str, recursive: bool = False) -> list[dict[str, Any]]:
        # A prefix not written yet lists nothing, but an unmounted volume is not an empty one.
        self.check_access(prefix)
        # Walk from the deepest directory the prefix names; keys are then matched on the
        # whole prefix, as a store matches them.
        start = os.path.join(self.root, *[p for p in prefix.split("/")[:-1] if p])
        found: list[dict[str, Any]] = []

        def failed(exc: OSError) -> None:
            if not isinstance(exc, FileNotFoundError):
                raise explain(exc, "list", exc.filename or start)

        for directory, subdirs, files in os.walk(start, onerror=failed):
            # Not recursive: the files of the prefix's own directory only, as a store lists
            # with a delimiter.
            subdirs[:] = [d for d in subdirs if recursive and not d.startswith(".")]
            for name in files:
                if name.startswith("."):
                    continue
                path = os.path.join(directory, name)
                key = os.path.relpath(path, self.root).replace(os.sep, "/")
                if not key.startswith(prefix):
                    continue
                try:
                    info = os.stat(path)
                except FileNotFoundError:
                    continue  # pruned while listing
                except OSError as exc:
                    raise explain(exc, "stat", path) from None
                found.append({"key": key, "size": info.st_size, "time": _mtime(info.st_mtime)})
        return found

    def save(self, key: str, stream_into: Callable[[HashingWriter], object]) -> SnapshotFile:
        """Stream a snapshot into `key`: checked, fsynced, then renamed into place."""
        path = self.path(key)
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            return save_atomically(path, stream_into)
        except OSError as exc:
            raise explain(exc, "save the snapshot to", path) from None

    def copy_out(
        self, key: str, path: str, *, sha256: str, size: int | None, read_back: bool = False
    ) -> SnapshotFile:
        """Copy snapshot `key` to `path` the way a download goes: checked on the way
        (etcd's hash, sha256, size), and `path` appears only when it all matched."""
        source = self.path(key)

        def fill(writer: HashingWriter) -> None:
            try:
                with open(source, "rb") as handle:
                    while chunk := handle.read(READ_CHUNK):
                        writer.write(chunk)
            except FileNotFoundError:
                raise DirectoryError(
                    f"no snapshot at {source}: nothing was copied", reason="SnapshotMissing"
                ) from None
            except OSError as exc:
                raise explain(exc, "read", source) from None

        return verified_rename(
            path,
            "copy the snapshot",
            fill,
            expect_snapshot(source, sha256, size),
            direct=not read_back,
        )


def _mtime(seconds: float) -> str:
    return rfc3339(datetime.fromtimestamp(seconds, UTC))
