"""A stopped member's own database, copied out as a snapshot a restore can read.

When a majority's data is gone, the survivor's bbolt file (`member/snap/db`) is the newest data
there is, and recovery restores it as a snapshot into a new cluster (docs/design-decisions.md,
"A majority's data gone"). The survivor's data dir is read, never written: if the recovery
fails, it is still there to try again or to hand to a person.

The member must be stopped. A copy of a database that etcd is writing can be torn, and etcd
holds a write lock (an open-file-description lock) on its WAL files while it runs, which a
POSIX read lock here conflicts with; so a held lock is a running member and is refused. etcd
commits its backend when it stops on SIGTERM, so a cleanly stopped member's file holds every
entry it applied. One killed mid-commit loses at most its last uncommitted batch (etcd's
default batch interval is 100 ms): those writes reached its WAL but not its database, and a
snapshot restore reads only the database. The copied file has no sha256 trailer (only
`snapshot save` appends one), so its restore runs with --skip-hash-check; `snapshot status`
walks the whole bbolt file first, so a torn or foreign file is refused before anything is
written.
"""

from __future__ import annotations

import fcntl
import hashlib
import os

from etcd_runbook.clients.etcd_errors import EtcdInputError, EtcdModuleError, EtcdRefusedError
from etcd_runbook.clients.etcd_snapshot_io import (
    READ_CHUNK,
    SnapshotFile,
    replaced_atomically,
    write_all,
)

DB = os.path.join("member", "snap", "db")
WAL = os.path.join("member", "wal")


def member_db(data_dir: str) -> str:
    """The database file of the member data dir `data_dir`; raises when there is none."""
    path = os.path.join(data_dir, DB)
    if not os.path.isfile(path):
        raise EtcdInputError(
            f"member_data_dir {data_dir} holds no etcd database ({DB} is missing): give the "
            "data dir of a member (the directory etcd's --data-dir named)"
        )
    return path


def running_lock(data_dir: str) -> str:
    """The WAL file of `data_dir` a running etcd holds locked, or "" when none is."""
    wal_dir = os.path.join(data_dir, WAL)
    try:
        names = sorted(n for n in os.listdir(wal_dir) if n.endswith(".wal"))
    except FileNotFoundError:
        return ""
    for name in names:
        path = os.path.join(wal_dir, name)
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return path
        finally:
            os.close(fd)  # closing drops the read lock taken above
    return ""


def check_stopped(data_dir: str) -> str:
    """The database of a stopped member's data dir; raises when a running etcd holds it."""
    path = member_db(data_dir)
    locked = running_lock(data_dir)
    if locked:
        raise EtcdRefusedError(
            f"member_data_dir {data_dir} belongs to a running etcd (it holds {locked} locked): "
            "stop that member first; a database copied while etcd writes it can be torn"
        )
    return path


def copy_member_db(data_dir: str, path: str) -> SnapshotFile:
    """Copy the stopped member's database to `path` (a new file, whole or not at all)."""
    root = os.path.realpath(data_dir)
    if os.path.commonpath([root, os.path.realpath(path)]) == root:
        raise EtcdInputError(
            f"path {path} is inside member_data_dir {data_dir}, which is read, never written: "
            "give a path elsewhere"
        )
    source = check_stopped(data_dir)
    digest = hashlib.sha256()
    size = 0
    try:
        with open(source, "rb") as src, replaced_atomically(path) as fd:
            while chunk := src.read(READ_CHUNK):
                write_all(fd, chunk)
                digest.update(chunk)
                size += len(chunk)
    except OSError as exc:
        raise EtcdModuleError(
            f"cannot copy {source} to {path}: {exc}", reason="InvalidInput"
        ) from exc
    if running_lock(data_dir):
        os.unlink(path)
        raise EtcdRefusedError(
            f"member_data_dir {data_dir} was started while its database was copied: the copy "
            "was discarded; stop that member and try again"
        )
    return SnapshotFile(path=path, size=size, sha256=digest.hexdigest())
