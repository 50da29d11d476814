"""Snapshot files: written atomically while streaming, and checked against etcd's own hash.

A snapshot that etcd streams (Maintenance.Snapshot, what `etcdctl snapshot save` stores) is
the bbolt database followed by the 32-byte sha256 of that database. etcd pads the database
to whole 512-byte sectors, so a file holds that trailer exactly when its size modulo 512 is
32 (the same test `etcdutl snapshot restore` applies). A copy of `member/snap/db` taken from
a data dir has no trailer and cannot be verified: it is refused.

The hash is computed while the bytes stream in (the last 32 bytes seen are held back, since
only the end of the stream tells which bytes are the trailer), so saving reads nothing twice,
and the file's own sha256 (what `sha256sum` prints) comes from the same pass.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ansible.module_utils.etcd_errors import EtcdModuleError

TRAILER_SIZE = hashlib.sha256().digest_size
SECTOR = 512
READ_CHUNK = 4 * 1024 * 1024


class SnapshotIntegrityError(EtcdModuleError):
    """The snapshot's bytes do not match etcd's hash, or the file has no hash."""

    reason = "SnapshotCorrupt"


@dataclass(frozen=True)
class SnapshotFile:
    path: str
    size: int
    sha256: str  # of the whole file, as sha256sum prints it

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "sha256": self.sha256}


def has_trailer(size: int) -> bool:
    return size % SECTOR == TRAILER_SIZE


class TrailerHasher:
    """Hashes a stream whose last 32 bytes are the sha256 of everything before them."""

    def __init__(self) -> None:
        self._db = hashlib.sha256()
        self._tail = b""
        self.size = 0

    def update(self, data: bytes) -> None:
        self.size += len(data)
        if len(data) >= TRAILER_SIZE:
            self._db.update(self._tail)
            view = memoryview(data)
            self._db.update(view[:-TRAILER_SIZE])
            self._tail = bytes(view[-TRAILER_SIZE:])
        else:
            joined = self._tail + data
            self._db.update(joined[:-TRAILER_SIZE])
            self._tail = joined[-TRAILER_SIZE:]

    def file_sha256(self) -> str:
        whole = self._db.copy()
        whole.update(self._tail)
        return whole.hexdigest()

    def verify(self, what: str) -> None:
        """Raise unless the stream ended with the sha256 of the bytes before it."""
        if not has_trailer(self.size):
            raise SnapshotIntegrityError(
                f"{what} has no etcd integrity hash ({self.size} bytes is not a whole number "
                "of 512-byte sectors plus a 32-byte sha256): it is truncated, or is a copy of "
                "a data dir's db file rather than a snapshot"
            )
        if self._db.digest() != self._tail:
            raise SnapshotIntegrityError(
                f"{what} is corrupt: the sha256 of its database ({self._db.hexdigest()}) does "
                f"not match the hash etcd appended ({self._tail.hex()})"
            )


class HashingWriter:
    """A binary sink for the snapshot stream that hashes every chunk and writes it to a raw
    file descriptor. Hashing and writing are separate calls so a streamer can run them on two
    threads (each releases the GIL for its bulk work), each seeing the chunks in order.
    Unbuffered on purpose: `write_many` hands a list of chunks to one writev(2), so nothing
    is copied in Python between the gRPC message and the kernel."""

    def __init__(self, fd: int):
        self._fd = fd
        self.hasher = TrailerHasher()

    def write(self, data: bytes) -> int:
        self.hash_many([data])
        self.write_many([data])
        return len(data)

    def hash_many(self, chunks: list[bytes]) -> None:
        for chunk in chunks:
            self.hasher.update(chunk)

    def write_many(self, chunks: list[bytes]) -> None:
        total = sum(len(chunk) for chunk in chunks)
        written = os.writev(self._fd, chunks)
        if written < total:  # a short write (rare on regular files): finish byte-exactly
            rest = memoryview(b"".join(chunks))[written:]
            while rest:
                rest = rest[os.write(self._fd, rest) :]


def save_atomically(path: str, stream_into: Callable[[HashingWriter], object]) -> SnapshotFile:
    """Stream a snapshot into a temp file beside `path`, check its hash, fsync, then rename
    over `path`. On any failure the temp file is removed and `path` is untouched."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise EtcdModuleError(
            f"cannot save the snapshot to {path}: directory {directory} does not exist",
            reason="InvalidInput",
        )
    fd, temp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".part", dir=directory)
    try:
        try:
            writer = HashingWriter(fd)
            stream_into(writer)
            writer.hasher.verify("the snapshot streamed by etcd")
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
    _fsync_dir(directory)
    return SnapshotFile(path=path, size=writer.hasher.size, sha256=writer.hasher.file_sha256())


def _fsync_dir(directory: str) -> None:
    """Make the rename itself durable."""
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def verify_file(path: str) -> SnapshotFile:
    """Read a snapshot file, check etcd's hash, return its size and sha256."""
    hasher = TrailerHasher()
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(READ_CHUNK):
                hasher.update(chunk)
    except OSError as exc:
        raise EtcdModuleError(f"cannot read snapshot {path}: {exc}", reason="InvalidInput") from exc
    hasher.verify(f"snapshot {path}")
    return SnapshotFile(path=path, size=hasher.size, sha256=hasher.file_sha256())


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(READ_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
