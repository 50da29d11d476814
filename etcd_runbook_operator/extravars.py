"""Extra vars for a run, shaped as operator-sdk's Ansible operator shapes them."""

from __future__ import annotations

import re
from typing import Any

from .config import Target, Watch

# An acronym followed by a word ("HTTPServer" -> "HTTP_Server") and a lower/digit followed by an
# upper-case letter ("clusterID" -> "cluster_ID"): the two boundaries operator-sdk splits on.
_ACRONYM_END = re.compile(r"([A-Z]+)([A-Z][a-z])")
_WORD_END = re.compile(r"([a-z0-9])([A-Z])")


def to_snake(name: str) -> str:
    """camelCase / PascalCase / kebab-case -> snake_case ("clusterID" -> "cluster_id")."""
    name = _ACRONYM_END.sub(r"\1_\2", name)
    name = _WORD_END.sub(r"\1_\2", name)
    return name.replace("-", "_").lower()


def snake_keys(value: Any) -> Any:
    """Convert every mapping key to snake_case, recursively through mappings and lists."""
    if isinstance(value, dict):
        return {to_snake(str(k)): snake_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [snake_keys(v) for v in value]
    return value


def build_extravars(watch: Watch, obj: dict[str, Any], target: Target) -> dict[str, Any]:
    """Everything a playbook receives about one object for one run (a fresh dict every time)."""
    meta = obj.get("metadata", {})
    spec = obj.get("spec") or {}
    params = snake_keys(spec) if watch.snake_case_parameters else dict(spec)
    extravars: dict[str, Any] = dict(params)
    extravars.update(target.vars)
    extravars["ansible_operator_meta"] = {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
    }
    extravars[watch.object_var_name] = obj
    return extravars
