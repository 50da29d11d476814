"""The local S3-compatible object store (hack/object-store) from the host, through a
port-forward on 127.0.0.1: a 64 MiB object streamed in parts and read back by its SHA-256, a
wrong secret refused, data that outlives its Pod, `up` run again changing nothing.
Real versitygw in a Pod of the local cluster and the real minio-py client; no mock."""

from __future__ import annotations

import hashlib
import io
import json
import random
import time
import tracemalloc
import uuid
from collections.abc import Iterator
from typing import Any, BinaryIO, cast

import pytest
from minio import Minio
from minio.error import S3Error

from testbed.cluster import K8sCluster
from testbed.object_store import NAMESPACE, ObjectStore, object_store_up

pytestmark = pytest.mark.cluster

MiB = 1 << 20
SIZE = 64 * MiB
PART = 5 * MiB  # S3's smallest part: 13 parts, the last one short
KEY = "snapshots/etcd-test.db"


class PatternStream:
    """`size` seeded pseudo-random bytes, made as they are read (no seek, no length: the
    uploader must stream), hashed on the way: SHA-256 of the whole, MD5 of each part (S3's
    multipart ETag is md5(part md5s)-<parts>)."""

    def __init__(self, size: int, part_size: int, seed: int) -> None:
        self._left = size
        self._part_size = part_size
        self._in_part = 0
        self._rng = random.Random(seed)
        self.sha256 = hashlib.sha256()
        self._part = hashlib.md5()
        self.part_md5s: list[bytes] = []

    def read(self, n: int = -1) -> bytes:
        n = self._left if n < 0 else min(n, self._left)
        data = self._rng.randbytes(n)
        self._left -= n
        self.sha256.update(data)
        view = memoryview(data)
        while view:
            take = min(len(view), self._part_size - self._in_part)
            self._part.update(view[:take])
            self._in_part += take
            view = view[take:]
            if self._in_part == self._part_size or (self._left == 0 and not view):
                self.part_md5s.append(self._part.digest())
                self._part, self._in_part = hashlib.md5(), 0
        return data

    def multipart_etag(self) -> str:
        return f"{hashlib.md5(b''.join(self.part_md5s)).hexdigest()}-{len(self.part_md5s)}"


@pytest.fixture
def forwarded(object_store: ObjectStore) -> Iterator[str]:
    with object_store.port_forward() as url:
        yield url


@pytest.fixture
def bucket(object_store: ObjectStore, forwarded: str) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:12]}"
    object_store.client(forwarded).make_bucket(name)
    yield name
    # A fresh forward: the test may have replaced the Pod the first one was bound to.
    with object_store.port_forward() as url:
        s3 = object_store.client(url)
        for obj in s3.list_objects(name, recursive=True):
            s3.remove_object(name, str(obj.object_name))
        s3.remove_bucket(name)


def _read_all(s3: Minio, bucket: str, key: str) -> Iterator[bytes]:
    response = s3.get_object(bucket, key)
    try:
        yield from response.stream(MiB)
    finally:
        response.close()
        response.release_conn()


def _server_pod(cluster: K8sCluster) -> dict[str, Any]:
    pods = json.loads(
        cluster.kubectl(
            "-n", NAMESPACE, "get", "pod", "-l", "app.kubernetes.io/name=versitygw", "-o", "json"
        ).stdout
    )["items"]
    assert len(pods) == 1, f"want one server Pod, got {[p['metadata']['name'] for p in pods]}"
    return pods[0]


def _ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_multipart_upload_streams_and_reads_back_by_checksum(
    object_store: ObjectStore, forwarded: str, bucket: str
) -> None:
    s3 = object_store.client(forwarded)
    assert bucket in [b.name for b in s3.list_buckets()]

    stream = PatternStream(SIZE, PART, seed=10)
    # length=-1: a stream of unknown size, read part by part. One upload at a time: minio-py's
    # parallel mode queues parts without bound, so a fast reader would buffer the whole stream.
    tracemalloc.start()
    try:
        put = s3.put_object(
            bucket,
            KEY,
            cast(BinaryIO, stream),  # put_object only calls read()
            length=-1,
            part_size=PART,
            num_parallel_uploads=1,
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < SIZE // 2, f"the upload held {peak // MiB} MiB: not streamed"
    print(f"{SIZE // MiB} MiB uploaded; client memory peak {peak / MiB:.1f} MiB")
    parts = -(-SIZE // PART)
    assert len(stream.part_md5s) == parts
    assert put.etag == stream.multipart_etag()

    listed = list(s3.list_objects(bucket, recursive=True))
    assert [(o.object_name, o.size) for o in listed] == [(KEY, SIZE)]
    assert s3.stat_object(bucket, KEY).etag == put.etag

    sha256 = hashlib.sha256()
    size = 0
    for chunk in _read_all(s3, bucket, KEY):
        sha256.update(chunk)
        size += len(chunk)
    assert size == SIZE
    assert sha256.hexdigest() == stream.sha256.hexdigest()

    s3.remove_object(bucket, KEY)
    assert list(s3.list_objects(bucket, recursive=True)) == []
    with pytest.raises(S3Error) as gone:
        s3.stat_object(bucket, KEY)
    assert gone.value.response.status == 404


def test_wrong_credentials_are_refused(
    object_store: ObjectStore, forwarded: str, bucket: str
) -> None:
    wrong_secret = object_store.client(forwarded, secret_key=object_store.secret_key[::-1] + "x")
    for call in (
        wrong_secret.list_buckets,
        lambda: wrong_secret.put_object(bucket, "intruder", io.BytesIO(b"x"), length=1),
    ):
        with pytest.raises(S3Error) as refused:
            call()
        assert refused.value.code == "SignatureDoesNotMatch"
        assert refused.value.response.status == 403

    unknown_key = object_store.client(forwarded, access_key="AKNOSUCHKEY000000000")
    with pytest.raises(S3Error) as refused:
        unknown_key.list_buckets()
    # AWS says 403 InvalidAccessKeyId; versitygw 1.8 (single account) says 404
    # XAdminUserNotFound. A client must take both as "wrong credentials".
    assert refused.value.code in ("InvalidAccessKeyId", "XAdminUserNotFound")

    s3 = object_store.client(forwarded)
    assert list(s3.list_objects(bucket, recursive=True)) == []


def test_data_survives_the_pod(
    object_store: ObjectStore, k8s_cluster: K8sCluster, forwarded: str, bucket: str
) -> None:
    payload = random.Random(11).randbytes(3 * MiB + 5)
    object_store.client(forwarded).put_object(bucket, KEY, io.BytesIO(payload), len(payload))
    old = _server_pod(k8s_cluster)["metadata"]["name"]

    started = time.monotonic()
    k8s_cluster.kubectl("-n", NAMESPACE, "delete", "pod", old, "--wait=true", "--timeout=60s")

    def replaced() -> str | None:
        pod = _server_pod(k8s_cluster)
        name: str = pod["metadata"]["name"]
        return name if name != old and _ready(pod) else None

    new = k8s_cluster.wait_for(replaced, timeout=120, what="a new ready server Pod")
    back_after = time.monotonic() - started

    with object_store.port_forward() as url:
        assert b"".join(_read_all(object_store.client(url), bucket, KEY)) == payload
    print(f"server Pod {old} -> {new}: serving the old data again after {back_after:.1f}s")


def test_up_again_changes_nothing(object_store: ObjectStore, k8s_cluster: K8sCluster) -> None:
    def secret_version() -> str:
        return k8s_cluster.kubectl(
            "-n",
            NAMESPACE,
            "get",
            "secret",
            "s3-credentials",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ).stdout

    pod, secret = _server_pod(k8s_cluster)["metadata"]["uid"], secret_version()
    started = time.monotonic()
    assert object_store_up() == object_store.endpoint
    assert time.monotonic() - started < 60
    assert _server_pod(k8s_cluster)["metadata"]["uid"] == pod
    assert secret_version() == secret

    labels = json.loads(k8s_cluster.kubectl("get", "namespace", NAMESPACE, "-o", "json").stdout)[
        "metadata"
    ]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert object_store.endpoint == f"http://s3.{NAMESPACE}.svc.cluster.local:9000"
