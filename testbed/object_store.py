"""The S3-compatible store of the test bed, versitygw's posix backend, in either of two places:

- on loopback, no Kubernetes: `running_store` runs the binary `hack/object-store build` makes
  (cached under $CACHE/object-store/versitygw/<version>; `build` only builds, it never talks
  to a cluster) as a child of this process on 127.0.0.1 with a free port, a temporary root
  directory and fresh credentials; stopped on exit, and as a safety net it dies with this
  process. The module tests and bench/snapshot_s3.py use it.
- in the local Kubernetes: `in_cluster_store` runs `hack/object-store up` (namespace
  object-store, Service s3, Secret s3-credentials; docs/local-cluster.md, "Object store") and
  gives its endpoint as Pods see it and its keys; from the host it is reached through a
  port-forward (`ObjectStore.port_forward()`). The end-to-end tests and bench/restore.py use it.

hack/object-store serialises its builds and `up`s itself (a lock under $CACHE), so processes
side by side build versitygw once.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from testbed import TestbedError
from testbed.cluster import K8sCluster, port_forward
from testbed.host import REPO, cache_root, die_with_parent, free_port, stop_process

if TYPE_CHECKING:
    from minio import Minio

OBJECT_STORE = REPO / "hack" / "object-store"
NAMESPACE = "object-store"
SERVICE_PORT = 9000
REGION = "us-east-1"
START_TIMEOUT = 30.0
BUILD_TIMEOUT = 1800  # a cold build of versitygw through the Go module proxy takes minutes
UP_TIMEOUT = 3600  # a cold start builds versitygw, and may wait for another `up` first


# --- on loopback -------------------------------------------------------------------------------
def versitygw_version() -> str:
    match = re.search(r"^VGW_VERSION=(\S+)", OBJECT_STORE.read_text(), re.MULTILINE)
    if not match:
        raise TestbedError(f"no VGW_VERSION in {OBJECT_STORE}")
    return match.group(1)


def versitygw_binary() -> Path:
    """The cached binary; built with `hack/object-store build` when missing."""
    directory = cache_root() / "object-store" / "versitygw" / versitygw_version()
    if not (directory / ".complete").is_file():
        proc = subprocess.run(
            [str(OBJECT_STORE), "build"],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT,
            check=False,
        )
        if proc.returncode != 0 or not (directory / ".complete").is_file():
            raise TestbedError(f"hack/object-store build failed:\n{proc.stderr[-4000:]}")
    return directory / "versitygw"


@dataclass
class LocalS3:
    endpoint: str  # http://127.0.0.1:PORT
    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)
    root: Path
    _buckets: int = 0

    def client(self, access_key: str | None = None, secret_key: str | None = None) -> Minio:
        from minio import Minio  # here: importing the test bed must not need the package

        return Minio(
            self.endpoint.removeprefix("http://"),
            access_key=access_key or self.access_key,
            secret_key=secret_key or self.secret_key,
            secure=False,
            region=REGION,
        )

    def new_bucket(self) -> str:
        """A fresh, empty bucket for one test."""
        self._buckets += 1
        name = f"test-{self._buckets:04d}-{secrets.token_hex(3)}"
        self.client().make_bucket(name)
        return name

    def option(self, bucket: str, **overrides: Any) -> dict[str, Any]:
        """The modules' `s3` option for `bucket`."""
        return {
            "endpoint": self.endpoint,
            "bucket": bucket,
            "region": REGION,
            "access_key": self.access_key,
            "secret_key": self.secret_key,
            "path_style": True,
            **overrides,
        }

    def object_path(self, bucket: str, key: str) -> Path:
        """Where the posix backend keeps an object (for tests that damage one on purpose)."""
        return self.root / bucket / key


def _serving(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/health", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@contextmanager
def running_store(base: Path) -> Iterator[LocalS3]:
    """versitygw serving `base`/data on 127.0.0.1 (a free port), with fresh credentials;
    stopped on exit."""
    binary = versitygw_binary()
    root = base / "data"
    root.mkdir()
    port = free_port()
    store = LocalS3(
        endpoint=f"http://127.0.0.1:{port}",
        access_key="AK" + secrets.token_hex(9).upper(),
        secret_key=secrets.token_urlsafe(30),
        root=root,
    )
    # Credentials in the environment, never on a command line `ps` shows.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VGW_", "ROOT_", "AWS_"))}
    env.update(ROOT_ACCESS_KEY_ID=store.access_key, ROOT_SECRET_ACCESS_KEY=store.secret_key)
    log_path = base / "versitygw.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                str(binary),
                *("--port", f"127.0.0.1:{port}", "--region", REGION),
                *("--health", "/-/health", "--quiet", "posix", str(root)),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=die_with_parent,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _serving(store.endpoint):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise TestbedError(
                    f"versitygw did not serve on {store.endpoint}:\n{log_path.read_text()[-4000:]}"
                )
            time.sleep(0.1)
        yield store
    finally:
        stop_process(proc)


# --- in the local Kubernetes -------------------------------------------------------------------
@dataclass(frozen=True)
class ObjectStore:
    cluster: K8sCluster
    endpoint: str  # as Pods see it
    access_key: str
    secret_key: str

    def client(
        self, url: str, access_key: str | None = None, secret_key: str | None = None
    ) -> Minio:
        """A minio-py client for url (http://host:port), with the store's credentials unless
        others are given. The region is given, so the client never asks for the bucket's."""
        from minio import Minio  # here: importing the test bed must not need the package

        parts = urlsplit(url)
        return Minio(
            parts.netloc,
            access_key=access_key or self.access_key,
            secret_key=secret_key or self.secret_key,
            secure=parts.scheme == "https",
            region=REGION,
        )

    @contextmanager
    def port_forward(self, timeout: float = 30) -> Iterator[str]:
        """Forward a free port on 127.0.0.1 to Service s3; yields http://127.0.0.1:PORT.

        kubectl binds the Service to one Pod when it starts: after that Pod is gone, open a new
        forward."""
        with port_forward(self.cluster, NAMESPACE, "service/s3", SERVICE_PORT, timeout) as port:
            yield f"http://127.0.0.1:{port}"


def object_store_up() -> str:
    """Run `hack/object-store up` (idempotent); returns the in-cluster endpoint it prints."""
    proc = subprocess.run(
        [str(OBJECT_STORE), "up"], capture_output=True, text=True, timeout=UP_TIMEOUT, check=False
    )
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.splitlines()[-40:])
        raise TestbedError(f"hack/object-store up failed ({proc.returncode}):\n{tail}")
    return proc.stdout.strip().rsplit("\n", 1)[-1]


def in_cluster_store(cluster: K8sCluster) -> ObjectStore:
    """The store of the local cluster, brought up (`object_store_up`), with the keys of the
    Secret hack/object-store made."""
    endpoint = object_store_up()
    out = cluster.kubectl("-n", NAMESPACE, "get", "secret", "s3-credentials", "-o", "json").stdout
    data = json.loads(out)["data"]
    return ObjectStore(
        cluster=cluster,
        endpoint=endpoint,
        access_key=base64.b64decode(data["accessKeyId"]).decode(),
        secret_key=base64.b64decode(data["secretAccessKey"]).decode(),
    )


def credentials_secret(k8s: K8sCluster, ns: str, name: str, access: str, secret: str) -> None:
    """The Secret an EtcdBackup's or EtcdRestore's `credentialsSecret` names."""
    k8s.kubectl(
        "-n",
        ns,
        "create",
        "secret",
        "generic",
        name,
        f"--from-literal=accessKeyId={access}",
        f"--from-literal=secretAccessKey={secret}",
    )
