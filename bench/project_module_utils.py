"""The project's module_utils/ importable as `ansible.module_utils.<name>`, as ansible.cfg makes
them for the modules: the benchmarks call the same functions the modules do."""

from __future__ import annotations

from pathlib import Path

import ansible.module_utils

MODULE_UTILS = str(Path(__file__).resolve().parent.parent / "module_utils")


def use_project_module_utils() -> None:
    if MODULE_UTILS not in ansible.module_utils.__path__:
        ansible.module_utils.__path__.append(MODULE_UTILS)
