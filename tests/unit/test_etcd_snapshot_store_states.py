"""The etcd_snapshot_store module's states
(etcd_runbook/operations/etcd_snapshot_store_states.py) over a real directory store: listed,
checked, and deleted only as the deletion rules allow, in check mode and with a diff. The
module on a real S3 store: tests/modules/test_etcd_snapshot_s3.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from etcd_runbook.clients.etcd_errors import EtcdInputError, EtcdRefusedError
from etcd_runbook.operations.etcd_snapshot_store_states import snapshot_store_state

OWNER = {"name": "nightly", "uid": "u-1", "cluster_id": "c1"}
MINE = {"namespace": "ns", "name": "nightly", "uid": "u-1"}
SHA = "a" * 64


def put(root: Path, key: str, time: str, **manifest: Any) -> None:
    """A snapshot of 4 bytes OWNER wrote, with a manifest that verifies it, plus `manifest`."""
    (root / key).parent.mkdir(parents=True, exist_ok=True)
    (root / key).write_bytes(b"snap")
    body = {"sha256": SHA, "size": 4, "time": time, "backup": MINE, "clusterID": "c1"}
    (root / f"{key}.json").write_text(json.dumps(body | manifest))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    put(tmp_path, "p/1.db", "2026-01-01T00:00:00Z")
    put(tmp_path, "p/2.db", "2026-01-02T00:00:00Z")
    put(tmp_path, "p/3.db", "2026-01-03T00:00:00Z")
    put(tmp_path, "p/0.db", "2025-12-31T00:00:00Z", clusterID="c0")
    (tmp_path / "p/gone.db.json").write_text("{}")
    put(tmp_path, "p/deeper/9.db", "2026-01-09T00:00:00Z")
    return tmp_path


def params(root: Path, **given: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "s3": None,
        "directory": str(root),
        "prefix": "p/",
        "recursive": False,
        "keys": [],
    }
    return base | {"state": "listed", "owner": None} | given


def keys(result: dict[str, Any]) -> list[str]:
    return [s["key"] for s in result["snapshots"]]


def test_listed_newest_first_with_what_their_manifests_say(root):
    listed = snapshot_store_state(params(root), check_mode=False, diff=False)
    assert keys(listed) == ["p/3.db", "p/2.db", "p/1.db", "p/0.db"]
    assert listed["orphans"] == ["p/gone.db.json"]
    assert listed["changed"] is False
    assert listed["msg"] == f"4 snapshots under {root}/p/, 4 verified"
    deeper = snapshot_store_state(params(root, recursive=True), check_mode=False, diff=False)
    assert keys(deeper)[0] == "p/deeper/9.db"


def test_keys_are_for_checking_or_deleting_only(root):
    with pytest.raises(EtcdInputError, match="keys is only used with state=absent or"):
        snapshot_store_state(params(root, keys=["p/1.db"]), check_mode=False, diff=False)


def test_checked_says_which_keys_are_still_verified(root):
    (root / "p/2.db.json").unlink()
    asked = params(root, state="checked", keys=["p/1.db", "p/2.db", "p/7.db"])
    checked = snapshot_store_state(asked, check_mode=False, diff=False)
    assert [(c["key"], c["verified"], c["why"]) for c in checked["checked"]] == [
        ("p/1.db", True, ""),
        ("p/2.db", False, "its manifest is gone"),
        ("p/7.db", False, "the snapshot is gone"),
    ]
    assert checked["msg"] == "1 of 3 verified; not: p/2.db, p/7.db"
    assert checked["changed"] is False


@pytest.mark.parametrize("state", ["checked", "absent"])
def test_keys_outside_the_prefix_are_refused(root, state):
    asked = params(root, state=state, keys=["q/1.db"], owner=OWNER)
    with pytest.raises(EtcdInputError, match=r"keys outside prefix 'p/': q/1\.db"):
        snapshot_store_state(asked, check_mode=False, diff=False)


def test_deleting_needs_an_owner(root):
    with pytest.raises(EtcdInputError, match="state=absent needs owner"):
        snapshot_store_state(params(root, state="absent", keys=["p/1.db"]), False, False)


@pytest.mark.parametrize(
    ("doomed", "words"),
    [
        (["p/1.db", "p/0.db"], "p/0.db: taken from etcd cluster c0"),
        (["p/3.db"], "refusing to delete p/3.db: it is the newest verified snapshot"),
    ],
)
def test_a_refused_deletion_deletes_nothing(root, doomed, words):
    before = sorted(p.name for p in (root / "p").iterdir())
    asked = params(root, state="absent", keys=doomed, owner=OWNER)
    with pytest.raises(EtcdRefusedError, match=words):
        snapshot_store_state(asked, check_mode=False, diff=False)
    assert sorted(p.name for p in (root / "p").iterdir()) == before


def test_a_deletion_is_planned_in_check_mode_then_done_once(root):
    asked = params(root, state="absent", keys=["p/1.db", "p/2.db"], owner=OWNER)
    doomed = ["p/1.db.json", "p/1.db", "p/2.db.json", "p/2.db"]
    planned = snapshot_store_state(asked, check_mode=True, diff=True)
    assert (planned["changed"], planned["deleted"]) == (True, doomed)
    assert planned["msg"] == "would delete 4 objects"
    assert keys(planned) == ["p/3.db", "p/2.db", "p/1.db", "p/0.db"]
    assert planned["diff"]["before"] == "p/0.db\np/1.db\np/2.db\np/3.db\np/gone.db.json\n"
    assert planned["diff"]["after"] == "p/0.db\np/3.db\np/gone.db.json\n"
    assert planned["diff"]["before_header"] == f"{root}/p/"
    assert (root / "p/1.db").exists()

    done = snapshot_store_state(asked, check_mode=False, diff=False)
    assert (done["changed"], done["deleted"], keys(done)) == (True, doomed, ["p/3.db", "p/0.db"])
    assert "diff" not in done
    assert done["msg"] == f"deleted 4 objects under {root}/p/"
    assert not (root / "p/1.db").exists() and not (root / "p/1.db.json").exists()

    again = snapshot_store_state(asked, check_mode=False, diff=True)
    assert (again["changed"], again["deleted"], again["msg"]) == (False, [], "nothing to delete")
    assert again["diff"]["before"] == again["diff"]["after"]
