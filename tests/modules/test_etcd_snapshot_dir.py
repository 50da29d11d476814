"""etcd_snapshot and etcd_snapshot_store with `directory` (a volume's layout) and real etcd,
through the real `ansible` command.

Save under a backup's prefix and restore from it; the manifest beside the snapshot, naming
the backup and the cluster ID, both 0600, no temp file left; a half-written (hidden) file and
what lies deeper never listed; a check says what is gone; a corrupt, truncated or missing
snapshot refused before anything is written; pruning with check and diff, only the owner's
snapshots and never its newest; a missing directory and a key leaving the directory refused
with their reason.
"""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path

import pytest

from etcd_runbook.rules import etcd_backup_plan as bp
from testbed.ansible_adhoc import run_module

BUMP = 1_000_000_000


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@pytest.mark.etcd
def test_save_to_a_directory_then_list_prune_and_restore(etcd_cluster_factory, tmp_path):
    c = etcd_cluster_factory(version="3.6", size=1)
    data = {f"seed/{i:03d}": f"value-{i}" for i in range(20)}
    for key, value in data.items():
        c.put(key, value)
    root = tmp_path / "volume"
    root.mkdir()
    prefix = bp.backup_prefix("backups", "ns", "e", "nightly")
    mine = {"namespace": "ns", "name": "nightly", "uid": "uid-1"}
    at_key = {**c.module_args(), "directory": str(root), "backup": mine}
    save = {**at_key, "prefix": prefix}

    planned = run_module("etcd_snapshot", save, check=True)
    assert planned["changed"] and planned["key"].startswith(prefix), planned
    assert files_under(root) == [], "check mode writes nothing"

    keys = []
    for i in range(3):
        c.put(f"round/{i}", "x")
        saved = run_module("etcd_snapshot", {**at_key, "key": f"{prefix}{i}.db"})
        assert saved["changed"] and not saved.get("failed"), saved
        keys.append(saved["key"])
    by_prefix = run_module("etcd_snapshot", save)
    assert by_prefix["changed"] and by_prefix["key"].startswith(prefix), by_prefix
    keys.append(by_prefix["key"])
    assert files_under(root) == sorted([*keys, *(k + ".json" for k in keys)])
    snapshot = root / by_prefix["key"]
    content = snapshot.read_bytes()
    assert by_prefix["sha256"] == hashlib.sha256(content).hexdigest()
    assert json.loads((root / (by_prefix["key"] + ".json")).read_text()) == by_prefix["manifest"]
    assert by_prefix["manifest"]["backup"] == mine and by_prefix["manifest"]["clusterID"]
    assert stat.S_IMODE(snapshot.stat().st_mode) == 0o600
    assert stat.S_IMODE((root / prefix.rstrip("/")).stat().st_mode) == 0o700
    again = run_module("etcd_snapshot", {**at_key, "key": keys[0]})
    assert not again["changed"], "a verified snapshot at the key is nothing to do"

    # What a save cut short leaves (a hidden temp file) and what lies deeper are never listed;
    # a file without a manifest is listed unverified; another backup's snapshot is listed with
    # its owner.
    (root / prefix / ".cut.db.x.part").write_bytes(content[:100])
    (root / prefix / "unverified.db").write_bytes(content)
    (root / prefix / "deeper").mkdir()
    (root / prefix / "deeper" / "x.db").write_bytes(content)
    theirs = {"namespace": "ns", "name": "nightly", "uid": "uid-0"}
    other = run_module("etcd_snapshot", {**at_key, "backup": theirs, "key": f"{prefix}theirs.db"})
    assert other["changed"], other
    listed = run_module("etcd_snapshot_store", {"directory": str(root), "prefix": prefix})
    by_key = {s["key"]: s for s in listed["snapshots"]}
    assert set(by_key) == {*keys, f"{prefix}unverified.db", f"{prefix}theirs.db"}, listed
    assert all(by_key[k]["verified"] and by_key[k]["backup"] == mine for k in keys)
    assert not by_key[f"{prefix}unverified.db"]["verified"]
    assert by_key[f"{prefix}theirs.db"]["backup"] == theirs
    deep = run_module(
        "etcd_snapshot_store", {"directory": str(root), "prefix": prefix, "recursive": True}
    )
    assert f"{prefix}deeper/x.db" in {s["key"] for s in deep["snapshots"]}
    owner = {"name": "nightly", "uid": "uid-1", "cluster_id": by_prefix["manifest"]["clusterID"]}
    newest = next(s["key"] for s in listed["snapshots"] if s.get("backup") == mine)

    def absent(keys: list[str], who: dict | None = owner) -> dict:
        args = {"directory": str(root), "prefix": prefix, "state": "absent", "keys": keys}
        return {**args, **({"owner": who} if who else {})}

    refused = run_module("etcd_snapshot_store", absent([newest]))
    assert refused["failed"] and refused["reason"] == "Refused", refused
    for foreign in (f"{prefix}theirs.db", f"{prefix}unverified.db"):
        refused = run_module("etcd_snapshot_store", absent([keys[0], foreign]))
        assert refused["failed"] and refused["reason"] == "Refused", refused
        assert foreign in refused["msg"] and (root / keys[0]).exists()
    other_cluster = run_module(
        "etcd_snapshot_store", absent([keys[0]], {**owner, "cluster_id": "x"})
    )
    assert other_cluster["failed"] and "taken from etcd cluster" in other_cluster["msg"]
    ownerless = run_module("etcd_snapshot_store", absent([keys[0]], None))
    assert ownerless["failed"] and "needs owner" in ownerless["msg"], ownerless
    older = [k for k in keys if k != newest][:2]
    delete = absent(older)
    planned = run_module("etcd_snapshot_store", delete, check=True, diff=True)
    assert planned["changed"] and len(planned["deleted"]) == 4, planned
    assert all((root / k).exists() for k in older), "check mode deletes nothing"
    done = run_module("etcd_snapshot_store", delete)
    assert done["changed"] and not any((root / k).exists() for k in older), done
    assert not any((root / (k + ".json")).exists() for k in older)
    assert not run_module("etcd_snapshot_store", delete)["changed"]
    assert (root / prefix / "theirs.db").exists() and (root / prefix / "unverified.db").exists()

    # A check of what is there, and of what is gone.
    kept = next(k for k in keys if k != newest and k not in older)
    (root / (kept + ".json")).unlink()
    check = {"directory": str(root), "prefix": "", "state": "checked"}
    checked = run_module("etcd_snapshot_store", {**check, "keys": [newest, kept, older[0]]})
    assert not checked["changed"], checked
    found, no_manifest, gone = checked["checked"]
    assert found["verified"] and found["sha256"] == by_key[newest]["sha256"] and not found["why"]
    assert no_manifest["found"] and not no_manifest["verified"]
    assert no_manifest["why"] == "its manifest is gone"
    assert (gone["found"], gone["why"]) == (False, "the snapshot is gone")

    peer = etcd_cluster_factory.free_url()
    fetched = tmp_path / "fetched.db"
    data_dir = tmp_path / "restored"
    restore = {
        "state": "restored",
        "directory": str(root),
        "key": by_prefix["key"],
        "path": str(fetched),
        "data_dir": str(data_dir),
        "name": "r1",
        "initial_advertise_peer_urls": [peer],
        "bin_dir": str(c.bin_dir),
    }
    restored = run_module("etcd_snapshot", restore)
    assert restored["changed"] and not restored.get("failed"), restored
    assert fetched.read_bytes() == content
    r = etcd_cluster_factory.from_data_dir("3.6", data_dir, "r1", peer)
    for k, v in data.items():
        assert r.get(k) == v
    header = json.loads(r.etcdctl("get", "-w", "json", "any").stdout)["header"]
    assert int(header["revision"]) >= by_prefix["revision"] + BUMP


@pytest.mark.etcd
def test_damaged_missing_and_misplaced_snapshots_are_refused(etcd_cluster_factory, tmp_path):
    c = etcd_cluster_factory(version="3.5", size=1)
    c.put("k", "v")
    root = tmp_path / "volume"
    root.mkdir()
    saved = run_module("etcd_snapshot", {**c.module_args(), "directory": str(root), "key": "s.db"})
    assert saved["changed"], saved
    good = (root / "s.db").read_bytes()

    def fetch(key: str, name: str) -> dict:
        args = {
            "state": "fetched",
            "directory": str(root),
            "key": key,
            "path": str(tmp_path / name),
        }
        return run_module("etcd_snapshot", args)

    damaged = bytearray(good)
    damaged[len(damaged) // 2] ^= 0xFF
    (root / "s.db").write_bytes(bytes(damaged))
    result = fetch("s.db", "d1.db")
    assert result["failed"] and result["reason"] == "SnapshotCorrupt", result
    assert not (tmp_path / "d1.db").exists()
    (root / "s.db").write_bytes(good[:-1000])
    result = fetch("s.db", "d2.db")
    assert result["failed"] and "truncated" in result["msg"], result
    (root / "s.db").write_bytes(good)
    assert fetch("s.db", "d3.db")["changed"]

    missing = fetch("nothing.db", "d4.db")
    assert missing["failed"] and missing["reason"] == "SnapshotMissing", missing
    for key in ("../s.db", "/etc/passwd", "a/./b.db", ".hidden.db"):
        escaped = fetch(key, "d5.db")
        assert escaped["failed"] and escaped["reason"] == "InvalidInput", (key, escaped)

    unmounted = run_module(
        "etcd_snapshot",
        {**c.module_args(), "directory": str(tmp_path / "not-mounted"), "prefix": "p"},
    )
    assert unmounted["failed"] and unmounted["reason"] == "VolumeMissing", unmounted
    assert "is the volume mounted" in unmounted["msg"]
    listing = run_module(
        "etcd_snapshot_store", {"directory": str(tmp_path / "not-mounted"), "prefix": "p/"}
    )
    assert listing["failed"] and listing["reason"] == "VolumeMissing", listing
    both = run_module(
        "etcd_snapshot_store", {"directory": str(root), "s3": {"bucket": "b"}, "prefix": "p/"}
    )
    assert both["failed"] and "mutually exclusive" in both["msg"], both
