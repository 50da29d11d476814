"""etcd_runbook/clients/etcd_snapshot_io.py without etcd: a snapshot file appears only whole, with
etcd's hash checked, mode 0600 and the bytes in order, whether the filesystem takes O_DIRECT
writes or refuses them half way. Saved from real etcd: tests/modules/test_etcd_snapshot.py."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import stat
from pathlib import Path

import pytest

from etcd_runbook.clients import etcd_snapshot_io as sio
from etcd_runbook.clients.etcd_errors import EtcdModuleError
from etcd_runbook.clients.etcd_snapshot_io import (
    DIRECT_BLOCK,
    HashingWriter,
    SnapshotIntegrityError,
    save_atomically,
    verified_rename,
)


def snapshot_bytes(sectors: int) -> bytes:
    """A stream as etcd sends it: whole 512-byte sectors, then their sha256."""
    db = os.urandom(512 * sectors)
    return db + hashlib.sha256(db).digest()


def feeder(data: bytes, piece: int = 32 * 1024):
    def stream_into(sink: HashingWriter) -> int:
        pieces = [data[i : i + piece] for i in range(0, len(data), piece)]
        for start in range(0, len(pieces), 7):  # lists of a few messages, as the stream hands
            sink.write_many(pieces[start : start + 7])
        return len(data)

    return stream_into


@pytest.mark.parametrize(
    "sectors",
    [
        1,  # less than one aligned block: all of it is the buffered tail
        8,  # one aligned 4 KiB block and the trailer
        DIRECT_BLOCK // 512,  # the buffer fills exactly once, the trailer is the tail
        DIRECT_BLOCK // 512 * 2 + 3,  # two full buffers, then a part of one
    ],
)
@pytest.mark.parametrize("read_back", [False, True])
def test_a_saved_file_holds_the_stream_whole(tmp_path: Path, sectors: int, read_back: bool) -> None:
    data = snapshot_bytes(sectors)
    target = tmp_path / "snap.db"
    saved = save_atomically(str(target), feeder(data, piece=32 * 1024 + 5), read_back=read_back)
    assert target.read_bytes() == data
    assert saved.size == len(data)
    assert saved.sha256 == hashlib.sha256(data).hexdigest()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert os.listdir(tmp_path) == ["snap.db"]


def test_a_wrong_hash_or_a_broken_stream_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "snap.db"
    target.write_bytes(b"old")
    data = snapshot_bytes(DIRECT_BLOCK // 512 + 1)
    with pytest.raises(SnapshotIntegrityError, match="does not match"):
        save_atomically(str(target), feeder(data[:-32] + bytes(32)))
    with pytest.raises(SnapshotIntegrityError, match="no etcd integrity hash"):
        save_atomically(str(target), feeder(data[:-1]))

    def broken(sink: HashingWriter) -> None:
        sink.write(data[: DIRECT_BLOCK + 100])
        raise ConnectionError("stream cut")

    with pytest.raises(ConnectionError):
        save_atomically(str(target), broken)
    assert target.read_bytes() == b"old" and os.listdir(tmp_path) == ["snap.db"]


def test_a_missing_directory_is_named(tmp_path: Path) -> None:
    with pytest.raises(EtcdModuleError, match="does not exist") as raised:
        save_atomically(str(tmp_path / "no" / "snap.db"), feeder(snapshot_bytes(1)))
    assert raised.value.reason == "InvalidInput"


def test_a_filesystem_that_refuses_direct_writes_gets_buffered_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where O_DIRECT can be set but writes through it fail with EINVAL (as some network and
    FUSE filesystems do), the writer drops the flag and writes the same bytes buffered."""
    real_write = os.write
    refused = []

    def write(fd: int, data: object) -> int:
        if fcntl.fcntl(fd, fcntl.F_GETFL) & sio.O_DIRECT:
            refused.append(fd)
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_write(fd, data)  # type: ignore[arg-type]

    monkeypatch.setattr(sio, "_try_direct", lambda fd: True)
    monkeypatch.setattr(sio.os, "write", write)
    data = snapshot_bytes(DIRECT_BLOCK // 512 + 9)
    target = tmp_path / "snap.db"
    saved = save_atomically(str(target), feeder(data))
    assert target.read_bytes() == data and saved.size == len(data)
    assert len(refused) <= 1


def test_verified_rename_runs_the_callers_check_before_the_file_appears(tmp_path: Path) -> None:
    target = tmp_path / "snap.db"
    data = snapshot_bytes(3)

    def check(hasher: sio.TrailerHasher) -> None:
        hasher.verify("test")
        raise SnapshotIntegrityError("not the expected sha256")

    with pytest.raises(SnapshotIntegrityError, match="expected"):
        verified_rename(str(target), "download", lambda w: w.write(data), check)
    assert os.listdir(tmp_path) == []
