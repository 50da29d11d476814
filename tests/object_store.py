"""Session fixtures for the S3-compatible store (hack/object-store; docs/local-cluster.md,
"Object store"), over testbed.object_store. Both fail, never skip, when the store cannot be
built or come up.

`s3_store`: versitygw on 127.0.0.1 for the module tests, no Kubernetes; a bucket per test::

    def test_x(s3_store):
        bucket = s3_store.new_bucket()
        option = s3_store.option(bucket)     # the modules' `s3` option
        s3_store.client().list_objects(bucket)

`object_store`: `hack/object-store up` once per session on the running local cluster (a cold
start builds versitygw, minutes). From the host the store is reached through `kubectl
port-forward` on 127.0.0.1 (`.port_forward()`); Pods use `.endpoint`. Credentials come from the
Secret the script made.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testbed.cluster import K8sCluster
from testbed.object_store import LocalS3, ObjectStore, in_cluster_store, running_store
from tests.session_lock import exclusive


@pytest.fixture(scope="session")
def s3_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalS3]:
    with running_store(tmp_path_factory.mktemp("s3")) as store:
        yield store


@pytest.fixture(scope="session")
def object_store(k8s_cluster: K8sCluster) -> ObjectStore:
    with exclusive("object-store"):
        return in_cluster_store(k8s_cluster)
