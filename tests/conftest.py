"""Shared pytest plugins: each suite's fixtures live in a module of their own."""

pytest_plugins: list[str] = ["tests.etcd_cluster", "tests.k8s_cluster"]
