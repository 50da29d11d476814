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

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import mmap
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from etcd_runbook.clients.etcd_errors import EtcdModuleError

TRAILER_SIZE = hashlib.sha256().digest_size
SECTOR = 512
READ_CHUNK = 4 * 1024 * 1024
# O_DIRECT writes: whole blocks from a page-aligned buffer, at aligned offsets.
O_DIRECT = getattr(os, "O_DIRECT", 0)
DIRECT_ALIGN = 4096
DIRECT_BLOCK = 4 * 1024 * 1024


# glibc's mallopt parameters (malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
MiB = 1024 * 1024


def set_allocator(settings: dict[int, int]) -> None:
    """glibc mallopt(3) for this process (a module process streams one snapshot and exits);
    nothing to do elsewhere."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    for param, value in settings.items():
        mallopt(param, value)


def keep_freed_memory() -> None:
    """Let the process reuse the memory the stream frees instead of handing it back.

    gRPC and Python allocate and free every 32 KiB message (32,768 per GiB) on several
    threads; with glibc's defaults each arena gives its freed top back to the kernel
    (trimming) and faults it in again a moment later. Measured here (1 GiB, receiving alone):
    232,000 page faults and 3.0 CPU-seconds; with a trim threshold of 64 MiB and a fixed mmap
    threshold of 4 MiB, 19,000 and 2.4. The memory kept is bounded by what the stream has in
    flight (its queues), not by the snapshot's size."""
    set_allocator({M_TRIM_THRESHOLD: 64 * MiB, M_MMAP_THRESHOLD: 4 * MiB})


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

    def update(self, data: bytes | memoryview) -> None:
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
    """The snapshot stream's sink for a file: hashes every byte and writes it to a raw file
    descriptor, both from one page-aligned buffer of DIRECT_BLOCK bytes.

    The chunks etcd sends (32 KiB) are copied into the buffer; each full buffer is hashed in
    one call and written in one write(2), both without the GIL, so the thread receiving the
    stream is interrupted once per block instead of twice per message. With `direct` (the
    descriptor has O_DIRECT) the writes go past the page cache; `finish` hashes and writes
    what is left (the unaligned tail without O_DIRECT). Measured here (1 GiB): copying a
    snapshot into the page cache cost 3.0-3.8 CPU-seconds of kernel time (fresh pages on this
    VM) and the fsync after it 0.5 s, direct writes 0.2 CPU-seconds; on a node, the page cache
    also keeps etcd's own database instead of a backup nobody reads again. Where the
    filesystem refuses an O_DIRECT write (EINVAL), the writer drops the flag and goes on
    buffered."""

    def __init__(self, fd: int, *, direct: bool = False):
        self._fd = fd
        self.hasher = TrailerHasher()
        self._direct = direct
        self._buffer: mmap.mmap | None = mmap.mmap(-1, DIRECT_BLOCK)
        self._filled = 0

    def write(self, data: bytes) -> int:
        self.write_many([data])
        return len(data)

    def write_many(self, chunks: list[bytes]) -> None:
        buffer = self._buffer
        if buffer is None:
            raise ValueError("write to a finished HashingWriter")
        for chunk in chunks:
            view = memoryview(chunk)
            while view:
                take = min(len(view), DIRECT_BLOCK - self._filled)
                buffer[self._filled : self._filled + take] = view[:take]
                self._filled += take
                view = view[take:]
                if self._filled == DIRECT_BLOCK:
                    self._hash_and_write(DIRECT_BLOCK)
                    self._filled = 0

    def finish(self) -> None:
        """Hash and write what the buffer still holds (whole aligned blocks directly, the
        tail buffered: O_DIRECT takes only whole blocks), then release the buffer."""
        if self._buffer is None:
            return
        filled = self._filled
        aligned = filled - filled % DIRECT_ALIGN
        self._hash_and_write(aligned, hash_size=filled)
        if filled > aligned:
            self._go_buffered()
            with memoryview(self._buffer) as whole:
                write_all(self._fd, whole[aligned:filled])
        self.close()

    def close(self) -> None:
        """Release the buffer (what it still holds is dropped: call `finish` first)."""
        if self._buffer is not None:
            self._buffer.close()
            self._buffer = None
        self._filled = 0

    def _hash_and_write(self, size: int, hash_size: int | None = None) -> None:
        assert self._buffer is not None
        with memoryview(self._buffer) as whole:
            self.hasher.update(whole[: size if hash_size is None else hash_size])
            done = 0
            while done < size:
                try:
                    done += os.write(self._fd, whole[done:size])
                except OSError as exc:
                    # EINVAL comes before anything is written: this filesystem does not
                    # take O_DIRECT writes (or not at this offset, after a short write).
                    if exc.errno != errno.EINVAL or not self._direct:
                        raise
                    self._go_buffered()

    def _go_buffered(self) -> None:
        if self._direct:
            flags = fcntl.fcntl(self._fd, fcntl.F_GETFL)
            fcntl.fcntl(self._fd, fcntl.F_SETFL, flags & ~O_DIRECT)
            self._direct = False


def _try_direct(fd: int) -> bool:
    """Set O_DIRECT on `fd`; False where the platform or the filesystem has none."""
    if not O_DIRECT:
        return False
    try:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | O_DIRECT)
    except OSError:
        return False
    return True


@contextlib.contextmanager
def replaced_atomically(path: str) -> Iterator[int]:
    """The one way a file of ours appears: the block writes into a hidden temp file beside
    `path` (mode 0600, from mkstemp), which is then fsynced, renamed over `path`, and the
    directory fsynced. If the block raises, the temp file is removed and `path` is untouched.
    Hidden names are never listed as snapshots (etcd_snapshot_dir)."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".part", dir=directory)
    try:
        try:
            yield fd
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
    fsync_dir(directory)


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def verified_rename(
    path: str,
    what: str,
    fill: Callable[[HashingWriter], object],
    check: Callable[[TrailerHasher], None],
    *,
    direct: bool = True,
) -> SnapshotFile:
    """The one way a snapshot file appears (saved from etcd or downloaded from a store).

    `fill` writes the bytes into a HashingWriter over a temp file beside `path`, created
    with mode 0600 (a snapshot holds every key, secrets included); then `check` must pass
    (etcd's hash, and whatever else the caller expects of the bytes), the file is fsynced,
    renamed over `path`, and the directory fsynced. On any failure the temp file is removed
    and `path` is untouched. `direct`: write past the page cache where the filesystem
    allows (see HashingWriter)."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise EtcdModuleError(
            f"cannot {what} to {path}: directory {directory} does not exist",
            reason="InvalidInput",
        )
    with replaced_atomically(path) as fd:
        writer = HashingWriter(fd, direct=direct and _try_direct(fd))
        try:
            fill(writer)
            writer.finish()
        finally:
            writer.close()
        check(writer.hasher)
    hasher = writer.hasher
    return SnapshotFile(path=path, size=hasher.size, sha256=hasher.file_sha256())


def expect_snapshot(where: str, sha256: str, size: int | None) -> Callable[[TrailerHasher], None]:
    """The check of a copied snapshot (downloaded, or read from a volume): etcd's hash, then
    the sha256 and size its manifest (or the person) expects."""

    def check(hasher: TrailerHasher) -> None:
        if size is not None and hasher.size != size:
            raise SnapshotIntegrityError(
                f"snapshot {where} is {hasher.size} bytes, not the {size} its manifest "
                "records: it is truncated or was replaced"
            )
        hasher.verify(f"snapshot {where}")
        actual = hasher.file_sha256()
        if actual != sha256:
            raise SnapshotIntegrityError(
                f"snapshot {where} has sha256 {actual}, not the expected {sha256}"
            )

    return check


def save_atomically(
    path: str, stream_into: Callable[[HashingWriter], object], *, read_back: bool = False
) -> SnapshotFile:
    """Stream a snapshot into a temp file beside `path`, check etcd's hash, fsync, then
    rename over `path`. On any failure the temp file is removed and `path` is untouched.

    `read_back`: the caller reads the whole file right after (`etcdutl snapshot status`),
    so it is written through the page cache, where that read finds it. Measured here (1 GiB):
    `snapshot status` of a file written with O_DIRECT took 28-35 s (the whole database
    read from disk page by page through bbolt's mmap), of one still in the page cache
    0.75 s."""
    keep_freed_memory()
    return verified_rename(
        path,
        "save the snapshot",
        stream_into,
        lambda hasher: hasher.verify("the snapshot streamed by etcd"),
        direct=not read_back,
    )


def fsync_dir(directory: str) -> None:
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
