"""What the snapshot benchmarks (bench/snapshot.py, bench/snapshot_s3.py) share: their options,
the member filled before the rounds, MB/s per round, and the medians of the rounds."""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness.etcd_member import Member, fill
from bench.harness.report import parse_args


def options(argv: list[str], prog: str, description: str | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--version", default="3.5")
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--value-kb", type=int, default=100)
    parser.add_argument("--fill-seconds", type=float, default=600)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", default=None, help="where files go (default /tmp)")
    return parse_args(parser, argv)


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    started = time.monotonic()
    result = action()
    return time.monotonic() - started, result


def mbps(size: int, seconds: float) -> float:
    return size / seconds / 1e6


def fill_as_asked(member: Member, args: argparse.Namespace) -> int:
    """--size-mb of --value-kb random values, bounded by --fill-seconds; the db size reached."""
    fill_seconds, db_size = timed(
        lambda: fill(member, args.size_mb * 1024**2, args.value_kb * 1000, args.fill_seconds)
    )
    print(f"filled to {db_size / 1e6:.0f} MB in {fill_seconds:.0f}s", flush=True)
    return int(db_size)


def print_round(round_no: int, rows: dict[str, list[float]]) -> None:
    print(
        f"round {round_no}: " + ", ".join(f"{k} {v[-1]:.0f} MB/s" for k, v in rows.items()),
        flush=True,
    )


def summary(bin_dir: Path, db_size: int, rows: dict[str, list[float]]) -> dict[str, Any]:
    """The report's common part: etcd's version, the db size, each saver's rounds and median."""
    return {
        "version": bin_dir.name,
        "db_size": db_size,
        "rows": rows,
        "medians": {k: statistics.median(v) for k, v in rows.items()},
    }
