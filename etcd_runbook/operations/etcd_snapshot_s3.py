"""Snapshots streamed into and out of an S3-compatible store, never held whole in memory nor
written to a local temporary file on the way up.

Upload: `stream_snapshot` (etcd_snapshot_stream) pushes etcd's messages into an
`UploadPipe`, which hands them to minio's `put_object`, running on a thread of its own with
an unknown length: it reads parts of PART_SIZE and sends each as one part of a multipart
upload. The pipe hashes each part as it is read (etcd's trailer and the file's sha256, as for
a local file) and reports end of stream only once etcd's hash has been checked; when the
check fails (or etcd's stream breaks) the pipe raises inside `put_object`, which aborts the
multipart upload, so nothing is ever listed under the key. Completing the multipart upload
is the atomic finish. Memory stays bounded by the queues (a few MiB) and one part being read
and sent.

Download: the object is read in chunks into a temporary file beside the target path, hashed
on the way (etcd's trailer and the file's sha256), compared with the expected sha256 and size,
fsynced and only then renamed into place (etcd_snapshot_io's `verified_rename`, the same steps
a snapshot saved from etcd goes through).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from etcd_runbook.clients.etcd_errors import EtcdModuleError
from etcd_runbook.clients.etcd_s3 import S3Error, SnapshotStore, explain
from etcd_runbook.clients.etcd_snapshot_io import (
    M_ARENA_MAX,
    M_MMAP_THRESHOLD,
    M_TRIM_THRESHOLD,
    READ_CHUNK,
    HashingWriter,
    MiB,
    SnapshotFile,
    TrailerHasher,
    expect_snapshot,
    set_allocator,
    verified_rename,
)

# S3 allows at most 10,000 parts: 8 MiB parts carry snapshots of up to 78 GiB, far past
# etcd's 8 GiB suggested quota, and keep one part's buffers small.
PART_SIZE = 8 * MiB
PIPE_BLOCKS = 4  # lists of ~1 MiB of etcd messages waiting for the uploader
PUT_POLL_SECONDS = 0.2
# Past this much growth of the process's RSS since the pipe was made, freed memory is handed
# back to the kernel (malloc_trim) before the next part; see bound_allocator.
RSS_BUDGET = 96 * MiB
SNAPSHOT_SUFFIX = ".db"


def bound_allocator() -> None:
    """Make the process's RSS follow its live data while parts stream through it, without
    faulting every part in afresh.

    Measured here (tests/modules/test_etcd_snapshot_s3.py, snapshots of 75 and 370 MiB):
    the Python objects alive at once stay at 40-47 MiB whatever the snapshot's size, but with
    glibc's defaults the process's RSS grew by 103-275 MiB over a 370 MiB stream, varying from
    run to run: its mmap threshold rises to the size of the last part buffer freed, so later
    parts come from per-thread arenas that keep the memory. A fixed mmap threshold of 1 MiB
    and two arenas brought it to 89-119 MiB, but then every part buffer (and minio's two
    copies of it) was mmapped and faulted in anew: 858,000 page faults and 4.3 CPU-seconds of
    kernel time per GiB uploaded (bench/snapshot_s3.py's member). A fixed mmap threshold of
    32 MiB (above a part and its copies, so freed parts are reused), a trim threshold of
    64 MiB and two arenas: 30,000-54,000 faults and 1.1-1.7 s, the RSS still bounded by
    what is in flight (the test above checks it). Not glibc: nothing to do."""
    set_allocator({M_MMAP_THRESHOLD: 32 * MiB, M_TRIM_THRESHOLD: 32 * MiB, M_ARENA_MAX: 2})


def resident_bytes() -> int:
    """This process's RSS (0 where /proc is not there)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def release_freed_memory() -> None:
    """glibc's malloc_trim(0): freed pages of every arena go back to the kernel. With the
    settings above the RSS still drifted past its bound on some runs (109 to 242 MiB over a
    360 MiB stream, 2026-11-25): freed part buffers scattered over two arenas that no trim
    threshold reaches. Called only when the RSS has grown past RSS_BUDGET, so a stream that
    stays within it keeps reusing its memory without faulting it in again."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        return


class UploadStopped(EtcdModuleError):
    """The uploader thread ended before the stream did (its own error says why)."""


class _End:
    def __init__(self, error: BaseException | None):
        self.error = error


class UploadPipe:
    """A `Sink` for stream_snapshot on one side and a readable stream for put_object on the
    other. `read(n)` returns exactly n bytes (fewer only at the end) in one bytes object, so
    minio's part assembly does not concatenate thousands of small messages.

    The bytes are hashed as they leave, one call per part (not per 32 KiB message on the
    stream's sink thread: fewer GIL hand-offs), and the read that reaches the end of the
    stream checks etcd's hash before it returns: put_object cannot complete the upload
    without that last read, and a mismatch raised there makes it abort."""

    def __init__(self) -> None:
        self.hasher = TrailerHasher()
        self._queue: queue.Queue[list[bytes] | _End] = queue.Queue(maxsize=PIPE_BLOCKS)
        self._pending: deque[bytes] = deque()
        self._pending_size = 0
        self._ended = False
        self.reader_done = threading.Event()
        self._rss_start = resident_bytes()

    # The sink side (stream_snapshot's consumer thread).

    def write_many(self, chunks: list[bytes]) -> None:
        self._put(chunks)

    def end(self, error: BaseException | None) -> None:
        """No more data: a clean end (None) lets put_object complete the upload; an error
        makes it abort."""
        # When the uploader is gone already, it has nothing left to finish.
        with contextlib.suppress(UploadStopped):
            self._put(_End(error))

    def _put(self, item: list[bytes] | _End) -> None:
        while True:
            if self.reader_done.is_set():
                raise UploadStopped("the upload stopped before the snapshot stream ended")
            try:
                self._queue.put(item, timeout=PUT_POLL_SECONDS)
                return
            except queue.Full:
                continue

    # The reader side (put_object on the uploader thread).

    def read(self, size: int = -1) -> bytes:
        while not self._ended and (size < 0 or self._pending_size < size):
            item = self._queue.get()
            if isinstance(item, _End):
                self._ended = True
                if item.error is not None:
                    raise item.error
                break
            self._pending.extend(item)
            self._pending_size += sum(len(chunk) for chunk in item)
        want = self._pending_size if size < 0 else min(size, self._pending_size)
        parts: list[bytes] = []
        taken = 0
        while taken < want:
            chunk = self._pending.popleft()
            if taken + len(chunk) > want:
                cut = want - taken
                self._pending.appendleft(chunk[cut:])
                chunk = chunk[:cut]
            parts.append(chunk)
            taken += len(chunk)
        self._pending_size -= taken
        if self._rss_start and resident_bytes() - self._rss_start > RSS_BUDGET:
            release_freed_memory()
        part = b"".join(parts)
        self.hasher.update(part)
        if self._ended and not self._pending:
            self.hasher.verify("the snapshot streamed by etcd")
        return part


def upload_snapshot(
    store: SnapshotStore,
    key: str,
    stream_into: Callable[[UploadPipe], object],
    metadata: dict[str, str] | None = None,
) -> SnapshotFile:
    """Stream a snapshot into object `key`; returns its size and sha256. On any failure the
    multipart upload is aborted and nothing is listed under `key`."""
    bound_allocator()
    pipe = UploadPipe()
    outcome: dict[str, Any] = {}

    def upload() -> None:
        try:
            outcome["result"] = store.client.put_object(
                store.params.bucket,
                key,
                pipe,
                length=-1,
                part_size=PART_SIZE,
                num_parallel_uploads=1,
                metadata=metadata,
            )
        except BaseException as exc:
            outcome["error"] = exc
        finally:
            pipe.reader_done.set()

    uploader = threading.Thread(target=upload, name="snapshot-upload", daemon=True)
    uploader.start()
    try:
        stream_into(pipe)
    except BaseException as exc:
        pipe.end(exc)
        uploader.join()
        upload_error = outcome.get("error")
        if isinstance(exc, UploadStopped) and upload_error is not None:
            raise _upload_failure(store, key, upload_error) from None
        raise
    pipe.end(None)
    uploader.join()
    if "error" in outcome:
        raise _upload_failure(store, key, outcome["error"]) from None
    return SnapshotFile(
        path=store.where(key), size=pipe.hasher.size, sha256=pipe.hasher.file_sha256()
    )


def _upload_failure(store: SnapshotStore, key: str, error: BaseException) -> EtcdModuleError:
    if isinstance(error, EtcdModuleError):
        return error
    explained = explain(error, store.params, "upload", key)
    explained.message += " (the multipart upload was aborted: nothing is listed under the key)"
    return explained


def download_snapshot(
    store: SnapshotStore,
    key: str,
    path: str,
    *,
    sha256: str,
    size: int | None,
    read_back: bool = False,
) -> SnapshotFile:
    """Download object `key` to `path` atomically, checking etcd's hash, the sha256 and the
    size on the way; on a mismatch nothing is left at `path`. `read_back`: the caller reads
    the file at once (a restore), so it is written through the page cache (see
    etcd_snapshot_io.save_atomically)."""
    where = store.where(key)

    def fill(writer: HashingWriter) -> None:
        try:
            response = store.client.get_object(store.params.bucket, key)
        except Exception as exc:
            raise explain(exc, store.params, "download", key) from None
        try:
            for chunk in response.stream(READ_CHUNK):
                writer.write(chunk)
        except Exception as exc:
            raise explain(exc, store.params, "download", key) from None
        finally:
            response.close()
            response.release_conn()

    return verified_rename(
        path,
        "download the snapshot",
        fill,
        expect_snapshot(where, sha256, size),
        direct=not read_back,
    )


def snapshot_name(prefix: str, stamp: str, revision: int) -> str:
    """`<prefix>/<YYYYMMDDTHHMMSSZ>-rev<revision>.db`, the name the etcd_backup_plan filter's
    `etcd_backup_key` gives (with its prefix being `<prefix>/<namespace>/<cluster>/<backup>`)."""
    clean = "/".join(part for part in prefix.split("/") if part)
    name = f"{stamp}-rev{revision}{SNAPSHOT_SUFFIX}"
    return f"{clean}/{name}" if clean else name


__all__ = [
    "PART_SIZE",
    "S3Error",
    "UploadPipe",
    "download_snapshot",
    "snapshot_name",
    "upload_snapshot",
]
