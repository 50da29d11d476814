"""etcd_snapshot throughput against `etcdctl snapshot save`, on one real etcd 3.5 member.

The member (loopback, fresh temp dir) is filled to about --size-mb of 100 KB random values
(bounded by --fill-seconds), then each round runs, alternating so drift hits all alike:

1. `etcdctl snapshot save` (the reference);
2. the module through the real `ansible localhost -m etcd_snapshot` (end to end, with
   ansible's start-up), also recording the stream time the module itself reports;
3. the module's streaming path alone, in this process (`save_atomically` over
   `stream_snapshot`), to separate ansible's overhead.

Every file is fsynced by its writer and deleted after the round. Prints a table and, unless
--no-docs, rewrites the "etcd_snapshot throughput" section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ansible.module_utils

from bench.docs_section import write_section
from bench.etcd_member import Member, etcd_bin_dir, fill, running_member

REPO = Path(__file__).resolve().parent.parent
HEADING = "## etcd_snapshot throughput"

if str(REPO / "module_utils") not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(str(REPO / "module_utils"))


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    started = time.monotonic()
    result = action()
    return time.monotonic() - started, result


def etcdctl_save(member: Member, path: Path) -> int:
    member.etcdctl("snapshot", "save", str(path))
    return path.stat().st_size


def module_save(member: Member, path: Path) -> dict[str, Any]:
    from tests.ansible_adhoc import run_module

    result = run_module(
        "etcd_snapshot",
        {"endpoints": [member.client_url], "path": str(path), "force": True},
        timeout=1800,
    )
    if result.get("failed") or not result.get("changed"):
        raise RuntimeError(f"etcd_snapshot failed: {result}")
    return result


def stream_save(member: Member, path: Path) -> int:
    from ansible.module_utils.etcd_common import ConnectionParams
    from ansible.module_utils.etcd_snapshot_io import save_atomically
    from ansible.module_utils.etcd_snapshot_stream import stream_snapshot

    params = ConnectionParams(endpoints=(member.client_url,))
    saved = save_atomically(
        str(path), lambda sink: stream_snapshot(params, member.client_url, sink, 1800)
    )
    return saved.size


def mbps(size: int, seconds: float) -> float:
    return size / seconds / 1e6


def run(args: argparse.Namespace) -> dict[str, Any]:
    bin_dir = etcd_bin_dir(args.version)
    rows: dict[str, list[float]] = {"etcdctl": [], "ansible": [], "module_stream": [], "func": []}
    with running_member(bin_dir, quota_bytes=8 * 1024**3) as member:
        fill_seconds, db_size = timed(
            lambda: fill(member, args.size_mb * 1024**2, args.value_kb * 1000, args.fill_seconds)
        )
        print(f"filled to {db_size / 1e6:.0f} MB in {fill_seconds:.0f}s", flush=True)
        with tempfile.TemporaryDirectory(prefix="snap-bench-", dir=args.workdir) as tmp:
            path = Path(tmp) / "snap.db"
            for round_no in range(1, args.rounds + 1):
                seconds, size = timed(lambda: etcdctl_save(member, path))
                rows["etcdctl"].append(mbps(size, seconds))
                path.unlink()
                seconds, result = timed(lambda: module_save(member, path))
                rows["ansible"].append(mbps(result["size"], seconds))
                rows["module_stream"].append(mbps(result["size"], result["duration"]))
                path.unlink()
                seconds, size = timed(lambda: stream_save(member, path))
                rows["func"].append(mbps(size, seconds))
                path.unlink()
                print(
                    f"round {round_no}: "
                    + ", ".join(f"{k} {v[-1]:.0f} MB/s" for k, v in rows.items()),
                    flush=True,
                )
    medians = {k: statistics.median(v) for k, v in rows.items()}
    return {
        "version": bin_dir.name,
        "db_size": db_size,
        "rows": rows,
        "medians": medians,
        "ratio_ansible": medians["ansible"] / medians["etcdctl"],
        "ratio_module_stream": medians["module_stream"] / medians["etcdctl"],
        "ratio_func": medians["func"] / medians["etcdctl"],
    }


def section(report: dict[str, Any], command: str) -> str:
    m, rows = report["medians"], report["rows"]

    def cells(key: str) -> str:
        return ", ".join(f"{v:.0f}" for v in rows[key])

    return f"""{HEADING}

Command: `{command}` (run from the repository root; `make bench` runs every benchmark).

One etcd {report["version"]} member on loopback, database filled to
{report["db_size"] / 1e6:.0f} MB with 100 KB random values; {len(rows["etcdctl"])} rounds,
each running the three savers one after the other; every file fsynced, then deleted.
Machine: {os.cpu_count()} cores, shared with other work (load average at the end:
{os.getloadavg()[0]:.1f}), so single rounds vary; compare medians of the same run.

| saver | MB/s per round | median MB/s | ratio to etcdctl |
| --- | --- | --- | --- |
| `etcdctl snapshot save` | {cells("etcdctl")} | {m["etcdctl"]:.0f} | 1.00 |
| `ansible localhost -m etcd_snapshot` (end to end) | {cells("ansible")} | {m["ansible"]:.0f} \
| {report["ratio_ansible"]:.2f} |
| same run, stream time reported by the module | {cells("module_stream")} \
| {m["module_stream"]:.0f} | {report["ratio_module_stream"]:.2f} |
| streaming function alone (`save_atomically` + `stream_snapshot`) \
| {cells("func")} | {m["func"]:.0f} | {report["ratio_func"]:.2f} |

How the module streams: etcd sends 32 KiB messages; the module receives them on a
synchronous gRPC stream (single-threaded unary-stream channel option) and hands lists of
~1 MiB to two threads, one hashing (the database's sha256 is checked against the one etcd
appends; the file's own sha256 comes from a copy of the same hash state), one writing with
writev(2); then fsync and rename. `etcdctl snapshot save` does not hash at all, so the
module does ~0.65 CPU-seconds per GiB more work; on 2 busy cores that shows. An earlier
version streamed through etcd3aio (grpc.aio) and reached about 0.6 of etcdctl's rate: its
per-message event-loop cost dominated.

Where the time goes (1 GiB, measured on this machine with the pieces run alone; CPU
seconds): receiving the gRPC stream in Python 1.4-1.7 (etcdctl's whole save: 2.5-3.2);
sha256 0.65; writing to the page cache 0.2 to 2.5 depending on memory pressure. With
free cores the three run in parallel and the module's stream matched etcdctl (0.9-1.0 in
quieter runs); with the load averages of 5-20 this machine sees while other suites run,
the extra hashing work competes with them for CPU and the ratio drops to 0.55-0.8
(single module runs ranged from 90 to 220 MB/s during one session; raising ansible's
internal_poll_interval from 1 ms to 50 ms made no measurable difference).

The end-to-end row also pays a fixed 2-3 s per run (the ansible CLI, the module's start,
the member list and status of every member, a linearizable read for the revision); its
ratio rises with the database size.
"""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/run.py snapshot", description=__doc__)
    parser.add_argument("--version", default="3.5")
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--value-kb", type=int, default=100)
    parser.add_argument("--fill-seconds", type=float, default=600)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", default=None, help="where snapshots go (default /tmp)")
    parser.add_argument(
        "--no-docs", action="store_true", help="do not rewrite docs/benchmarks.md's section"
    )
    args = parser.parse_args(argv)
    report = run(args)
    command = "python bench/run.py snapshot " + " ".join(argv)
    text = section(report, command.strip())
    print(text)
    if not args.no_docs:
        write_section(HEADING, text)
    goal_met = report["ratio_ansible"] >= 0.9
    print(f"goal (ansible end to end >= 0.9 x etcdctl): {'met' if goal_met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main(sys.argv[1:]))
