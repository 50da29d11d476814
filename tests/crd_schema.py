"""Offline checks of a CRD's OpenAPI schema, as the API server applies them (structural
rules, defaulting, type/bound/pattern validation). CEL rules need an API server
(tests/cluster/)."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parent.parent
BASES = ROOT / "config" / "crd" / "bases"


def load(name: str) -> dict[str, Any]:
    """config/crd/bases/etcd.runbook.io_<name>.yaml"""
    return dict(yaml.safe_load((BASES / f"etcd.runbook.io_{name}.yaml").read_text()))


def schema_of(crd: dict[str, Any]) -> dict[str, Any]:
    (version,) = crd["spec"]["versions"]
    return dict(version["schema"]["openAPIV3Schema"])


def walk(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from walk(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}{{}}")


def structural_problems(schema: dict[str, Any]) -> list[str]:
    """The rules of a structural schema the API server enforces (apiextensions v1)."""
    problems = []
    for path, node in walk(schema):
        free_form = node.get("x-kubernetes-preserve-unknown-fields") is True
        int_or_string = node.get("x-kubernetes-int-or-string") is True
        if "type" not in node and not int_or_string and not free_form:
            problems.append(f"{path or '<root>'}: no type")
        if "anyOf" in node and not int_or_string:
            problems.append(f"{path}: anyOf outside int-or-string")
        if "properties" in node and "additionalProperties" in node:
            problems.append(f"{path}: both properties and additionalProperties")
        for key in node.get("required", []):
            if key not in node.get("properties", {}):
                problems.append(f"{path}: required {key} is not a property")
        for key in node.get("x-kubernetes-list-map-keys", []):
            if key not in node["items"].get("required", []):
                problems.append(f"{path}: list map key {key} must be required")
        for rule in node.get("x-kubernetes-validations", []):
            if not rule.get("rule") or not rule.get("message"):
                problems.append(f"{path}: a CEL rule without its rule or message")
    return problems


def apply_defaults(node: dict[str, Any], value: Any) -> Any:
    """The API server's defaulting: a missing property with a default gets it, then defaulting
    goes on inside it."""
    if not isinstance(value, dict) or node.get("type") != "object":
        return value
    out = copy.deepcopy(value)
    for name, sub in node.get("properties", {}).items():
        if name not in out and "default" in sub:
            out[name] = copy.deepcopy(sub["default"])
        if name in out:
            out[name] = apply_defaults(sub, out[name])
    return out


def validate(schema: dict[str, Any], obj: Any) -> list[str]:
    """OpenAPI v3 checks (type, bounds, pattern, enum) with jsonschema, each error naming its
    field from `spec`; x-kubernetes keys (CEL included) are ignored."""
    validator = jsonschema.Draft4Validator(schema)
    return [
        "spec" + "".join(f".{p}" for p in list(e.absolute_path)[1:]) + ": " + e.message
        for e in validator.iter_errors(obj)
    ]


# A list item picked by a field's value, as printer columns pick a condition:
# `conditions[?(@.type=="Ready")]`.
_FILTERED = re.compile(r'^(\w+)\[\?\(@\.(\w+)=="[^"]*"\)\]$')


def resolves(schema: dict[str, Any], json_path: str) -> bool:
    node: dict[str, Any] | None = schema
    # Split on the dots outside a filter only.
    for part in re.findall(r"(?:[^.\[]|\[[^\]]*\])+", json_path.lstrip(".")):
        assert node is not None
        filtered = _FILTERED.match(part)
        name = filtered.group(1) if filtered else part
        node = node.get("properties", {}).get(name)
        if node is None:
            return False
        if filtered:
            node = node.get("items") or {}
            if filtered.group(2) not in node.get("properties", {}):
                return False
    return True


def cel_rules(schema: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    """path -> [(rule, message)] for every CEL rule in the schema."""
    return {
        path: [(r["rule"], r["message"]) for r in node["x-kubernetes-validations"]]
        for path, node in walk(schema)
        if node.get("x-kubernetes-validations")
    }
