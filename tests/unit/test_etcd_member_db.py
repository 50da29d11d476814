"""A stopped member's database copied out for a restore: refused while a process holds its WAL
locked, whole or absent otherwise, and its data dir left as it was. (Against a running etcd, in
tests/modules/test_etcd_snapshot.py.)"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from etcd_runbook.clients.etcd_errors import EtcdInputError, EtcdModuleError, EtcdRefusedError
from etcd_runbook.operations.etcd_member_db import copy_member_db, running_lock

HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(60)
"""


def member(tmp_path: Path, wal: bool = True) -> Path:
    data = tmp_path / "data"
    (data / "member" / "snap").mkdir(parents=True)
    (data / "member" / "snap" / "db").write_bytes(b"bbolt" * 1000)
    if wal:
        (data / "member" / "wal").mkdir()
        (data / "member" / "wal" / "0000000000000000-0000000000000000.wal").write_bytes(b"w")
    return data


def test_a_stopped_member_s_database_is_copied_whole_and_its_data_dir_is_left_alone(tmp_path):
    data = member(tmp_path)
    before = sorted(p.name for p in data.rglob("*"))
    got = copy_member_db(str(data), str(tmp_path / "copy.db"))
    content = (tmp_path / "copy.db").read_bytes()
    assert content == b"bbolt" * 1000
    assert (got.size, got.sha256) == (len(content), hashlib.sha256(content).hexdigest())
    assert oct((tmp_path / "copy.db").stat().st_mode & 0o777) == "0o600"
    assert sorted(p.name for p in data.rglob("*")) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.db", "data"], "no partial left"


def test_no_wal_dir_is_no_running_member(tmp_path):
    assert running_lock(str(member(tmp_path, wal=False))) == ""


@pytest.mark.parametrize("layout", ["empty", "wal only"])
def test_a_dir_without_a_database_is_named(tmp_path, layout):
    data = tmp_path / "data"
    data.mkdir()
    if layout == "wal only":
        (data / "member" / "wal").mkdir(parents=True)
    with pytest.raises(EtcdInputError, match="holds no etcd database"):
        copy_member_db(str(data), str(tmp_path / "copy.db"))
    assert not (tmp_path / "copy.db").exists()


def test_a_locked_wal_is_a_running_member_and_nothing_is_copied(tmp_path):
    data = member(tmp_path)
    wal = next((data / "member" / "wal").iterdir())
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(wal)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        assert running_lock(str(data)) == str(wal)
        with pytest.raises(EtcdRefusedError, match="belongs to a running etcd"):
            copy_member_db(str(data), str(tmp_path / "copy.db"))
    finally:
        holder.kill()
        holder.wait(10)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]
    assert running_lock(str(data)) == ""


def test_a_copy_is_never_written_into_the_member_s_own_data_dir(tmp_path):
    data = member(tmp_path)
    before = sorted(p.name for p in data.rglob("*"))
    with pytest.raises(EtcdInputError, match="read, never written"):
        copy_member_db(str(data), str(data / "member" / "copy.db"))
    assert sorted(p.name for p in data.rglob("*")) == before


def test_a_copy_that_cannot_be_written_is_an_error_of_the_module_and_leaves_nothing(tmp_path):
    data = member(tmp_path)
    with pytest.raises(EtcdModuleError, match="cannot copy"):
        copy_member_db(str(data), str(tmp_path / "missing" / "copy.db"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]
