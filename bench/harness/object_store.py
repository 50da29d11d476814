"""The S3 stores the benchmarks write snapshots to, both versitygw's posix backend.

- `running_store`: versitygw on 127.0.0.1 (the binary `hack/object-store build` makes and
  caches), a temporary root directory and fresh credentials, stopped on exit;
- the local Kubernetes' store (`hack/object-store up`: namespace object-store, Service s3,
  Secret s3-credentials), reached from here through a port-forward.
"""

from __future__ import annotations

import base64
import ctypes
import json
import os
import re
import secrets
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed.cluster import K8sCluster
from testbed.host import free_port, stop_process

REPO = Path(__file__).resolve().parents[2]
OBJECT_STORE = REPO / "hack" / "object-store"
STORE_NS = "object-store"
REGION = "us-east-1"
START_TIMEOUT = 30.0
BUILD_TIMEOUT = 1800  # a cold build of versitygw through the Go module proxy takes minutes


# --- on loopback -------------------------------------------------------------------------------
@dataclass
class LocalStore:
    endpoint: str  # http://127.0.0.1:PORT
    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)

    def option(self, bucket: str) -> dict[str, Any]:
        """The modules' `s3` option for `bucket`."""
        return {
            "endpoint": self.endpoint,
            "bucket": bucket,
            "region": REGION,
            "access_key": self.access_key,
            "secret_key": self.secret_key,
            "path_style": True,
        }


def versitygw_binary() -> Path:
    """The cached binary; built with `hack/object-store build` (which serialises builds) when
    missing."""
    version = re.search(r"^VGW_VERSION=(\S+)", OBJECT_STORE.read_text(), re.MULTILINE)
    if not version:
        raise RuntimeError(f"no VGW_VERSION in {OBJECT_STORE}")
    cache = Path(
        os.environ.get("ETCD_OPERATOR_CACHE", Path.home() / ".cache" / "etcd-runbook-operator")
    )
    directory = cache / "object-store" / "versitygw" / version.group(1)
    if not (directory / ".complete").is_file():
        proc = subprocess.run(
            [str(OBJECT_STORE), "build"],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT,
            check=False,
        )
        if proc.returncode != 0 or not (directory / ".complete").is_file():
            raise RuntimeError(f"hack/object-store build failed:\n{proc.stderr[-4000:]}")
    return directory / "versitygw"


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when this process ends, however it ends."""
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def _serving(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/health", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@contextmanager
def running_store(base: Path) -> Iterator[LocalStore]:
    """versitygw serving `base`/data on 127.0.0.1 (a free port), with fresh credentials;
    stopped on exit."""
    binary = versitygw_binary()
    root = base / "data"
    root.mkdir()
    port = free_port()
    store = LocalStore(
        endpoint=f"http://127.0.0.1:{port}",
        access_key="AK" + secrets.token_hex(9).upper(),
        secret_key=secrets.token_urlsafe(30),
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
            preexec_fn=_die_with_parent,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _serving(store.endpoint):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"versitygw did not serve on {store.endpoint}:\n{log_path.read_text()[-4000:]}"
                )
            time.sleep(0.1)
        yield store
    finally:
        stop_process(proc)


# --- in the local Kubernetes -------------------------------------------------------------------
def object_store_up() -> str:
    """`hack/object-store up` (idempotent); the in-cluster endpoint it prints."""
    up = subprocess.run(
        [str(OBJECT_STORE), "up"], capture_output=True, text=True, timeout=3600, check=False
    )
    if up.returncode != 0:
        raise SystemExit(f"hack/object-store up failed:\n{up.stderr[-4000:]}")
    return up.stdout.strip().splitlines()[-1]


def read_credentials(k8s: K8sCluster) -> tuple[str, str]:
    """The store's keys, from the Secret hack/object-store made."""
    out = k8s.kubectl("-n", STORE_NS, "get", "secret", "s3-credentials", "-o", "json").stdout
    data = json.loads(out)["data"]
    return (
        base64.b64decode(data["accessKeyId"]).decode(),
        base64.b64decode(data["secretAccessKey"]).decode(),
    )


def store_client(k8s: K8sCluster, url: str) -> Any:
    """A minio-py client of the in-cluster store at `url` (http://host:port)."""
    from minio import Minio

    access, secret = read_credentials(k8s)
    host = url.removeprefix("http://")
    return Minio(host, access_key=access, secret_key=secret, secure=False, region=REGION)


def credentials_secret(k8s: K8sCluster, ns: str, name: str, access: str, secret: str) -> None:
    """The Secret an EtcdBackup's `credentialsSecret` names."""
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
