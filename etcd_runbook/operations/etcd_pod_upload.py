"""A local file streamed into a running container through the API server's exec, the way a
person with only a kubeconfig can get a snapshot into the cluster (etcd_snapshot_upload).

The container runs RECEIVER, which reads exactly the announced number of bytes from stdin
(so the end of the stream needs no half-close, which the exec protocol before v5 lacks),
hashes them as they come, and makes the file appear only when complete: a hidden temp file,
fsynced, renamed, the directory fsynced. Whoever waits for the file therefore never sees half
of it."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from etcd_runbook.clients.etcd_errors import EtcdModuleError
from etcd_runbook.clients.etcd_kube import KubeCredentials
from etcd_runbook.clients.etcd_snapshot_io import file_sha256

CHUNK = 1 << 20

# Runs in the container as `python -c RECEIVER DEST SIZE`; SIZE -1 only asks whether DEST is
# there. Its first line is `present <sha256>`, `absent` or `ready`; after the bytes,
# `written <sha256>` or `short <bytes received>`.
RECEIVER = """
import hashlib, os, sys
dest, size = sys.argv[1], int(sys.argv[2])
def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
if os.path.exists(dest):
    print("present", digest(dest), flush=True)
    sys.exit(0)
if size < 0:
    print("absent", flush=True)
    sys.exit(0)
folder = os.path.dirname(dest)
os.makedirs(folder, mode=0o700, exist_ok=True)
part = os.path.join(folder, "." + os.path.basename(dest) + ".part")
h, left = hashlib.sha256(), size
print("ready", flush=True)
with open(part, "wb") as f:
    while left:
        block = sys.stdin.buffer.read(min(left, 1 << 20))
        if not block:
            print("short", size - left, flush=True)
            sys.exit(3)
        f.write(block)
        h.update(block)
        left -= len(block)
    f.flush()
    os.fsync(f.fileno())
os.rename(part, dest)
fd = os.open(folder, os.O_RDONLY)
os.fsync(fd)
os.close(fd)
print("written", h.hexdigest(), flush=True)
"""


class UploadError(EtcdModuleError):
    """The file did not arrive whole in the container."""

    reason = "UploadFailed"


class Channel(Protocol):
    """What an exec stream offers (kubernetes.stream's WSClient in binary mode)."""

    def read_stdout(self, timeout: float | None = None) -> bytes: ...

    def read_stderr(self, timeout: float | None = None) -> bytes: ...

    def write_stdin(self, data: bytes) -> None: ...

    def update(self, timeout: float = 0) -> None: ...

    def is_open(self) -> bool: ...

    def close(self) -> None: ...


class Lines:
    """The receiver's answers, a line at a time. The client's own readline gives up as soon
    as the connection closes, even with the last line already received (a receiver that
    answers and exits at once), so lines are cut here from whatever arrived."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.pending = b""

    def next(self, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            received = self.channel.read_stdout(timeout=max(left, 0))
            if received:
                self.pending += received
            elif not self.channel.is_open() or left <= 0:
                break
        line, _, self.pending = self.pending.partition(b"\n")
        return line


def chunks(path: str) -> Iterator[bytes]:
    with open(path, "rb") as handle:
        yield from iter(lambda: handle.read(CHUNK), b"")


def receiver_command(python: str, dest: str, size: int) -> list[str]:
    """The container's command: the path and size are arguments, never part of the code."""
    return [python, "-c", RECEIVER, dest, str(size)]


def _line(lines: Lines, timeout: float, waiting_for: str) -> list[str]:
    words = lines.next(timeout).decode("utf-8", "replace").split()
    if not words:
        stderr = lines.channel.read_stderr(timeout=0).decode("utf-8", "replace").strip()
        raise UploadError(
            f"no answer from the container while waiting for {waiting_for}"
            + (f": {stderr[-500:]}" if stderr else "")
        )
    return words


def probe(channel: Channel, timeout: float) -> str | None:
    """The sha256 of the file already in the container, or None when it is not there."""
    words = _line(Lines(channel), timeout, "whether the file is there")
    if words[0] == "present" and len(words) == 2:
        return words[1]
    if words[0] == "absent":
        return None
    raise UploadError(f"unexpected answer from the container: {' '.join(words)[:200]}")


def send(channel: Channel, blocks: Iterator[bytes], timeout: float) -> str:
    """Streams `blocks` once the receiver is ready; the sha256 the receiver computed."""
    lines = Lines(channel)
    words = _line(lines, timeout, "the receiver")
    if words[0] == "present":
        raise UploadError("the file appeared in the container while the upload started")
    if words[0] != "ready":
        raise UploadError(f"unexpected answer from the container: {' '.join(words)[:200]}")
    for block in blocks:
        if not channel.is_open():
            break
        channel.write_stdin(block)
        # Drains what the container says meanwhile, so its buffers never fill.
        channel.update(timeout=0)
    words = _line(lines, timeout, "the end of the upload")
    if words[0] == "written" and len(words) == 2:
        return words[1]
    raise UploadError(f"the upload ended early: {' '.join(words)[:200]}")


def exec_channel(
    creds: KubeCredentials, namespace: str, pod: str, container: str, command: list[str]
) -> Channel:
    """An exec stream into the container through the API server (binary, no tty)."""
    from kubernetes import client
    from kubernetes.stream import stream

    conf = client.Configuration()
    conf.host = creds.server
    conf.ssl_ca_cert = creds.ca_file
    conf.verify_ssl = creds.verify
    conf.cert_file = creds.cert_file
    conf.key_file = creds.key_file
    if creds.token:
        conf.api_key = {"authorization": f"Bearer {creds.token}"}
    api = client.CoreV1Api(client.ApiClient(conf))
    try:
        channel: Channel = stream(
            api.connect_get_namespaced_pod_exec,
            pod,
            namespace,
            container=container,
            command=command,
            stdin=True,
            stdout=True,
            stderr=True,
            tty=False,
            binary=True,
            _preload_content=False,
        )
    except Exception as exc:  # the client raises ApiException, websocket and socket errors
        raise UploadError(
            f"cannot exec into {namespace}/{pod} container {container}: {exc}"
        ) from exc
    return channel


Opener = Callable[[list[str]], Channel]


def upload(
    open_channel: Opener,
    python: str,
    src: str,
    dest: str,
    expected_sha256: str,
    *,
    check: bool,
    timeout: float,
) -> dict[str, Any]:
    """Puts `src` at `dest` in the container unless a file with its sha256 is there already.
    The local file must have `expected_sha256` (the one the restore was told), checked before
    anything is sent; the receiver's own hash of what arrived is checked after."""
    local_sha256, size = file_sha256(src), os.path.getsize(src)
    if local_sha256 != expected_sha256:
        raise UploadError(
            f"{src} has sha256 {local_sha256}, not the expected {expected_sha256}: "
            "wrong or damaged file; nothing was sent",
            reason="SnapshotCorrupt",
        )
    result: dict[str, Any] = {"sha256": local_sha256, "size": size, "path": dest}
    channel = open_channel(receiver_command(python, dest, -1))
    try:
        there = probe(channel, timeout)
    finally:
        channel.close()
    if there == local_sha256:
        return {**result, "changed": False, "msg": f"{dest} is already there"}
    if there is not None:
        raise UploadError(
            f"{dest} in the container holds another file (sha256 {there}); nothing was sent",
            reason="Refused",
        )
    if check:
        return {**result, "changed": True, "msg": f"would upload {size} bytes to {dest}"}
    channel = open_channel(receiver_command(python, dest, size))
    try:
        received = send(channel, chunks(src), timeout)
    finally:
        channel.close()
    if received != local_sha256:
        raise UploadError(
            f"{dest} arrived with sha256 {received}, not {local_sha256}", reason="SnapshotCorrupt"
        )
    return {**result, "changed": True, "msg": f"uploaded {size} bytes to {dest}"}
