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
written. Copied out on its own (the recovery Job's first step runs where there is no etcdutl),
the file is first checked as bbolt opens it: a valid meta page, and a file as long as the pages
that meta page says were written.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import struct

from etcd_runbook.clients.etcd_errors import EtcdInputError, EtcdModuleError, EtcdRefusedError
from etcd_runbook.clients.etcd_snapshot_io import (
    READ_CHUNK,
    SnapshotFile,
    SnapshotIntegrityError,
    replaced_atomically,
    write_all,
)

DB = os.path.join("member", "snap", "db")
WAL = os.path.join("member", "wal")

# bbolt's meta page (go.etcd.io/bbolt page.go, db.go): after a 16-byte page header, magic,
# version, page size, flags (u32 each), the root bucket (two u64), then the freelist's page,
# the high-water page id, the txid and the checksum (u64 each, the FNV-1a 64 of the bytes
# before it). bbolt writes it in the machine's byte order: little-endian where etcd runs.
PAGE_HEADER = 16
META = struct.Struct("<4I2Q4Q")
MAGIC = 0xED0CDAED
VERSION = 2
FNV_OFFSET, FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3


def member_db(data_dir: str) -> str:
    """The database file of the member data dir `data_dir`; raises when there is none."""
    path = os.path.join(data_dir, DB)
    if not os.path.isfile(path):
        raise EtcdInputError(
            f"member_data_dir {data_dir} holds no etcd database ({DB} is missing): give the "
            "data dir of a member (the directory etcd's --data-dir named)"
        )
    return path


def fnv1a64(data: bytes) -> int:
    """The checksum bbolt writes into a meta page: FNV-1a, 64 bits."""
    value = FNV_OFFSET
    for byte in data:
        value = ((value ^ byte) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return value


def meta_page(raw: bytes) -> tuple[int, int, int] | None:
    """(page size, high-water page id, txid) of a bbolt meta page's body, or None when it is
    not a valid one (foreign, another bbolt version, or torn: its checksum fails)."""
    if len(raw) < META.size:
        return None
    magic, version, page_size, _, _, _, _, pgid, txid, checksum = META.unpack_from(raw)
    if magic != MAGIC or version != VERSION:
        return None
    if checksum != fnv1a64(raw[: META.size - 8]):
        return None
    return page_size, pgid, txid


def bbolt_problem(metas: list[tuple[int, int, int] | None], size: int) -> str:
    """Why a file of `size` bytes with these two meta pages is no database bbolt would open
    whole ("" when none). bbolt uses the valid meta page of the newest txid (a crash while
    writing one leaves the other); the pages below its high-water id must all be there."""
    valid = [meta for meta in metas if meta is not None]
    if not valid:
        return "it is not an etcd (bbolt) database: neither of its meta pages is valid"
    page_size, pgid, _ = max(valid, key=lambda meta: meta[2])
    if size < pgid * page_size:
        return (
            f"it is truncated: {size} bytes, where its meta page counts {pgid} pages of "
            f"{page_size} bytes"
        )
    return ""


def check_database(path: str) -> None:
    """Raise unless `path` is a whole bbolt database, as far as its meta pages tell."""
    with open(path, "rb") as handle:
        first = meta_page(handle.read(PAGE_HEADER + META.size)[PAGE_HEADER:])
        # bbolt finds the second meta page by the first one's page size, else the machine's.
        handle.seek((first[0] if first else os.sysconf("SC_PAGE_SIZE")) + PAGE_HEADER)
        second = meta_page(handle.read(META.size))
        problem = bbolt_problem([first, second], os.fstat(handle.fileno()).st_size)
    if problem:
        raise SnapshotIntegrityError(f"{path} cannot be copied out: {problem}")


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


def check_outside(data_dir: str, path: str) -> None:
    """Raise when the copy `path` would be written into the member's own data dir."""
    root = os.path.realpath(data_dir)
    if os.path.commonpath([root, os.path.realpath(path)]) == root:
        raise EtcdInputError(
            f"path {path} is inside member_data_dir {data_dir}, which is read, never written: "
            "give a path elsewhere"
        )


def copy_member_db(data_dir: str, path: str) -> SnapshotFile:
    """Copy the stopped member's database to `path` (a new file, whole or not at all)."""
    check_outside(data_dir, path)
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
