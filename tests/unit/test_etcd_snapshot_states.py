"""The etcd_snapshot module's states (etcd_runbook/operations/etcd_snapshot_states.py and
etcd_snapshot_save.py) over a real directory store, with etcd and its tool faked: what is kept,
what check mode promises, what a save records, what a fetch and a restore refuse; a stopped
member's database fetched, from a fake bbolt file. The same module on real etcd, etcdutl and
S3: tests/modules/test_etcd_snapshot*.py."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from etcd_runbook.clients.etcd_common import EndpointStatus, Member
from etcd_runbook.clients.etcd_errors import EtcdInputError, EtcdModuleError
from etcd_runbook.clients.etcd_snapshot_tool import SnapshotTool
from etcd_runbook.operations import etcd_member_db as member_db
from etcd_runbook.operations import etcd_snapshot_save as save
from etcd_runbook.operations import etcd_snapshot_states as states
from etcd_runbook.operations.etcd_health import ClusterHealth
from etcd_runbook.operations.etcd_snapshot_dir import DirectoryStore
from etcd_runbook.operations.etcd_snapshot_restore import MARKER

DB = os.urandom(512 * 3)
SNAPSHOT = DB + hashlib.sha256(DB).digest()  # as etcd streams it: sectors, then their sha256
SHA = hashlib.sha256(SNAPSHOT).hexdigest()
LEADER = Member(id="a1", name="m1", client_urls=["http://127.0.0.1:2379"])
FOLLOWER = Member(id="a2", name="m2", client_urls=["http://127.0.0.1:2389"])
BACKUP = {"namespace": "ns", "name": "nightly", "uid": "u-1"}


def params(**given: Any) -> dict[str, Any]:
    """The module's params as AnsibleModule hands them (the connection's left out: faked)."""
    names = (
        "s3 directory key prefix backup path member etcdutl bin_dir sha256 data_dir "
        "initial_cluster initial_cluster_token"
    )
    return {
        **dict.fromkeys(names.split()),
        "state": "saved",
        "endpoints": ["http://127.0.0.1:2379"],
        "force": False,
        "snapshot_timeout": 60.0,
        "name": None,
        "initial_advertise_peer_urls": None,
        "bump_revision": 1_000_000_000,
        "member_data_dir": None,
        **given,
    }


def health(leader: str | None = "a1") -> ClusterHealth:
    h = ClusterHealth(cluster_id="c1", members=[LEADER, FOLLOWER], statuses=[], leader_id=leader)
    for m in (LEADER, FOLLOWER):
        h.member_status[m.id] = EndpointStatus(
            endpoint=m.client_urls[0], healthy=True, member_id=m.id, version="3.5.21", db_size=2048
        )
    return h


@pytest.fixture
def etcd(monkeypatch):
    """etcd faked where etcd_snapshot_save reaches it; `streams` counts snapshot streams."""
    fake = SimpleNamespace(streams=0, health=health())

    class Client:
        params = "connection"
        expected_cluster_id = None

        def __init__(self, connection: Any):
            pass

        def __enter__(self) -> Client:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

    def stream(connection: Any, url: str, sink: Any, timeout: float, cluster_id: Any) -> int:
        fake.streams += 1
        sink.write_many([SNAPSHOT])
        return len(SNAPSHOT)

    monkeypatch.setattr(save, "EtcdClient", Client)
    monkeypatch.setattr(save, "ConnectionParams", SimpleNamespace(from_module_params=repr))
    monkeypatch.setattr(save, "cluster_health", lambda client: fake.health)
    monkeypatch.setattr(
        save, "member_endpoint", lambda c, h, m: SimpleNamespace(url=m.client_urls[0])
    )
    monkeypatch.setattr(save, "read_revision", lambda endpoint: 42)
    monkeypatch.setattr(save, "stream_snapshot", stream)
    return fake


def put(root: Path, key: str, body: bytes = SNAPSHOT, manifest: dict | None = None) -> None:
    (root / key).parent.mkdir(parents=True, exist_ok=True)
    (root / key).write_bytes(body)
    if manifest is not None:
        (root / f"{key}.json").write_text(json.dumps(manifest))


# ---- the one entry --------------------------------------------------------------------


def test_a_request_that_cannot_be_met_is_refused_before_anything_is_done(etcd, tmp_path):
    with pytest.raises(EtcdInputError, match="state=saved with directory needs exactly one"):
        states.snapshot_state(params(directory=str(tmp_path)), check_mode=False)
    assert etcd.streams == 0


# ---- saved ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wanted", "leader", "chosen"),
    [(None, "a1", LEADER), ("m2", "a1", FOLLOWER), ("a2", None, FOLLOWER)],
)
def test_the_member_snapshotted_is_the_one_named_else_the_leader(wanted, leader, chosen):
    assert save.snapshot_member(health(leader), wanted) == chosen


def test_without_a_leader_a_member_must_be_named():
    with pytest.raises(EtcdModuleError, match="name a member to snapshot") as failed:
        save.snapshot_member(health(None), None)
    assert failed.value.reason == "NoLeader"


def test_a_file_that_exists_is_kept_unless_forced(etcd, tmp_path):
    path = tmp_path / "s.db"
    path.write_bytes(SNAPSHOT)
    kept = states.snapshot_state(params(path=str(path)), check_mode=False)
    assert kept == {
        "changed": False,
        "msg": f"{path} exists; nothing saved (force=false)",
        "path": str(path),
        "size": len(SNAPSHOT),
        "sha256": SHA,
    }
    assert etcd.streams == 0
    forced = states.snapshot_state(params(path=str(path), force=True), check_mode=False)
    assert forced["changed"] and etcd.streams == 1 and forced["revision"] == 42


def test_a_verified_snapshot_under_the_key_is_kept_unless_forced(etcd, tmp_path):
    put(tmp_path, "p/s.db", manifest={"sha256": SHA, "size": len(SNAPSHOT), "revision": 7})
    asked = params(directory=str(tmp_path), key="p/s.db")
    kept = states.snapshot_state(asked, check_mode=False)
    assert (kept["changed"], kept["revision"], kept["key"], etcd.streams) == (False, 7, "p/s.db", 0)
    assert kept["msg"].endswith("holds a verified snapshot; nothing saved (force=false)")
    assert states.snapshot_state({**asked, "force": True}, check_mode=False)["changed"]


def test_an_unverified_snapshot_under_the_key_is_replaced(etcd, tmp_path):
    put(tmp_path, "p/s.db", body=b"half")
    saved = states.snapshot_state(params(directory=str(tmp_path), key="p/s.db"), False)
    assert saved["changed"] and (tmp_path / "p/s.db").read_bytes() == SNAPSHOT


def test_check_mode_names_the_new_key_and_the_database_size_and_writes_nothing(etcd, tmp_path):
    asked = params(directory=str(tmp_path), prefix="/ns/e/nightly/", member="m2")
    planned = states.snapshot_state(asked, check_mode=True)
    key = planned["key"]
    assert key.startswith("ns/e/nightly/") and key.endswith("-rev42.db")
    assert planned == {
        "changed": True,
        "path": str(tmp_path / key),
        "key": key,
        "member": FOLLOWER.as_dict(),
        "endpoint": "http://127.0.0.1:2389",
        "revision": 42,
        "size": 2048,
        "msg": f"would save a snapshot of m2 (a2) to {tmp_path / key}",
    }
    assert etcd.streams == 0 and list(tmp_path.iterdir()) == []


def test_a_save_into_a_store_writes_the_manifest_that_verifies_it(etcd, tmp_path):
    asked = params(directory=str(tmp_path), key="p/s.db", backup=BACKUP)
    saved = states.snapshot_state(asked, check_mode=False)
    manifest = json.loads((tmp_path / "p/s.db.json").read_text())
    assert saved["manifest"] == manifest
    assert manifest == {
        "format": "etcd.runbook.io/snapshot-manifest/v1",
        "key": "p/s.db",
        "sha256": SHA,
        "size": len(SNAPSHOT),
        "revision": 42,
        "etcdVersion": "3.5.21",
        "clusterID": "c1",
        "member": {"name": "m1", "id": "a1"},
        "endpoint": "http://127.0.0.1:2379",
        "time": manifest["time"],
        "duration": saved["duration"],
        "backup": BACKUP,
    }
    assert (saved["size"], saved["sha256"], saved["key"]) == (len(SNAPSHOT), SHA, "p/s.db")
    assert saved["msg"] == (
        f"saved a snapshot of m1 (a1) to {tmp_path / 'p/s.db'} ({len(SNAPSHOT)} bytes)"
    )
    assert DirectoryStore(str(tmp_path)).verified_manifest("p/s.db") == manifest


def test_a_store_that_cannot_be_reached_costs_no_stream(etcd, tmp_path):
    asked = params(directory=str(tmp_path / "not-mounted"), key="p/s.db")
    with pytest.raises(EtcdModuleError) as failed:
        states.snapshot_state(asked, check_mode=False)
    assert failed.value.reason == "VolumeMissing" and etcd.streams == 0


def test_a_save_needs_endpoints(etcd, tmp_path):
    with pytest.raises(EtcdInputError, match="state=saved needs endpoints"):
        states.snapshot_state(params(path=str(tmp_path / "s.db"), endpoints=[]), False)


# ---- fetched ----------------------------------------------------------------------------


def fetch_params(root: Path, **given: Any) -> dict[str, Any]:
    return params(state="fetched", directory=str(root), key="p/s.db", **given)


def test_a_fetch_copies_the_verified_snapshot_once(tmp_path):
    root, path = tmp_path / "v", tmp_path / "out.db"
    put(root, "p/s.db", manifest={"sha256": SHA, "size": len(SNAPSHOT), "revision": 7})
    asked = fetch_params(root, path=str(path))
    planned = states.fetch_snapshot(asked, check_mode=True)
    assert planned["changed"] and planned["msg"].startswith("would download") and not path.exists()
    fetched = states.fetch_snapshot(asked, check_mode=False)
    assert fetched["changed"] and path.read_bytes() == SNAPSHOT
    assert (fetched["sha256"], fetched["size"], fetched["revision"]) == (SHA, len(SNAPSHOT), 7)
    again = states.fetch_snapshot(asked, check_mode=False)
    assert not again["changed"] and again["msg"] == f"{path} already holds {root / 'p/s.db'}"


@pytest.mark.parametrize(
    ("manifest", "given", "reason", "words"),
    [
        (None, None, "SnapshotUnverified", "has no manifest recording its sha256"),
        ({"sha256": SHA, "size": 1}, None, "SnapshotCorrupt", "truncated or was replaced"),
        ({"sha256": SHA, "size": len(SNAPSHOT)}, "b" * 64, "SnapshotCorrupt", "not the expected"),
        (None, "b" * 64, "SnapshotCorrupt", "sha256"),  # checked on the way
    ],
)
def test_a_fetch_that_cannot_be_verified_leaves_the_file_as_it_was(
    tmp_path, manifest, given, reason, words
):
    root, path = tmp_path / "v", tmp_path / "out.db"
    put(root, "p/s.db", manifest=manifest)
    path.write_bytes(b"before")
    with pytest.raises(EtcdModuleError, match=words) as failed:
        states.fetch_snapshot(fetch_params(root, path=str(path), sha256=given), False)
    assert failed.value.reason == reason
    assert path.read_bytes() == b"before"


def test_a_fetch_of_a_missing_key_says_so(tmp_path):
    (tmp_path / "v").mkdir()
    with pytest.raises(EtcdModuleError, match="no snapshot at") as failed:
        states.fetch_snapshot(fetch_params(tmp_path / "v", path=str(tmp_path / "o")), False)
    assert failed.value.reason == "SnapshotMissing"


# ---- fetched from a stopped member's own database ---------------------------------------

PAGE = 4096


def meta(pgid: int, txid: int, magic: int = member_db.MAGIC) -> bytes:
    """A bbolt meta page's header and body: root bucket on page 3, freelist on page 2."""
    body = member_db.META.pack(magic, member_db.VERSION, PAGE, 0, 3, 0, 2, pgid, txid, 0)[:-8]
    return bytes(member_db.PAGE_HEADER) + body + struct.pack("<Q", member_db.fnv1a64(body))


def bbolt(pages: int = 4, counted: int | None = None) -> bytearray:
    """A bbolt file of `pages` pages as far as its meta pages tell (the rest is noise), both
    counting `counted` pages (default all); the second is the newer."""
    file = bytearray(os.urandom(PAGE * pages))
    for page, txid in ((0, 6), (1, 7)):
        written = meta(counted or pages, txid)
        file[page * PAGE : page * PAGE + len(written)] = written
    return file


def stopped_member(tmp_path: Path, db: bytes) -> Path:
    data = tmp_path / "member-data"
    (data / "member" / "snap").mkdir(parents=True)
    (data / "member" / "snap" / "db").write_bytes(db)
    (data / "member" / "wal").mkdir()
    (data / "member" / "wal" / "0000000000000000-0000000000000000.wal").write_bytes(b"w")
    return data


def member_fetch(data: Path, path: Path) -> dict[str, Any]:
    return params(state="fetched", member_data_dir=str(data), path=str(path))


def test_fnv1a64_is_bbolt_s_checksum():
    # The published FNV-1a 64 test vectors: the empty string and "a".
    assert member_db.fnv1a64(b"") == 0xCBF29CE484222325
    assert member_db.fnv1a64(b"a") == 0xAF63DC4C8601EC8C


@pytest.mark.parametrize(
    ("metas", "size", "problem"),
    [
        ([(PAGE, 4, 6), (PAGE, 4, 7)], 4 * PAGE, ""),
        ([(PAGE, 4, 6), (PAGE, 4, 7)], 5 * PAGE, ""),  # grown ahead of its pages
        ([None, (PAGE, 4, 7)], 4 * PAGE, ""),  # one meta torn: bbolt opens the other
        ([(PAGE, 4, 6), None], 4 * PAGE, ""),
        ([None, None], 4 * PAGE, "not an etcd (bbolt) database: neither of its meta pages"),
        ([(PAGE, 4, 6), (PAGE, 4, 7)], 3 * PAGE, "truncated: 12288 bytes, where its meta page "),
        ([(PAGE, 9, 6), (PAGE, 4, 7)], 4 * PAGE, ""),  # the newer txid's count is the one
        ([(PAGE, 4, 6), (PAGE, 9, 7)], 4 * PAGE, "counts 9 pages of 4096 bytes"),
    ],
)
def test_bbolt_problem(metas, size, problem):
    found = member_db.bbolt_problem(metas, size)
    assert (found == "") if problem == "" else (problem in found), found


def test_a_stopped_member_s_database_is_fetched_whole_once(tmp_path):
    db = bytes(bbolt())
    data, path = stopped_member(tmp_path, db), tmp_path / "out.db"
    asked = member_fetch(data, path)
    sha = hashlib.sha256(db).hexdigest()
    planned = states.snapshot_state(asked, check_mode=True)
    assert planned["changed"] and planned["msg"].startswith("would copy ") and not path.exists()
    assert (planned["path"], planned["size"], planned["sha256"]) == (str(path), len(db), sha)
    fetched = states.snapshot_state(asked, check_mode=False)
    assert fetched["changed"] and path.read_bytes() == db
    assert (fetched["path"], fetched["size"], fetched["sha256"]) == (str(path), len(db), sha)
    again = states.snapshot_state(asked, check_mode=False)
    assert not again["changed"] and again["sha256"] == sha
    assert again["msg"] == f"{path} already holds the database of {data}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["member-data", "out.db"]


def test_a_file_of_other_bytes_at_path_is_replaced_by_the_database(tmp_path):
    db = bytes(bbolt())
    data, path = stopped_member(tmp_path, db), tmp_path / "out.db"
    path.write_bytes(b"x" * len(db))  # the same size: the bytes decide
    assert states.snapshot_state(member_fetch(data, path), check_mode=True)["changed"]
    assert states.snapshot_state(member_fetch(data, path), check_mode=False)["changed"]
    assert path.read_bytes() == db


def torn_newest(file: bytearray) -> bytearray:
    file[PAGE + member_db.PAGE_HEADER + 60] ^= 0xFF  # the second meta page's checksum
    return file


@pytest.mark.parametrize(
    ("db", "words"),
    [
        (os.urandom(4 * PAGE), r"not an etcd \(bbolt\) database"),
        (bytes(bbolt(pages=4, counted=6)), "truncated: 16384 bytes"),
        (b"", r"not an etcd \(bbolt\) database"),
        (b"bbolt" * 1000, r"not an etcd \(bbolt\) database"),
    ],
)
def test_a_foreign_or_truncated_database_is_refused_and_nothing_is_written(tmp_path, db, words):
    data, path = stopped_member(tmp_path, db), tmp_path / "out.db"
    path.write_bytes(b"before")
    for check_mode in (True, False):
        with pytest.raises(EtcdModuleError, match=words) as failed:
            states.snapshot_state(member_fetch(data, path), check_mode)
        assert failed.value.reason == "SnapshotCorrupt"
    assert path.read_bytes() == b"before"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["member-data", "out.db"]


def test_a_torn_newest_meta_page_falls_back_to_the_other_as_bbolt_does(tmp_path):
    db = bytes(torn_newest(bbolt()))
    data, path = stopped_member(tmp_path, db), tmp_path / "out.db"
    assert states.snapshot_state(member_fetch(data, path), False)["changed"]
    assert path.read_bytes() == db


def test_a_running_member_s_database_is_not_fetched(tmp_path, monkeypatch):
    # The WAL lock itself, held by another process: tests/unit/test_etcd_member_db.py.
    data, path = stopped_member(tmp_path, bytes(bbolt())), tmp_path / "out.db"
    monkeypatch.setattr(member_db, "running_lock", lambda data_dir: f"{data_dir}/member/wal/0.wal")
    for check_mode in (True, False):
        with pytest.raises(EtcdModuleError, match="belongs to a running etcd") as failed:
            states.snapshot_state(member_fetch(data, path), check_mode)
        assert failed.value.reason == "Refused"
    assert not path.exists()


def test_a_fetch_into_the_member_s_own_data_dir_is_refused_in_check_mode_too(tmp_path):
    data = stopped_member(tmp_path, bytes(bbolt()))
    for check_mode in (True, False):
        with pytest.raises(EtcdInputError, match="read, never written"):
            states.snapshot_state(member_fetch(data, data / "copy.db"), check_mode)
    assert not (data / "copy.db").exists()


# ---- restored ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FakeTool(SnapshotTool):
    """etcdutl as far as the restore uses it; `restore` writes the member dir it would."""

    bump: bool = True

    def status(self, snapshot: str) -> dict[str, Any]:
        return {"hash": 1, "revision": 42, "totalKey": 3, "totalSize": len(DB)}

    def supports_bump_revision(self) -> bool:
        return self.bump

    def restore(self, command: list[str]) -> None:
        data_dir = next(a for a in command if a.startswith("--data-dir=")).split("=", 1)[1]
        os.makedirs(os.path.join(data_dir, "member", "snap"))


@pytest.fixture
def tool(monkeypatch):
    found = FakeTool(path="/bin/etcdutl", kind="etcdutl", version="3.5.21")
    monkeypatch.setattr(states, "find_tool", lambda etcdutl, bin_dir: found)
    return found


def restore_params(tmp_path: Path, **given: Any) -> dict[str, Any]:
    snapshot = tmp_path / "s.db"
    if not snapshot.exists():
        snapshot.write_bytes(SNAPSHOT)
    restore = {
        "state": "restored",
        "path": str(snapshot),
        "etcdutl": "/bin/etcdutl",
        "data_dir": str(tmp_path / "data"),
        "name": "e-0",
        "initial_advertise_peer_urls": ["https://e-0:2380"],
    }
    return params(**{**restore, **given})


def test_a_restore_needs_the_target_versions_tool(tmp_path):
    with pytest.raises(EtcdInputError, match="needs etcdutl or bin_dir"):
        states.snapshot_state(restore_params(tmp_path, etcdutl=None), False)


def test_a_restore_is_made_once(tmp_path, tool):
    asked = restore_params(tmp_path)
    planned = states.snapshot_state(asked, check_mode=True)
    assert planned["changed"] and planned["msg"] == f"would restore {tmp_path / 'data'}"
    assert planned["command"][:4] == ["/bin/etcdutl", "snapshot", "restore", str(tmp_path / "s.db")]
    assert "--initial-cluster-token=restore-" + SHA[:16] in planned["command"]
    assert not (tmp_path / "data").exists()
    done = states.snapshot_state(asked, check_mode=False)
    assert done["changed"] and done["revision"] == 42 and done["sha256"] == SHA
    assert done["restore"]["initial_cluster"] == "e-0=https://e-0:2380"
    assert (tmp_path / "data" / "member" / "snap").is_dir()
    assert (tmp_path / "data" / MARKER).is_file()
    again = states.snapshot_state(asked, check_mode=False)
    assert not again["changed"]
    assert again["msg"] == f"{tmp_path / 'data'} already holds this restore"


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ({"sha256": "b" * 64}, f"has sha256 {SHA}, not the expected " + "b" * 64),
        ({"name": None}, "state=restored needs name"),
        ({"bump_revision": -5}, "bump_revision must be 0 or more"),
    ],
)
def test_a_restore_that_is_refused_writes_no_data_dir(tmp_path, tool, given, words):
    with pytest.raises(EtcdModuleError, match=words):
        states.snapshot_state(restore_params(tmp_path, **given), False)
    assert not (tmp_path / "data").exists()


def test_a_tool_without_bump_revision_restores_only_without_a_bump(tmp_path, monkeypatch):
    old = FakeTool(path="/bin/etcdctl", kind="etcdctl", version="3.4.20", bump=False)
    monkeypatch.setattr(states, "find_tool", lambda etcdutl, bin_dir: old)
    with pytest.raises(EtcdInputError, match="has no --bump-revision"):
        states.snapshot_state(restore_params(tmp_path), False)
    done = states.snapshot_state(restore_params(tmp_path, bump_revision=0), False)
    assert done["changed"] and done["restore"]["bump_revision"] == 0
    assert not any(part.startswith("--bump-revision") for part in done["command"])
    assert "--mark-compacted" not in done["command"]


def test_a_restore_from_a_store_fetches_first_and_check_mode_stops_there(tmp_path, tool):
    root = tmp_path / "v"
    put(root, "p/s.db", manifest={"sha256": SHA, "size": len(SNAPSHOT)})
    asked = restore_params(tmp_path, directory=str(root), key="p/s.db")
    os.remove(asked["path"])
    planned = states.snapshot_state(asked, check_mode=True)
    assert planned["changed"] and planned["data_dir"] == str(tmp_path / "data")
    assert planned["msg"].startswith("would download p/s.db to ")
    assert not os.path.exists(asked["path"])
    with pytest.raises(EtcdInputError, match="needs name"):  # bad input refused in check mode too
        states.snapshot_state({**asked, "name": None}, check_mode=True)
    done = states.snapshot_state(asked, check_mode=False)
    assert done["changed"] and done["key"] == "p/s.db" and "manifest" in done
    again = states.snapshot_state(asked, check_mode=False)
    assert not again["changed"]
