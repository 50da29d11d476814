"""etcd_snapshot and etcd_snapshot_store with `directory` (a volume's layout) and real etcd,
through the real `ansible` command.

Save under a prefix and restore from it; the manifest beside the snapshot, both 0600, no
temp file left; a half-written (hidden) file never listed; a corrupt, truncated or missing
snapshot refused before anything is written; pruning with check and diff, the newest verified
never deleted; a missing directory and a key leaving the directory refused with their reason.
"""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path

import pytest

from tests.ansible_adhoc import run_module
from tests.filters import load_filter

bp = load_filter("etcd_backup_plan")
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
    prefix = bp.cluster_prefix("backups", "ns", "e")
    at_key = {**c.module_args(), "directory": str(root)}
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
    assert stat.S_IMODE(snapshot.stat().st_mode) == 0o600
    assert stat.S_IMODE((root / prefix.rstrip("/")).stat().st_mode) == 0o700
    again = run_module("etcd_snapshot", {**at_key, "key": keys[0]})
    assert not again["changed"], "a verified snapshot at the key is nothing to do"

    # What a save cut short leaves (a hidden temp file) is never listed; a file without a
    # manifest is listed unverified.
    (root / prefix / ".cut.db.x.part").write_bytes(content[:100])
    (root / prefix / "unverified.db").write_bytes(content)
    listed = run_module("etcd_snapshot_store", {"directory": str(root), "prefix": prefix})
    by_key = {s["key"]: s for s in listed["snapshots"]}
    assert set(by_key) == {*keys, f"{prefix}unverified.db"}, listed
    assert all(by_key[k]["verified"] for k in keys)
    assert not by_key[f"{prefix}unverified.db"]["verified"]
    newest = next(s["key"] for s in listed["snapshots"] if s["verified"])

    refused = run_module(
        "etcd_snapshot_store",
        {"directory": str(root), "prefix": prefix, "state": "absent", "keys": [newest]},
    )
    assert refused["failed"] and refused["reason"] == "Refused", refused
    older = [k for k in keys if k != newest][:2]
    delete = {"directory": str(root), "prefix": prefix, "state": "absent", "keys": older}
    planned = run_module("etcd_snapshot_store", delete, check=True, diff=True)
    assert planned["changed"] and len(planned["deleted"]) == 4, planned
    assert all((root / k).exists() for k in older), "check mode deletes nothing"
    done = run_module("etcd_snapshot_store", delete)
    assert done["changed"] and not any((root / k).exists() for k in older), done
    assert not any((root / (k + ".json")).exists() for k in older)
    assert not run_module("etcd_snapshot_store", delete)["changed"]

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
