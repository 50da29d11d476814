"""The two recipes of the operator image (Dockerfile and hack/build-operator-image) hold the
same files and packages, and everything they name exists and is pinned."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "hack/images"


def listed(path: Path) -> list[str]:
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def dockerfile_copies() -> set[str]:
    """Sources of the final stage's COPY lines (the builder stage copies recipe files)."""
    final = ROOT.joinpath("Dockerfile").read_text().rsplit("\nFROM ", 1)[1]
    sources: set[str] = set()
    for line in final.splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            sources.update(p.rstrip("/") for p in line.split()[1:-1])
    return sources


def test_dockerfile_copies_exactly_the_listed_files():
    assert dockerfile_copies() == set(listed(IMAGES / "operator-files.txt"))


def test_every_listed_path_exists():
    for rel in listed(IMAGES / "operator-files.txt"):
        assert (ROOT / rel).exists(), rel


def test_runtime_packages_are_pinned_by_requirements_txt():
    pins = {
        re.split(r"==", line)[0].lower().replace("_", "-")
        for line in listed(ROOT / "requirements.txt")
    }
    runtime = [name.lower() for name in listed(IMAGES / "operator-requirements.in")]
    assert runtime
    assert [name for name in runtime if name not in pins] == []
    for tool in ("pytest", "ruff", "mypy", "molecule", "ansible-lint"):
        assert tool not in runtime


def test_both_recipes_use_the_same_entrypoint_and_user():
    dockerfile = ROOT.joinpath("Dockerfile").read_text()
    script = ROOT.joinpath("hack/build-operator-image").read_text()
    entry = '"/opt/venv/bin/python", "-P", "/opt/etcd-runbook-operator/operator.py"'
    assert f"ENTRYPOINT [{entry}]" in dockerfile
    assert 'ENTRYPOINT = ["/opt/venv/bin/python", "-P", f"/{APP_DIR}/operator.py"]' in script
    assert 'APP_DIR = "opt/etcd-runbook-operator"' in script
    assert "USER 65532:65532" in dockerfile
    assert "UID = 65532" in script
    for var in ("ANSIBLE_CONFIG", "ANSIBLE_PYTHON_INTERPRETER", "HOME=/tmp"):
        assert var in dockerfile and var in script, var


def test_kept_collections_are_shipped_by_the_pinned_ansible():
    import ansible_collections

    installed = Path(next(iter(ansible_collections.__path__)))
    for name in listed(IMAGES / "operator-collections.txt"):
        assert (installed / name.replace(".", "/")).is_dir(), name


def test_every_collection_the_runbooks_use_is_kept():
    kept = set(listed(IMAGES / "operator-collections.txt")) | {"ansible.builtin"}
    fqcn = re.compile(r"^\s*-?\s*([a-z_0-9]+\.[a-z_0-9]+)\.[a-z_0-9]+:", re.MULTILINE)
    used: dict[str, str] = {}
    for path in [*ROOT.glob("roles/**/*.yml"), *ROOT.glob("playbooks/**/*.yml")]:
        for collection in fqcn.findall(path.read_text()):
            used.setdefault(collection, str(path.relative_to(ROOT)))
    assert "kubernetes.core" in used
    assert {c: p for c, p in used.items() if c not in kept} == {}


def test_both_recipes_ship_the_plugins_bytecode():
    # Read-only root filesystem and PYTHONDONTWRITEBYTECODE: bytecode not shipped is compiled
    # again by every task's worker process.
    dockerfile = ROOT.joinpath("Dockerfile").read_text()
    script = ROOT.joinpath("hack/build-operator-image").read_text()
    assert (
        "compileall -q --invalidation-mode checked-hash plugins etcd_runbook_operator \\\n"
        "      etcd_runbook" in dockerfile
    )
    assert 'BYTECODE_TOPS = ("plugins", "etcd_runbook_operator", "etcd_runbook")' in script
