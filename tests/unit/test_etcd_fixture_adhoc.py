"""testbed.ansible_adhoc runs modules through the real ansible CLI and returns their result."""

from testbed.ansible_adhoc import run_module


def test_ping_returns_module_result():
    result = run_module("ansible.builtin.ping", {"data": "hello"})
    assert result["ping"] == "hello"
    assert not result.get("failed")


def test_module_failure_is_a_result_not_an_exception():
    result = run_module("ansible.builtin.fail", {"msg": "boom"})
    assert result["failed"] is True
    assert result["msg"] == "boom"


def test_check_and_diff_reach_the_module(tmp_path):
    dest = tmp_path / "f"
    result = run_module(
        "ansible.builtin.copy", {"content": "a\n", "dest": str(dest)}, check=True, diff=True
    )
    assert result["changed"] is True
    assert result["diff"][0]["after"] == "a\n"
    assert not dest.exists()
