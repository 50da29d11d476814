"""Every key a module in library/ documents in RETURN, and every key under its `contains:`,
has a `sample:` of the type it declares, so `ansible-doc` shows what a task registers. (That
DOCUMENTATION matches the argument_spec and RETURN is YAML: test_etcd_client_module_docs.py.)

RETURN is read from the module's source without running it, as ansible-doc reads it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
MODULES = sorted(p.stem for p in (REPO / "library").glob("*.py") if not p.stem.startswith("_"))

TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "float": (float, int),
    "bool": (bool,),
    "list": (list,),
    "dict": (dict,),
}


def return_doc(name: str) -> dict[str, Any]:
    tree = ast.parse((REPO / "library" / f"{name}.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "RETURN" for target in node.targets
        ):
            assert isinstance(node.value, ast.Constant), f"{name}: RETURN is not a string"
            return dict(yaml.safe_load(node.value.value) or {})
    raise AssertionError(f"{name}: no RETURN")


def documented(keys: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """(dotted name, its documentation) of every key, those under `contains:` too."""
    for key, doc in keys.items():
        yield path + key, doc
        yield from documented(doc.get("contains") or {}, f"{path}{key}.")


def _wrong_type(value: Any, type_name: str | None) -> bool:
    wanted = TYPES.get(type_name or "str")
    if wanted is None:  # raw, complex: anything
        return False
    if isinstance(value, bool) and bool not in wanted:
        return True
    return not isinstance(value, wanted)


def sample_problems(name: str, keys: dict[str, Any]) -> list[str]:
    """One line for each key with no sample, or a sample of another type than declared."""
    problems = []
    for key, doc in documented(keys):
        if "sample" not in doc:
            problems.append(f"{name}: RETURN key {key} has no sample")
            continue
        sample = doc["sample"]
        if _wrong_type(sample, doc.get("type")):
            problems.append(f"{name}: RETURN key {key}: sample {sample!r} is not a {doc['type']}")
        elif doc.get("type") == "list" and doc.get("elements"):
            odd = [item for item in sample if _wrong_type(item, doc["elements"])]
            if odd:
                problems.append(
                    f"{name}: RETURN key {key}: elements {odd!r} are not {doc['elements']}"
                )
        contained = doc.get("contains") or {}
        items = sample if isinstance(sample, list) else [sample]
        undocumented = sorted(
            {k for item in items if isinstance(item, dict) for k in item} - contained.keys()
        )
        if contained and undocumented:
            problems.append(f"{name}: RETURN key {key}: sample holds undocumented {undocumented}")
    return problems


def test_library_has_modules():
    assert {"etcd_snapshot", "etcd_member", "etcd_cluster_info"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_every_return_key_has_a_sample_of_its_type(name):
    problems = sample_problems(name, return_doc(name))
    assert not problems, "\n".join(problems)


def test_the_check_catches_a_missing_or_wrong_sample():
    keys = yaml.safe_load(
        """
        ok: {description: x, returned: always, type: int, sample: 3}
        none: {description: x, returned: always, type: str}
        flag: {description: x, returned: always, type: int, sample: true}
        names: {description: x, returned: always, type: list, elements: str, sample: [a, 1]}
        members:
          description: x
          returned: always
          type: list
          elements: dict
          sample: [{id: a1, extra: 1}]
          contains:
            id: {description: x, returned: always, type: str, sample: a1}
            name: {description: x, returned: always, type: str}
        """
    )
    assert sample_problems("m", keys) == [
        "m: RETURN key none has no sample",
        "m: RETURN key flag: sample True is not a int",
        "m: RETURN key names: elements [1] are not str",
        "m: RETURN key members: sample holds undocumented ['extra']",
        "m: RETURN key members.name has no sample",
    ]
