"""etcd_runbook/operations/etcd_pod_upload.py: the receiver really runs (a Python process
reading its stdin, as in the container), with a pipe standing in for the API server's exec
stream. The file appears whole or not at all, a wrong local file is refused before anything is sent,
a file already there is left alone. Through a real API server: tests/e2e/test_etcdrestore.py."""

from __future__ import annotations

import hashlib
import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

from etcd_runbook.operations.etcd_pod_upload import Lines, UploadError, receiver_command, upload


class PipeChannel:
    """The receiver as a local process; stdout and stdin as the exec stream carries them."""

    def __init__(self, command: list[str], cut_after: int | None = None) -> None:
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.sent = 0
        self.cut_after = cut_after

    @staticmethod
    def _read(stream: object, timeout: float | None) -> bytes:
        fd = stream.fileno()  # type: ignore[attr-defined]
        ready, _, _ = select.select([fd], [], [], timeout)
        return os.read(fd, 65536) if ready else b""

    def read_stdout(self, timeout: float | None = None) -> bytes:
        return self._read(self.process.stdout, timeout)

    def read_stderr(self, timeout: float | None = None) -> bytes:
        return self._read(self.process.stderr, timeout)

    def write_stdin(self, data: bytes) -> None:
        assert self.process.stdin is not None
        if self.cut_after is not None and self.sent + len(data) > self.cut_after:
            # The connection drops mid-stream: the receiver sees the end of its input.
            self.process.stdin.write(data[: self.cut_after - self.sent])
            self.process.stdin.close()
            self.sent = self.cut_after
            return
        self.process.stdin.write(data)
        self.process.stdin.flush()
        self.sent += len(data)

    def update(self, timeout: float = 0) -> None:
        pass

    def is_open(self) -> bool:
        return self.process.poll() is None and not (
            self.process.stdin and self.process.stdin.closed
        )

    def close(self) -> None:
        if self.process.stdin and not self.process.stdin.closed:
            self.process.stdin.close()
        self.process.wait(timeout=30)


class Scripted:
    """A stream that delivers `frames` one per read, then closes: the receiver's answer may
    come in pieces, or arrive together with the close."""

    def __init__(self, frames: list[bytes], open_after: bool = False) -> None:
        self.frames = list(frames)
        self.open_after = open_after

    def read_stdout(self, timeout: float | None = None) -> bytes:
        return self.frames.pop(0) if self.frames else b""

    def read_stderr(self, timeout: float | None = None) -> bytes:
        return b"Traceback: disk full"

    def write_stdin(self, data: bytes) -> None:
        pass

    def update(self, timeout: float = 0) -> None:
        pass

    def is_open(self) -> bool:
        return bool(self.frames) or self.open_after

    def close(self) -> None:
        pass


@pytest.mark.parametrize(
    ("frames", "lines"),
    [
        ([b"absent\n"], [b"absent", b""]),
        # The answer and the end of the stream together: the line is still read.
        ([b"ready\nwritten abc\n"], [b"ready", b"written abc", b""]),
        ([b"wri", b"tten ", b"abc\n"], [b"written abc"]),
        ([b"short 17"], [b"short 17", b""]),
        ([], [b""]),
    ],
)
def test_lines_are_cut_from_whatever_arrived(frames, lines):
    reader = Lines(Scripted(frames))
    assert [reader.next(timeout=1) for _ in lines] == lines


def test_a_silent_receiver_times_out():
    reader = Lines(Scripted([], open_after=True))
    assert reader.next(timeout=0.05) == b""


def snapshot(tmp_path: Path, size: int = 3 * (1 << 20) + 17) -> tuple[Path, str]:
    src = tmp_path / "local.db"
    data = os.urandom(size)
    src.write_bytes(data)
    return src, hashlib.sha256(data).hexdigest()


def opener(cut_after: int | None = None, log: list[list[str]] | None = None):
    def open_channel(command: list[str]) -> PipeChannel:
        if log is not None:
            log.append(command)
        return PipeChannel(command, cut_after if command[-1] != "-1" else None)

    return open_channel


def test_the_file_arrives_whole_and_a_second_run_changes_nothing(tmp_path):
    src, sha = snapshot(tmp_path)
    dest = tmp_path / "pod" / "upload" / "snapshot.db"
    commands: list[list[str]] = []
    done = upload(
        opener(log=commands), sys.executable, str(src), str(dest), sha, check=False, timeout=30
    )
    assert done["changed"] and done["sha256"] == sha and done["size"] == src.stat().st_size
    assert dest.read_bytes() == src.read_bytes()
    assert os.listdir(dest.parent) == ["snapshot.db"], "no temp file left behind"
    # The path and size are arguments of the fixed receiver, never code.
    assert commands[1][-2:] == [str(dest), str(src.stat().st_size)]
    again = upload(opener(), sys.executable, str(src), str(dest), sha, check=False, timeout=30)
    assert not again["changed"] and "already there" in again["msg"]


def test_check_mode_sends_nothing(tmp_path):
    src, sha = snapshot(tmp_path)
    dest = tmp_path / "pod" / "snapshot.db"
    done = upload(opener(), sys.executable, str(src), str(dest), sha, check=True, timeout=30)
    assert done["changed"] and not dest.parent.exists()


def test_a_wrong_local_file_is_refused_before_anything_is_sent(tmp_path):
    src, _ = snapshot(tmp_path)
    commands: list[list[str]] = []
    with pytest.raises(UploadError) as refused:
        upload(
            opener(log=commands),
            sys.executable,
            str(src),
            str(tmp_path / "pod" / "s.db"),
            "0" * 64,
            check=False,
            timeout=30,
        )
    assert refused.value.reason == "SnapshotCorrupt" and commands == []


def test_a_connection_cut_midway_leaves_no_file(tmp_path):
    src, sha = snapshot(tmp_path)
    dest = tmp_path / "pod" / "snapshot.db"
    with pytest.raises(UploadError, match="ended early: short"):
        upload(
            opener(cut_after=(1 << 20) + 5),
            sys.executable,
            str(src),
            str(dest),
            sha,
            check=False,
            timeout=30,
        )
    assert not dest.exists()
    # Only the hidden temp file, which nothing waiting for the file ever picks up.
    assert [n for n in os.listdir(dest.parent) if not n.startswith(".")] == []


def test_another_file_in_the_place_is_never_overwritten(tmp_path):
    src, sha = snapshot(tmp_path)
    dest = tmp_path / "pod" / "snapshot.db"
    dest.parent.mkdir()
    dest.write_bytes(b"someone else's")
    with pytest.raises(UploadError) as refused:
        upload(opener(), sys.executable, str(src), str(dest), sha, check=False, timeout=30)
    assert refused.value.reason == "Refused"
    assert dest.read_bytes() == b"someone else's"


def test_the_receiver_command_keeps_values_out_of_the_code():
    command = receiver_command("/opt/venv/bin/python", "/x/$(reboot).db", 10)
    assert command[:2] == ["/opt/venv/bin/python", "-c"]
    assert "$(reboot)" not in command[2] and command[3:] == ["/x/$(reboot).db", "10"]
