"""Defragmentation of a fragmented database: the runbook's way (`etcd_maintenance`, through
the real `ansible localhost -m etcd_maintenance`) against `etcdctl defrag`, on one real etcd
member on loopback, in the same run.

Each round fragments the member the same way before each method: distinct keys of --value-kb
random values until the file reaches --size-mb, then three keys of four deleted and the
history compacted (a file of about --size-mb with about a quarter in use), one write so bbolt
counts the freed pages. While a method defragments, a writer puts a small key every 10 ms and
records each put's latency: the longest is the write pause a client saw. The methods take
turns within a round, so drift hits both alike. Prints a table and, unless --no-docs, rewrites
the "Defragmentation" section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from typing import Any

import grpc
from etcd3aio._protobuf import (
    CompactionRequest,
    DeleteRangeRequest,
    KVStub,
    MaintenanceStub,
    PutRequest,
    RangeRequest,
    StatusRequest,
)

from bench.harness.etcd_member import Member, fill, running_member
from bench.harness.report import command, finish, median, parse_args, row, trials_row
from testbed.ansible_adhoc import run_module
from testbed.host import etcd_bin_dir

HEADING = "## Defragmentation"
METHODS = ("runbook", "etcdctl")


def sizes(member: Member) -> tuple[int, int]:
    with grpc.insecure_channel(member.target) as channel:
        status = MaintenanceStub(channel).Status(StatusRequest(), timeout=10)
    return int(status.dbSize), int(status.dbSizeInUse)


def fragment(member: Member, size_mb: int, value_kb: int, time_limit: float) -> tuple[int, int]:
    """Fill to size_mb with distinct keys (the harness's fill), delete three keys of four,
    compact; (size, in use)."""
    fill(member, size_mb * 1024**2, value_kb * 1000, time_limit)
    with grpc.insecure_channel(member.target) as channel:
        kv = KVStub(channel)
        listed = kv.Range(
            RangeRequest(key=b"bench/", range_end=b"bench0", keys_only=True), timeout=60
        )
        revision = int(listed.header.revision)
        for index, item in enumerate(listed.kvs):
            if index % 4:
                deleted = kv.DeleteRange(DeleteRangeRequest(key=item.key), timeout=30)
                revision = int(deleted.header.revision)
        kv.Compact(CompactionRequest(revision=revision, physical=True), timeout=300)
        # bbolt counts the freed pages once later writes commit and no older read is open.
        for n in range(3):
            kv.Put(PutRequest(key=b"tick", value=b"%d" % n), timeout=30)
            time.sleep(1)
    return sizes(member)


class Writer:
    """Puts a small key every 10 ms until stopped; the longest put is the write pause."""

    def __init__(self, member: Member) -> None:
        self.member = member
        self.longest = 0.0
        self.puts = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with grpc.insecure_channel(self.member.target) as channel:
            kv = KVStub(channel)
            while not self._stop.is_set():
                started = time.monotonic()
                kv.Put(PutRequest(key=b"writer", value=b"%d" % self.puts), timeout=600)
                self.longest = max(self.longest, time.monotonic() - started)
                self.puts += 1
                self._stop.wait(0.01)

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=700)


def defragment(member: Member, method: str) -> float:
    """One defragmentation by `method`; the seconds it took, start-up included."""
    started = time.monotonic()
    if method == "runbook":
        result = run_module(
            "etcd_maintenance",
            {"endpoints": [member.client_url], "action": "defragment", "defrag_timeout": 1200},
            timeout=1800,
        )
        if result.get("failed"):
            raise RuntimeError(f"etcd_maintenance failed: {result}")
    else:
        member.etcdctl("defrag", "--command-timeout=1200s")
    return time.monotonic() - started


def run(args: argparse.Namespace) -> dict[str, Any]:
    bin_dir = etcd_bin_dir(args.version)
    rows: dict[str, dict[str, list[float]]] = {
        m: {"seconds": [], "before_mb": [], "reclaimed_mb": [], "pause_ms": []} for m in METHODS
    }
    with running_member(bin_dir, quota_bytes=8 * 1024**3) as member:
        for round_no in range(1, args.rounds + 1):
            for method in METHODS if round_no % 2 else reversed(METHODS):
                before, in_use = fragment(member, args.size_mb, args.value_kb, args.fill_seconds)
                with Writer(member) as writer:
                    time.sleep(0.5)  # the writer's steady pace before the pause
                    seconds = defragment(member, method)
                    time.sleep(0.5)
                after, _ = sizes(member)
                figures = rows[method]
                figures["seconds"].append(seconds)
                figures["before_mb"].append(before / 1e6)
                figures["reclaimed_mb"].append((before - after) / 1e6)
                figures["pause_ms"].append(writer.longest * 1000)
                print(
                    f"round {round_no} {method}: {before / 1e6:.0f} MB ({in_use / 1e6:.0f} in "
                    f"use) to {after / 1e6:.0f} MB in {seconds:.1f} s, longest put "
                    f"{writer.longest * 1000:.0f} ms over {writer.puts} puts",
                    flush=True,
                )
    return {"version": bin_dir.name, "rows": rows}


def section(report: dict[str, Any], command_line: str) -> str:
    rows = report["rows"]

    def ratio(key: str) -> float:
        return median(rows["runbook"][key]) / median(rows["etcdctl"][key])

    lines = [
        row("measure", "rounds", "median"),
        row("---", "---", "---"),
    ]
    labels = {
        "before_mb": "database before (MB)",
        "reclaimed_mb": "reclaimed (MB)",
        "seconds": "time (s, start-up included)",
        "pause_ms": "longest put of a writer every 10 ms (ms)",
    }
    for method, name in (
        ("runbook", "the runbook's `etcd_maintenance`"),
        ("etcdctl", "`etcdctl defrag`"),
    ):
        for key, label in labels.items():
            lines.append(trials_row(f"{name}: {label}", rows[method][key], bold=key == "seconds"))
    return f"""{HEADING}

Command: `{command_line}` (run from the repository root).

One etcd {report["version"]} member on loopback. Before each defragmentation the member is
fragmented alike: distinct keys of 100 KB random values until the file reaches the size
asked, three keys of four deleted, the history compacted. The runbook's way is the real
`ansible localhost -m etcd_maintenance -a action=defragment` (its health checks before and
after, and ansible's start-up, included); the reference is `etcdctl defrag` on the same
member, the two taking turns. With one member there is no leadership to move: both pause
every write for the whole rewrite, which the longest put shows. Machine: {os.cpu_count()}
cores, shared with other work (load average at the end: {os.getloadavg()[0]:.1f}).

{chr(10).join(lines)}

Ratios of the medians, the runbook's to `etcdctl defrag`'s: time {ratio("seconds"):.2f}, longest
put {ratio("pause_ms"):.2f}, bytes reclaimed {ratio("reclaimed_mb"):.2f}.
"""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/run.py defrag", description=__doc__)
    parser.add_argument("--version", default="3.6")
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--value-kb", type=int, default=100)
    parser.add_argument("--fill-seconds", type=float, default=600)
    parser.add_argument("--rounds", type=int, default=2)
    args = parse_args(parser, argv)
    report = run(args)
    return finish(report, section, HEADING, command("defrag", argv), args.no_docs)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
