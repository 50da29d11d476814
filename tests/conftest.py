"""Shared pytest plugins: each suite's fixtures live in a module of their own.

Modules import module_utils as ansible.module_utils.*, as Ansible packs them: the repository's
module_utils/ joins that package's path once here, for every test that imports them."""

from pathlib import Path

import ansible.module_utils

_MODULE_UTILS = str(Path(__file__).resolve().parent.parent / "module_utils")
if _MODULE_UTILS not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(_MODULE_UTILS)

pytest_plugins: list[str] = [
    "tests.etcd_cluster",
    "tests.k8s_cluster",
    "tests.object_store",
    "tests.s3_local",
]
