"""Session fixture for the local S3-compatible object store (hack/object-store; see
docs/local-cluster.md, "Object store").

`object_store` runs `hack/object-store up` once per session on the running local cluster (a
cold start builds versitygw, minutes) and fails, never skips, when it cannot come up. From the
host the store is reached through `kubectl port-forward` on 127.0.0.1 (`.port_forward()`); Pods
use `.endpoint`. Credentials come from the Secret the script made.
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest

from testbed.cluster import K8sCluster, port_forward
from testbed.host import REPO
from tests.session_lock import exclusive

if TYPE_CHECKING:
    from minio import Minio

OBJECT_STORE = REPO / "hack" / "object-store"
NAMESPACE = "object-store"
SERVICE_PORT = 9000
REGION = "us-east-1"
UP_TIMEOUT = 1800  # a cold start builds versitygw from source


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
        from minio import Minio  # here: loading this plugin must not need the package

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
        pytest.fail(f"hack/object-store up failed ({proc.returncode}):\n{tail}")
    return proc.stdout.strip()


def read_credentials(cluster: K8sCluster) -> tuple[str, str]:
    out = cluster.kubectl("-n", NAMESPACE, "get", "secret", "s3-credentials", "-o", "json").stdout
    data = json.loads(out)["data"]
    return (
        base64.b64decode(data["accessKeyId"]).decode(),
        base64.b64decode(data["secretAccessKey"]).decode(),
    )


@pytest.fixture(scope="session")
def object_store(k8s_cluster: K8sCluster) -> ObjectStore:
    with exclusive("object-store"):
        endpoint = object_store_up()
    access_key, secret_key = read_credentials(k8s_cluster)
    return ObjectStore(
        cluster=k8s_cluster, endpoint=endpoint, access_key=access_key, secret_key=secret_key
    )
