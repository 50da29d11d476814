"""etcd_snapshot against real etcd clusters, run through the real `ansible` command.

Save from the leader and from a follower, restore into a new one-member cluster with the
etcd tool of the same version, on every supported minor; integrity and refusals on 3.5.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from testbed.ansible_adhoc import run_module

VERSIONS = ["3.4", "3.5", "3.6"]
BUMP = 1_000_000_000


def snapshot_run(c, check: bool = False, **args: Any) -> dict[str, Any]:
    return run_module("etcd_snapshot", {**c.module_args(), **args}, check=check)


def restore_args(c, snap: Path, data_dir: Path, peer: str, **extra: Any) -> dict[str, Any]:
    return {
        "state": "restored",
        "path": str(snap),
        "data_dir": str(data_dir),
        "name": "r1",
        "initial_advertise_peer_urls": [peer],
        "bin_dir": str(c.bin_dir),
        **extra,
    }


def revision(c) -> int:
    return int(json.loads(c.etcdctl("get", "-w", "json", "any").stdout)["header"]["revision"])


def seed(c, count: int = 20) -> dict[str, str]:
    data = {f"seed/{i:03d}": f"value-{i}" for i in range(count)}
    for key, value in data.items():
        c.put(key, value)
    return data


def check_new_cluster(r, data: dict[str, str], original_revision: int) -> None:
    """The restored member `r` holds every key of `data`, as a new cluster of one whose
    revisions are past the old cluster's."""
    for key, value in data.items():
        assert r.get(key) == value
    # Watchers of the old cluster resume from revisions it never had: the new cluster's
    # revisions must be past them, and the old range must read as compacted.
    assert revision(r) >= original_revision + BUMP
    old = r.etcdctl("get", f"--rev={original_revision}", "seed/000", check=False)
    assert old.returncode != 0 and "compacted" in old.stderr, old
    assert [m["name"] for m in r.member_list()] == ["r1"]


@pytest.mark.etcd
@pytest.mark.parametrize("version", VERSIONS)
def test_save_from_leader_and_follower_then_restore(etcd_cluster_factory, tmp_path, version):
    c = etcd_cluster_factory(version=version, size=3)
    data = seed(c)
    original_revision = revision(c)
    leader = c.leader_name()
    follower = sorted(m.name for m in c.members if m.name != leader)[0]
    backups = tmp_path / "backups"
    backups.mkdir()

    planned = snapshot_run(c, check=True, path=str(backups / "leader.db"))
    assert planned["changed"] and planned["member"]["name"] == leader, planned
    assert os.listdir(backups) == [], "check mode must write nothing"

    saved = snapshot_run(c, path=str(backups / "leader.db"))
    assert saved["changed"] and not saved.get("failed"), saved
    assert saved["member"]["name"] == leader
    content = (backups / "leader.db").read_bytes()
    assert saved["size"] == len(content)
    assert saved["sha256"] == hashlib.sha256(content).hexdigest()
    assert saved["revision"] >= original_revision
    assert os.listdir(backups) == ["leader.db"], "no temp file may be left behind"
    assert oct((backups / "leader.db").stat().st_mode & 0o777) == "0o600"

    again = snapshot_run(c, path=str(backups / "leader.db"))
    assert not again["changed"] and again["sha256"] == saved["sha256"], again

    from_follower = snapshot_run(
        c, path=str(backups / "follower.db"), member=follower, bin_dir=str(c.bin_dir)
    )
    assert from_follower["changed"] and from_follower["member"]["name"] == follower
    # With the tool given, the revision is the snapshot's own, read from the file.
    assert from_follower["revision"] == original_revision, from_follower
    assert from_follower["snapshot_status"]["revision"] == original_revision

    snap = backups / "follower.db"
    data_dir = tmp_path / "restored"
    peer = etcd_cluster_factory.free_url()
    args = restore_args(c, snap, data_dir, peer, sha256=from_follower["sha256"])
    planned = run_module("etcd_snapshot", args, check=True)
    assert planned["changed"] and not data_dir.exists(), planned
    assert "--bump-revision=1000000000" in planned["command"]

    restored = run_module("etcd_snapshot", args)
    assert restored["changed"] and not restored.get("failed"), restored
    assert restored["revision"] == original_revision
    assert "--mark-compacted" in restored["command"]
    assert not run_module("etcd_snapshot", args)["changed"], "second restore must be a no-op"

    r = etcd_cluster_factory.from_data_dir(version, data_dir, "r1", peer)
    check_new_cluster(r, data, original_revision)
    assert not run_module("etcd_snapshot", args)["changed"], "still a no-op once it runs"


@pytest.mark.etcd
def test_corrupt_snapshot_and_wrong_data_dir_are_refused(etcd_cluster_factory, tmp_path):
    c = etcd_cluster_factory(version="3.5", size=1)
    seed(c)
    snap = tmp_path / "good.db"
    saved = snapshot_run(c, path=str(snap))
    assert saved["changed"], saved
    peer = etcd_cluster_factory.free_url()

    corrupt = tmp_path / "corrupt.db"
    content = bytearray(snap.read_bytes())
    content[len(content) // 2] ^= 0xFF
    corrupt.write_bytes(bytes(content))
    result = run_module("etcd_snapshot", restore_args(c, corrupt, tmp_path / "d1", peer))
    assert result["failed"] and result["reason"] == "SnapshotCorrupt", result
    assert "does not match the hash etcd appended" in result["msg"]
    assert not (tmp_path / "d1").exists()

    truncated = tmp_path / "truncated.db"
    truncated.write_bytes(snap.read_bytes()[:-100])
    result = run_module("etcd_snapshot", restore_args(c, truncated, tmp_path / "d2", peer))
    assert result["failed"] and "no etcd integrity hash" in result["msg"], result

    wrong_sha = restore_args(c, snap, tmp_path / "d3", peer, sha256="0" * 64)
    result = run_module("etcd_snapshot", wrong_sha)
    assert result["failed"] and "not the expected" in result["msg"], result
    assert not (tmp_path / "d3").exists()

    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "member").mkdir()
    result = run_module("etcd_snapshot", restore_args(c, snap, occupied, peer))
    assert result["failed"] and result["reason"] == "Refused", result
    assert os.listdir(occupied) == ["member"]

    first = restore_args(c, snap, tmp_path / "d4", peer)
    assert run_module("etcd_snapshot", first)["changed"]
    other_name = run_module("etcd_snapshot", {**first, "name": "r2"})
    assert other_name["failed"] and "different restore" in other_name["msg"], other_name

    # An existing file is kept unless force; force replaces it atomically.
    forced = snapshot_run(c, path=str(snap), force=True)
    assert forced["changed"] and snap.stat().st_size == forced["size"], forced


@pytest.mark.etcd
def test_bad_input_fails_clearly(etcd_cluster_factory, tmp_path):
    c = etcd_cluster_factory(version="3.5", size=1)
    unknown = snapshot_run(c, path=str(tmp_path / "x.db"), member="nope")
    assert unknown["failed"] and "no member 'nope'" in unknown["msg"], unknown

    unreachable = run_module(
        "etcd_snapshot",
        {"endpoints": [etcd_cluster_factory.free_url()], "path": str(tmp_path / "y.db")},
    )
    assert unreachable["failed"] and "connection refused" in unreachable["msg"], unreachable

    no_dir = snapshot_run(c, path=str(tmp_path / "missing" / "z.db"))
    assert no_dir["failed"] and "does not exist" in no_dir["msg"], no_dir

    no_tool = run_module(
        "etcd_snapshot",
        {"state": "restored", "path": str(tmp_path / "x.db"), "data_dir": str(tmp_path / "d")},
    )
    assert no_tool["failed"] and "etcdutl or bin_dir" in no_tool["msg"], no_tool
    assert os.listdir(tmp_path) == ["etcd"], "nothing may be written on bad input"


@pytest.mark.etcd
def test_save_over_tls_with_auth(etcd_cluster_factory, tmp_path):
    c = etcd_cluster_factory(version="3.5", size=1, tls=True, auth=True)
    seed(c, count=3)
    saved = snapshot_run(c, path=str(tmp_path / "tls.db"), bin_dir=str(c.bin_dir))
    assert saved["changed"] and not saved.get("failed"), saved
    assert saved["snapshot_status"]["totalKey"] >= 3

    wrong = {**c.module_args(), "password": "wrong"}
    refused = run_module("etcd_snapshot", {**wrong, "path": str(tmp_path / "no.db")})
    assert refused["failed"] and refused["reason"] == "AuthFailed", refused
    assert not (tmp_path / "no.db").exists()


def test_a_stream_that_breaks_leaves_nothing_behind(tmp_path):
    """save_atomically with a stream that fails half way, and one whose hash is wrong: the
    target keeps its old content and no temp file remains. (The stream is faked here: real
    etcd does not break on demand.)"""
    from etcd_runbook.clients.etcd_snapshot_io import SnapshotIntegrityError, save_atomically

    target = tmp_path / "snap.db"
    target.write_bytes(b"old")
    db = os.urandom(512 * 3)

    def broken(sink):
        sink.write(db[:1000])
        raise ConnectionError("stream cut")

    with pytest.raises(ConnectionError):
        save_atomically(str(target), broken)
    with pytest.raises(SnapshotIntegrityError):
        save_atomically(str(target), lambda sink: sink.write(db + b"\0" * 32))
    assert target.read_bytes() == b"old" and os.listdir(tmp_path) == ["snap.db"]

    saved = save_atomically(str(target), lambda sink: sink.write(db + hashlib.sha256(db).digest()))
    assert saved.size == len(db) + 32 and target.read_bytes()[:-32] == db


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under `root` by its sha256: a data dir read, never written, keeps it."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.etcd
@pytest.mark.parametrize("version", VERSIONS)
def test_a_majority_lost_is_recovered_from_the_stopped_survivor_s_own_database(
    etcd_cluster_factory, tmp_path, version
):
    c = etcd_cluster_factory(version=version, size=3)
    data = seed(c)
    original_revision = revision(c)
    old_cluster_id = c.endpoint_status()[0]["Status"]["header"]["cluster_id"]
    survivor, *lost = sorted(m.name for m in c.members)
    for name in lost:  # two of three members and their data gone for good
        c.kill_member(name)
        shutil.rmtree(c.member(name).data_dir)
    source = c.member(survivor).data_dir
    peer = etcd_cluster_factory.free_url()
    data_dir = tmp_path / "recovered"
    args = {
        **restore_args(c, tmp_path / "survivor.db", data_dir, peer),
        "member_data_dir": str(source),
    }

    running = run_module("etcd_snapshot", args)
    assert running["failed"] and running["reason"] == "Refused", running
    assert "belongs to a running etcd" in running["msg"], running
    assert not data_dir.exists() and not (tmp_path / "survivor.db").exists()

    c.stop_member(survivor)
    before = tree_digest(source)
    planned = run_module("etcd_snapshot", args, check=True)
    assert planned["changed"] and "--skip-hash-check" in planned["command"], planned
    assert not data_dir.exists() and not (tmp_path / "survivor.db").exists()

    restored = run_module("etcd_snapshot", args)
    assert restored["changed"] and not restored.get("failed"), restored
    assert restored["revision"] == original_revision, restored
    assert {"--skip-hash-check", "--mark-compacted"} <= set(restored["command"])
    assert not run_module("etcd_snapshot", args)["changed"], "second restore must be a no-op"
    assert tree_digest(source) == before, "the survivor's data dir must be read, never written"

    r = etcd_cluster_factory.from_data_dir(version, data_dir, "r1", peer)
    check_new_cluster(r, data, original_revision)
    assert r.endpoint_status()[0]["Status"]["header"]["cluster_id"] != old_cluster_id

    empty = tmp_path / "not-a-member"
    empty.mkdir()
    nothing = run_module("etcd_snapshot", {**args, "member_data_dir": str(empty)})
    assert nothing["failed"] and "holds no etcd database" in nothing["msg"], nothing


@pytest.mark.etcd
@pytest.mark.parametrize("version", VERSIONS)
def test_a_stopped_member_s_database_is_fetched_whole_for_etcd_s_own_restore(
    etcd_cluster_factory, tmp_path, version
):
    """The recovery Job's first step (state=fetched with member_data_dir) copies the stopped
    member's database; its next step, etcd's own tool with --skip-hash-check, restores it."""
    from etcd_runbook.clients.etcd_snapshot_tool import find_tool

    c = etcd_cluster_factory(version=version, size=1)
    data = seed(c)
    original_revision = revision(c)
    name = c.members[0].name
    source = c.member(name).data_dir
    copy = tmp_path / "survivor.db"
    args = {"state": "fetched", "member_data_dir": str(source), "path": str(copy)}

    running = run_module("etcd_snapshot", args)
    assert running["failed"] and running["reason"] == "Refused", running
    assert "belongs to a running etcd" in running["msg"], running
    assert not copy.exists()

    c.stop_member(name)
    before = tree_digest(source)
    planned = run_module("etcd_snapshot", args, check=True)
    assert planned["changed"] and planned["msg"].startswith("would copy "), planned
    assert not copy.exists()

    fetched = run_module("etcd_snapshot", args)
    assert fetched["changed"] and not fetched.get("failed"), fetched
    db = (source / "member" / "snap" / "db").read_bytes()
    assert copy.read_bytes() == db
    assert (fetched["size"], fetched["sha256"]) == (len(db), hashlib.sha256(db).hexdigest())
    again = run_module("etcd_snapshot", args)
    assert not again["changed"] and again["sha256"] == fetched["sha256"], again
    assert tree_digest(source) == before, "the member's data dir must be read, never written"

    # The module restores a file only with etcd's hash trailer, which a member's database lacks:
    # the Job's next step runs etcd's own tool, as here.
    tool = find_tool(None, str(c.bin_dir))
    peer = etcd_cluster_factory.free_url()
    data_dir = tmp_path / "recovered"
    tool.restore(
        tool.restore_command(
            str(copy),
            str(data_dir),
            name="r1",
            initial_cluster=f"r1={peer}",
            initial_cluster_token="recovered",
            initial_advertise_peer_urls=peer,
            bump_revision=BUMP,
            skip_hash_check=True,
        )
    )
    r = etcd_cluster_factory.from_data_dir(version, data_dir, "r1", peer)
    check_new_cluster(r, data, original_revision)
