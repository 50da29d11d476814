"""Every module in library/: its documentation (as ansible-doc renders it, doc fragments
merged) describes exactly its argument_spec, and EXAMPLES/RETURN are valid YAML."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
MODULES = sorted(p.stem for p in (REPO / "library").glob("*.py") if not p.stem.startswith("_"))


class _Captured(Exception):
    def __init__(self, kwargs: dict[str, Any]):
        super().__init__("AnsibleModule constructed")
        self.kwargs = kwargs


class _CaptureModule:
    """Stands in for AnsibleModule: records the spec main() builds, then stops main()."""

    def __init__(self, **kwargs: Any):
        raise _Captured(kwargs)


def argument_spec_of(name: str) -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location(
        f"_doc_check_{name}", REPO / "library" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.AnsibleModule = _CaptureModule  # type: ignore[attr-defined]
    with pytest.raises(_Captured) as captured:
        module.main()
    return dict(captured.value.kwargs["argument_spec"])


@functools.cache
def rendered_doc(name: str) -> dict[str, Any]:
    """ansible-doc's JSON for one module (one call each, so one broken module fails alone)."""
    proc = subprocess.run(
        [str(REPO / ".venv/bin/ansible-doc"), "-j", "-M", "library", name],
        cwd=REPO,
        env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg")),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr
    return dict(json.loads(proc.stdout)[name])


def compare(doc: dict[str, Any], spec: dict[str, Any], path: str) -> list[str]:
    """Differences between documented options and an argument_spec, one line each."""
    problems = [f"{path}{k}: documented, not in argument_spec" for k in doc.keys() - spec.keys()]
    problems += [f"{path}{k}: in argument_spec, not documented" for k in spec.keys() - doc.keys()]
    for key in sorted(doc.keys() & spec.keys()):
        d, s = doc[key], spec[key]
        expected = {
            "type": s.get("type", "str"),
            "required": bool(s.get("required", False)),
            "default": s.get("default"),
            "choices": s.get("choices"),
            "elements": s.get("elements"),
        }
        documented = {
            "type": d.get("type", "str"),
            "required": bool(d.get("required", False)),
            "default": d.get("default"),
            "choices": d.get("choices"),
            "elements": d.get("elements"),
        }
        for field, value in expected.items():
            if documented[field] != value:
                problems.append(
                    f"{path}{key}.{field}: documented {documented[field]!r}, spec {value!r}"
                )
        if not d.get("description"):
            problems.append(f"{path}{key}: no description")
        problems += compare(d.get("suboptions") or {}, s.get("options") or {}, f"{path}{key}.")
    return problems


def test_library_has_modules():
    assert {"etcd_member", "etcd_cluster_info"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_documentation_matches_argument_spec(name):
    rendered = rendered_doc(name)
    problems = compare(rendered["doc"].get("options") or {}, argument_spec_of(name), "")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", MODULES)
def test_examples_and_return_are_yaml(name):
    examples = yaml.safe_load(rendered_doc(name)["examples"])
    assert isinstance(examples, list) and examples
    assert any(name in task for task in examples), "no example uses the module"
    assert isinstance(rendered_doc(name)["return"], dict)


def test_the_check_catches_a_mismatch():
    doc = {"a": {"type": "int", "description": ["x"]}, "b": {"description": ["y"]}}
    spec = {"a": {"type": "str"}, "c": {"type": "str"}}
    assert compare(doc, spec, "") == [
        "b: documented, not in argument_spec",
        "c: in argument_spec, not documented",
        "a.type: documented 'int', spec 'str'",
    ]


def _descriptions(node: Any, path: str) -> list[tuple[str, Any]]:
    """Every description line under `node`, with where it is."""
    found: list[tuple[str, Any]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("description", "short_description"):
                lines = value if isinstance(value, list) else [value]
                found += [(f"{path}{key}", line) for line in lines]
            found += _descriptions(value, f"{path}{key}.")
    elif isinstance(node, list):
        for value in node:
            found += _descriptions(value, path)
    return found


@pytest.mark.parametrize("name", MODULES)
def test_every_description_line_is_text(name):
    """A line like `- No answer: ...` is a YAML mapping, which ansible-doc's JSON passes and
    its text view refuses to render."""
    doc = rendered_doc(name)
    odd = [(where, line) for where, line in _descriptions(doc, "") if not isinstance(line, str)]
    assert odd == []
