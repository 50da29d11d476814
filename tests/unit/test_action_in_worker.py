"""plugins/action/normal.py: this project's modules run in the task's worker process, and a
module sees and returns the same as in a process of its own. Each case runs the real
`ansible` command both ways (etcd_modules_in_worker true and false) on a probe module."""

from __future__ import annotations

from pathlib import Path

import pytest

from plugins.action.normal import in_library
from testbed.ansible_adhoc import run_module
from testbed.host import REPO

PROBE = Path(__file__).resolve().parent / "in_worker"
ENV = {
    "ANSIBLE_LIBRARY": str(PROBE / "library"),
    "ANSIBLE_MODULE_UTILS": str(PROBE / "module_utils"),
}
# What differs by design: where it ran.
WHERE = ("in_worker", "pid")


def probe(args: dict, in_worker: bool, **kwargs) -> dict:
    return run_module(
        "in_worker_probe",
        args,
        extra_vars={"etcd_modules_in_worker": in_worker},
        env=ENV,
        **kwargs,
    )


def both(args: dict, **kwargs) -> tuple[dict, dict]:
    worker, own = probe(args, True, **kwargs), probe(args, False, **kwargs)
    assert worker.get("in_worker") is not False and own.get("in_worker") is not True
    return worker, own


def same(worker: dict, own: dict) -> None:
    strip = {k: v for k, v in worker.items() if k not in WHERE}
    assert strip == {k: v for k, v in own.items() if k not in WHERE}


@pytest.mark.parametrize(("check", "diff"), [(False, False), (True, True)])
def test_same_result_either_way(check, diff):
    worker, own = both({"secret": "s3cret"}, check=check, diff=diff)
    assert worker["in_worker"] is True and own["in_worker"] is False
    assert worker["check_mode"] is check and worker["diff_mode"] is diff
    assert worker["changed"] is (not check)
    # no_log masks the value wherever it appears, the invocation included.
    assert "s3cret" not in repr(worker)
    assert worker["secret"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"
    assert worker["warnings"] == ["a warning from the probe"]
    same(worker, own)


def test_output_around_the_result_and_exit_handlers(tmp_path):
    markers = {mode: tmp_path / f"{mode}.pid" for mode in ("worker", "own")}
    worker = probe({"noise": True, "marker": str(markers["worker"])}, True)
    own = probe({"noise": True, "marker": str(markers["own"])}, False)
    assert not worker.get("failed") and not own.get("failed"), (worker, own)
    # The handler ran when the module ended, in the process that ran it.
    assert markers["worker"].read_text() == str(worker["pid"])
    assert markers["own"].read_text() == str(own["pid"])
    same(
        {**worker, "invocation": None},
        {**own, "invocation": None},
    )


def test_a_module_that_raises_fails_the_task_as_in_its_own_process():
    worker, own = both({"fail": True})
    assert worker["failed"] is True and "the probe failed on purpose" in worker["msg"], worker
    same(worker, own)


@pytest.mark.parametrize(
    ("path", "libraries", "expected"),
    [
        (str(REPO / "library/etcd_member.py"), [str(REPO / "library")], True),
        (str(REPO / "library/etcd_member.py"), [str(REPO / "library") + "/"], True),
        # A module of ansible-core or a collection: its own process, as always.
        ("/venv/ansible/modules/ping.py", [str(REPO / "library")], False),
        (str(REPO / "library/sub/x.py"), [str(REPO / "library")], False),
        # Not Python (a binary or script module).
        (str(REPO / "library/x.sh"), [str(REPO / "library")], False),
        (str(REPO / "library/etcd_member.py"), [], False),
    ],
)
def test_which_modules_run_in_the_worker(path, libraries, expected):
    assert in_library(path, libraries) is expected
