"""operator.py must never stand in for the standard library's `operator` module."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Runs at interpreter exit inside the `python operator.py ...` process.
SITECUSTOMIZE = """
import atexit, sys

def _report():
    import operator
    sys.stderr.write("OPERATOR_MODULE=%s ITEMGETTER=%s\\n"
                     % (operator.__file__, hasattr(operator, "itemgetter")))

atexit.register(_report)
"""


@pytest.mark.parametrize("entry", [["operator.py"], ["-m", "etcd_runbook_operator"]])
def test_import_operator_is_the_stdlib_inside_the_operator(tmp_path, entry):
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE)
    proc = subprocess.run(
        [sys.executable, *entry, "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "--watches-file" in proc.stdout and "--leader-election-id" in proc.stdout
    line = next(x for x in proc.stderr.splitlines() if x.startswith("OPERATOR_MODULE="))
    module_file = line.split()[0].split("=", 1)[1]
    assert Path(module_file).resolve() != REPO / "operator.py"
    assert Path(module_file).parent == Path(subprocess.__file__).parent
    assert line.endswith("ITEMGETTER=True")


def test_importing_the_file_by_mistake_still_gives_the_stdlib():
    # As with PYTHONPATH=<repo>: the repo precedes the stdlib and nothing imported operator yet.
    code = (
        "import sys; sys.modules.pop('operator', None); sys.path.insert(0, sys.argv[1]);"
        "import operator; print(operator.__file__, operator.itemgetter);"
        "import etcd_runbook_operator.main"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(REPO)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert str(REPO / "operator.py") not in proc.stdout and "itemgetter" in proc.stdout


def test_no_script_directory_holds_a_module_named_after_the_stdlib():
    # A script run as `python dir/x.py` puts dir/ first on sys.path: a dir/operator.py (or
    # any other stdlib name) there breaks `import enum` and everything after it.
    tracked = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    shadows = [p for p in tracked if "/" in p and Path(p).stem in sys.stdlib_module_names]
    assert shadows == [], f"rename these, they shadow the standard library: {shadows}"


def test_unknown_watches_key_is_a_startup_error(tmp_path):
    (tmp_path / "pb.yml").write_text("[]\n")
    watches = tmp_path / "watches.yaml"
    watches.write_text("- {group: a.io, version: v1, kind: A, playbook: pb.yml, colour: red}\n")
    proc = subprocess.run(
        [sys.executable, str(REPO / "operator.py"), "--watches-file", str(watches)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "unknown key 'colour'" in proc.stderr and str(watches) in proc.stderr
