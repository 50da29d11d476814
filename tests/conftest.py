"""Shared pytest plugins: each suite's fixtures live in a module of their own."""

import os

# The test process holds gRPC clients while it forks etcd and kubectl processes (Popen with a
# preexec_fn forks rather than spawns). gRPC's fork handlers then ran in a child between fork
# and exec and aborted it ("epoll_wait error: Bad file descriptor", the etcd member gone with
# SIGABRT before it started: seen once in a clean-clone run). No test forks a process that
# uses gRPC, so the handlers are turned off before grpc is first imported.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

pytest_plugins: list[str] = [
    "tests.etcd_cluster",
    "tests.k8s_cluster",
    "tests.object_store",
]
