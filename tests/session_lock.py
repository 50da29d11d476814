"""Locks between the test processes of one run (pytest-xdist workers share one local cluster).

A session fixture that sets up something shared (the cluster, the object store, the operator's
Deployment) does so under `exclusive(name)`, so two workers never build or apply it at once.
The end-to-end tests hold `shared("operator")` while they use the operator, and a test that
stops or kills it holds `exclusive("operator")`: it waits for the others to finish, and they
wait for it. The lock files live beside the cluster's state, so a second checkout's run on the
same machine waits too.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_DIR = Path(
    os.environ.get("ERO_TEST_LOCK_DIR")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "etcd-runbook-operator"
    / "test-locks"
)


@contextmanager
def _locked(name: str, mode: int) -> Iterator[Path]:
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    path = LOCK_DIR / f"{name}.lock"
    with path.open("a+") as handle:
        fcntl.flock(handle, mode)
        try:
            yield path
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def exclusive(name: str) -> Iterator[Path]:
    with _locked(name, fcntl.LOCK_EX) as path:
        yield path


@contextmanager
def shared(name: str) -> Iterator[Path]:
    with _locked(name, fcntl.LOCK_SH) as path:
        yield path
