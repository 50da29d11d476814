"""A real S3-compatible store on loopback for module tests: versitygw's posix backend.

No Kubernetes: the binary `hack/object-store build` makes (cached under
$CACHE/object-store/versitygw/<version>; `build` only builds, it never talks to a cluster)
runs as a process of this test session on 127.0.0.1 with a free port, a temporary root
directory and credentials generated for the session, and is stopped when the session ends
(and, as a safety net, dies with the pytest process). `running_store` is the same store
for code outside pytest (bench/snapshot_s3.py).

    def test_x(s3_store):
        bucket = s3_store.new_bucket()
        option = s3_store.option(bucket)     # the modules' `s3` option
        s3_store.client().list_objects(bucket)

Register with `pytest_plugins` in tests/conftest.py ("tests.s3_local"), or import the
fixtures into a test module.
"""

from __future__ import annotations

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

import pytest

from testbed.host import REPO, cache_root, die_with_parent, free_port
from tests.session_lock import exclusive

if TYPE_CHECKING:
    from minio import Minio

OBJECT_STORE = REPO / "hack" / "object-store"
REGION = "us-east-1"
START_TIMEOUT = 30.0
BUILD_TIMEOUT = 1800  # a cold build of versitygw through the Go module proxy takes minutes


class S3StoreError(RuntimeError):
    """The local store could not be built or started (the message carries its log)."""


def versitygw_version() -> str:
    match = re.search(r"^VGW_VERSION=(\S+)", OBJECT_STORE.read_text(), re.MULTILINE)
    if not match:
        raise S3StoreError(f"no VGW_VERSION in {OBJECT_STORE}")
    return match.group(1)


def versitygw_binary() -> Path:
    """The cached binary; built with `hack/object-store build` when missing."""
    directory = cache_root() / "object-store" / "versitygw" / versitygw_version()
    # Test processes side by side build it once: the others wait, then find it complete.
    with exclusive("versitygw-build"):
        if not (directory / ".complete").is_file():
            _build_versitygw(directory)
    return directory / "versitygw"


def _build_versitygw(directory: Path) -> None:
    proc = subprocess.run(
        [str(OBJECT_STORE), "build"],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    if proc.returncode != 0 or not (directory / ".complete").is_file():
        raise S3StoreError(f"hack/object-store build failed:\n{proc.stderr[-4000:]}")


@dataclass
class LocalS3:
    endpoint: str  # http://127.0.0.1:PORT
    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)
    root: Path
    _buckets: int = 0

    def client(self, access_key: str | None = None, secret_key: str | None = None) -> Minio:
        from minio import Minio

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


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/health", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def stop_process(proc: subprocess.Popen[Any], grace: float = 10) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds; always reaped."""
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def running_store(base: Path) -> Iterator[LocalS3]:
    """versitygw serving `base`/data on 127.0.0.1 (a free port), with fresh credentials;
    stopped on exit. The fixture below and bench/snapshot_s3.py use it."""
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
                "--port",
                f"127.0.0.1:{port}",
                "--region",
                REGION,
                "--health",
                "/-/health",
                "--quiet",
                "posix",
                str(root),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=die_with_parent,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _healthy(store.endpoint):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise S3StoreError(
                    f"versitygw did not serve on {store.endpoint}:\n{log_path.read_text()[-4000:]}"
                )
            time.sleep(0.1)
        yield store
    finally:
        stop_process(proc)


@pytest.fixture(scope="session")
def s3_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalS3]:
    with running_store(tmp_path_factory.mktemp("s3")) as store:
        yield store
