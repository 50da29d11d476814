"""One real etcd member on loopback for benchmarks: started, filled, always stopped.

Apart from the loopback clusters of the tests (tests/etcd_cluster.py) on purpose: a benchmark
needs only a single member with a large database, and must not depend on pytest. Its binaries
and ports come from the test bed (testbed.host).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
from etcd3aio._protobuf import KVStub, PutRequest, StatusRequest
from etcd3aio._protobuf import MaintenanceStub as _MaintenanceStub

from testbed.host import free_port, stop_process


@dataclass
class Member:
    bin_dir: Path
    data_dir: Path
    client_url: str
    process: subprocess.Popen[bytes]

    @property
    def target(self) -> str:
        return self.client_url.removeprefix("http://")

    def etcdctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin_dir / "etcdctl"), f"--endpoints={self.client_url}", *args],
            check=True,
            capture_output=True,
            text=True,
            env=dict(os.environ, ETCDCTL_API="3"),
        )


@contextlib.contextmanager
def running_member(bin_dir: Path, quota_bytes: int) -> Iterator[Member]:
    """Start one member in a fresh temp dir; kill it and remove its data on exit."""
    work = Path(tempfile.mkdtemp(prefix="etcd-bench-"))
    client_port, peer_port = free_port(), free_port()
    client_url = f"http://127.0.0.1:{client_port}"
    peer_url = f"http://127.0.0.1:{peer_port}"
    log = open(work / "etcd.log", "wb")  # noqa: SIM115 - closed in finally
    process = subprocess.Popen(
        [
            str(bin_dir / "etcd"),
            "--name=bench",
            f"--data-dir={work / 'data'}",
            f"--listen-client-urls={client_url}",
            f"--advertise-client-urls={client_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=bench={peer_url}",
            f"--quota-backend-bytes={quota_bytes}",
            "--snapshot-count=1000000",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    member = Member(bin_dir, work / "data", client_url, process)
    try:
        wait_ready(member)
        yield member
    finally:
        stop_process(process, grace=20)
        log.close()
        shutil.rmtree(work, ignore_errors=True)


def wait_ready(member: Member, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(member.target) as channel:
        stub = _MaintenanceStub(channel)
        while True:
            try:
                if stub.Status(StatusRequest(), timeout=2).leader:
                    return
            except grpc.RpcError:
                pass
            if member.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"etcd at {member.client_url} did not become ready")
            time.sleep(0.2)


def fill(member: Member, target_bytes: int, value_bytes: int, time_limit: float) -> int:
    """Put distinct keys with random values until the db reaches `target_bytes` or the time
    limit passes; returns the db size reached. Random values keep the file incompressible
    and realistic for a snapshot stream."""
    value = os.urandom(value_bytes)
    deadline = time.monotonic() + time_limit
    with grpc.insecure_channel(member.target) as channel:
        kv, maintenance = KVStub(channel), _MaintenanceStub(channel)
        index = 0
        while time.monotonic() < deadline:
            for _ in range(50):
                # Rotate the value so bbolt cannot share pages between keys.
                payload = value[index % 997 :] + value[: index % 997]
                kv.Put(PutRequest(key=b"bench/%08d" % index, value=payload), timeout=30)
                index += 1
            size = int(maintenance.Status(StatusRequest(), timeout=10).dbSize)
            if size >= target_bytes:
                return size
        return int(maintenance.Status(StatusRequest(), timeout=10).dbSize)
