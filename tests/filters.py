"""The filter plugins as Python modules for tests (ansible loads them by path, not as a package)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

FILTERS = Path(__file__).resolve().parent.parent / "plugins" / "filter"


def load_filter(name: str) -> ModuleType:
    """plugins/filter/<name>.py, loaded from its file."""
    spec = importlib.util.spec_from_file_location(name, FILTERS / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
