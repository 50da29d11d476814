"""Extra vars for a run, shaped as operator-sdk's Ansible operator shapes them.

Everything taken from the API server is untrusted: ansible-core renders strings loaded through
`-e @file` as templates, so a `{{ lookup('pipe', ...) }}` written into an annotation would run
in the operator's process. Every string of the object reaches the run wrapped as
`{"__ansible_unsafe": ...}`, which ansible-core's JSON loader turns into data that is never
templated (operator-sdk's Ansible operator does the same). Mapping keys are never templated.
"""

from __future__ import annotations

import re
from typing import Any

from .config import Target, Watch

# An acronym followed by a word ("HTTPServer" -> "HTTP_Server") and a lower/digit followed by an
# upper-case letter ("clusterID" -> "cluster_ID"): the two boundaries operator-sdk splits on.
_ACRONYM_END = re.compile(r"([A-Z]+)([A-Z][a-z])")
_WORD_END = re.compile(r"([a-z0-9])([A-Z])")

UNSAFE_KEY = "__ansible_unsafe"


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


def mark_unsafe(value: Any) -> Any:
    """Every string in `value` (recursively) wrapped so ansible-core keeps it as data."""
    if isinstance(value, str):
        return {UNSAFE_KEY: value}
    if isinstance(value, dict):
        return {str(k): mark_unsafe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mark_unsafe(v) for v in value]
    return value


def build_extravars(watch: Watch, obj: dict[str, Any], target: Target) -> dict[str, Any]:
    """Everything a playbook receives about one object for one run (a fresh dict every time).

    The watches file's own `vars` are the operator's configuration, trusted as written; all the
    rest comes from the object and is marked unsafe."""
    meta = obj.get("metadata", {})
    spec = obj.get("spec") or {}
    if not watch.pass_spec_parameters:
        # A runbook that reads the object needs no spec key as a top-level variable, where one
        # named like a role input would override it.
        params: dict[str, Any] = {}
    elif watch.snake_case_parameters:
        params = snake_keys(spec)
    else:
        params = dict(spec)
    extravars: dict[str, Any] = mark_unsafe(params)
    extravars.update(target.vars)
    extravars["ansible_operator_meta"] = mark_unsafe(
        {"name": meta.get("name"), "namespace": meta.get("namespace")}
    )
    extravars[watch.object_var_name] = mark_unsafe(obj)
    return extravars
