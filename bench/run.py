"""Benchmark entry point (`make bench`): runs every registered benchmark, or the named ones.

    .venv/bin/python bench/run.py                 # all
    .venv/bin/python bench/run.py snapshot --rounds 5
    .venv/bin/python bench/run.py --list

To add a benchmark, write bench/<name>.py with `main(argv: list[str]) -> int` and register
it in BENCHMARKS. Each benchmark writes its own section of docs/benchmarks.md. A benchmark
imports bench/harness/, testbed/ and the project, never tests/ nor another benchmark: what two
of them need goes into the harness (into testbed/ when the tests need it too). This is the
only module that imports the benchmarks.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# name -> module (under bench/) with a main(argv) -> int.
BENCHMARKS = {
    "snapshot": "bench.snapshot",
    "snapshot-s3": "bench.snapshot_s3",
    "operator": "bench.operator_latency",
    "bootstrap": "bench.bootstrap",
    "restore": "bench.restore",
    "node-loss": "bench.node_loss",
    "many": "bench.many_clusters",
    "etcd": "bench.etcd_benchmark",
    "defrag": "bench.defrag",
}


def main(argv: list[str]) -> int:
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    if argv[:1] == ["--list"]:
        print("\n".join(BENCHMARKS))
        return 0
    if argv and argv[0] in BENCHMARKS:
        return int(importlib.import_module(BENCHMARKS[argv[0]]).main(argv[1:]))
    if argv:
        print(f"unknown benchmark {argv[0]!r}; known: {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    status = 0
    for name, module in BENCHMARKS.items():
        print(f"== benchmark {name}", flush=True)
        status |= int(importlib.import_module(module).main([]))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
