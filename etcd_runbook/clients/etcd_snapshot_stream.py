"""The snapshot stream itself, over synchronous gRPC, with hashing and writing in a thread.

Measured here (bench/snapshot.py, 300 MB, etcd 3.5): the shared client's asyncio stream
reached 85-120 MB/s where `etcdctl snapshot save` reached 130-190 MB/s; etcd sends 32 KiB
messages and the asyncio event loop's per-message cost dominated. A plain gRPC iterator
receives at about twice etcdctl's whole rate. Receiving stays on this thread; the sink
(hashing and storing, each releasing the GIL for its bulk work) runs on one more thread, fed
lists of messages of about 1 MiB. A file sink hashes and writes whole blocks of 4 MiB
(etcd_snapshot_io.HashingWriter); an earlier version hashed each message on a thread of its
own and wrote each list with writev(2) on a third, which cost more in GIL hand-offs than the
parallel hashing gained (1 GiB: 4.6-4.8 CPU-seconds against 4.8-5.0).

Auth and TLS follow the shared client's options: the same CA/client certificate files, and
a token from Auth.Authenticate when a user is given. Failures are translated by the shared
`translate`, so messages read the same as every other call's.

A snapshot of another cluster is never taken for this one's: etcd 3.4 and 3.5 send the stream
with empty headers, so the member is asked for its status on the same channel (the same
connection) before the stream and again after its last message, and each must name the
expected cluster, as must every message header that names one; otherwise the stream fails
before the caller keeps any of it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Generator
from typing import Protocol

import grpc
import grpc.aio
import grpc.experimental
from etcd3aio._protobuf import AuthStub, MaintenanceStub, SnapshotRequest
from etcd3aio._protobuf import rpc_pb2 as _rpc

from etcd_runbook.clients.etcd_common import ConnectionParams, member_id_hex, parse_url
from etcd_runbook.clients.etcd_errors import EtcdForeignClusterError, EtcdModuleError, translate

BLOCK = 1024 * 1024
BLOCK_CHUNKS = 512  # a list of small messages is handed over at this length
QUEUE_BLOCKS = 16
AUTH_NOT_ENABLED = "etcdserver: authentication is not enabled"


class Sink(Protocol):
    """Takes the stream's messages in order, in lists of about BLOCK bytes, on one thread;
    it hashes them (etcd's trailer is checked by the caller) and stores them."""

    def write_many(self, chunks: list[bytes]) -> None: ...


def _read(path: str | None) -> bytes | None:
    if path is None:
        return None
    with open(path, "rb") as handle:
        return handle.read()


def _channel(params: ConnectionParams, url: str) -> grpc.Channel:
    parsed = parse_url(url, what="endpoint")
    options = [
        ("grpc.max_receive_message_length", 64 * 1024 * 1024),
        (grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1),
    ]
    if not parsed.secure:
        return grpc.insecure_channel(parsed.target, options=options)
    credentials = grpc.ssl_channel_credentials(
        root_certificates=_read(params.ca_cert),
        private_key=_read(params.client_key),
        certificate_chain=_read(params.client_cert),
    )
    return grpc.secure_channel(parsed.target, credentials, options=options)


def _explained(exc: grpc.RpcError, url: str, operation: str, timeout: float) -> EtcdModuleError:
    """The shared translation, which reads asyncio gRPC errors: re-wrap the sync one."""
    as_aio = grpc.aio.AioRpcError(
        exc.code(),
        grpc.aio.Metadata(),
        grpc.aio.Metadata(),
        details=exc.details(),
    )
    return translate(as_aio, endpoint=url, operation=operation, timeout=timeout)


def _token(channel: grpc.Channel, params: ConnectionParams, url: str) -> str | None:
    if not params.user:
        return None
    request = _rpc.AuthenticateRequest(name=params.user, password=params.password or "")
    try:
        return str(AuthStub(channel).Authenticate(request, timeout=params.timeout).token)
    except grpc.RpcError as exc:
        if exc.details() == AUTH_NOT_ENABLED:
            return None
        raise _explained(exc, url, "authenticate", params.timeout) from exc


def _check_cluster(url: str, expected: str | None, got: int, when: str) -> None:
    """A status must name the expected cluster; a message header that names one too."""
    if expected is not None and (not got or member_id_hex(got) != expected):
        answered = f"cluster {member_id_hex(got)}" if got else "no cluster"
        raise EtcdForeignClusterError(
            f"snapshot at {url}: the member answered {when} for {answered}, not for cluster "
            f"{expected}; a snapshot of another cluster is never kept as this one's",
            endpoint=url,
        )


def _chunks(
    params: ConnectionParams, url: str, timeout: float, cluster_id: str | None
) -> Generator[bytes, None, None]:
    with _channel(params, url) as channel:
        token = _token(channel, params, url)
        metadata = (("token", token),) if token else None
        stub = MaintenanceStub(channel)

        def status_cluster() -> int:
            answer = stub.Status(_rpc.StatusRequest(), metadata=metadata, timeout=params.timeout)
            return int(answer.header.cluster_id)

        try:
            _check_cluster(url, cluster_id, status_cluster(), "before the stream")
            for response in stub.Snapshot(SnapshotRequest(), metadata=metadata, timeout=timeout):
                if response.header.cluster_id:
                    _check_cluster(url, cluster_id, response.header.cluster_id, "in the stream")
                yield response.blob
            _check_cluster(url, cluster_id, status_cluster(), "after the stream")
        except grpc.RpcError as exc:
            raise _explained(exc, url, "snapshot", timeout) from exc


class _Consumer:
    """The thread that hands blocks of the stream to the sink, in order."""

    def __init__(self, work: Callable[[list[bytes]], None]):
        self.blocks: queue.Queue[list[bytes] | None] = queue.Queue(maxsize=QUEUE_BLOCKS)
        self.failure: BaseException | None = None
        self._work = work
        self._thread = threading.Thread(target=self._run, name="snapshot-sink", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (block := self.blocks.get()) is not None:
            if self.failure is None:
                try:
                    self._work(block)
                except BaseException as exc:  # re-raised on the receiving thread
                    self.failure = exc

    def finish(self) -> None:
        self.blocks.put(None)
        self._thread.join()


def stream_snapshot(
    params: ConnectionParams, url: str, sink: Sink, timeout: float, cluster_id: str | None
) -> int:
    """Stream the snapshot of the member at `url`, of cluster `cluster_id` (hex; None: any),
    into `sink`; returns the bytes streamed. A failure raises (the caller discards what the
    sink got), a member of another cluster included."""
    consumer = _Consumer(sink.write_many)
    total = 0
    pending: list[bytes] = []
    pending_size = 0
    chunks = _chunks(params, url, timeout, cluster_id)
    try:
        for chunk in chunks:
            pending.append(chunk)
            pending_size += len(chunk)
            if pending_size >= BLOCK or len(pending) >= BLOCK_CHUNKS:
                consumer.blocks.put(pending)
                total += pending_size
                pending, pending_size = [], 0
                if consumer.failure is not None:
                    break
        if pending:
            consumer.blocks.put(pending)
            total += pending_size
    finally:
        chunks.close()
        consumer.finish()
    if consumer.failure is not None:
        raise consumer.failure
    return total
