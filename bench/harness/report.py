"""How a benchmark reports: its own `## ` section of docs/benchmarks.md (rewriting only that),
the command it was run with, table cells, and the end every run shares."""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"


def write_section(heading: str, text: str) -> None:
    """Replace the section that starts with `heading` (or append it), keeping the others."""
    current = DOCS.read_text() if DOCS.exists() else "# Benchmarks\n"
    start = current.find(heading)
    if start < 0:
        updated = current.rstrip("\n") + "\n\n" + text
    else:
        end = current.find("\n## ", start + len(heading))
        tail = current[end + 1 :] if end >= 0 else ""
        updated = current[:start] + text + ("\n" + tail if tail else "")
    DOCS.write_text(updated)


def parse_args(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """`parser`'s options and --no-docs, which every benchmark has, last."""
    parser.add_argument(
        "--no-docs", action="store_true", help="do not rewrite docs/benchmarks.md's section"
    )
    return parser.parse_args(argv)


def command(name: str, argv: list[str]) -> str:
    """The command line the section quotes."""
    return ("python bench/run.py " + name + " " + " ".join(argv)).strip()


def publish(heading: str, text: str, no_docs: bool) -> None:
    """Print the section; rewrite it in docs/benchmarks.md unless `no_docs`."""
    print(text)
    if not no_docs:
        write_section(heading, text)


def finish(
    report: dict[str, Any],
    section: Callable[[dict[str, Any], str], str],
    heading: str,
    command_line: str,
    no_docs: bool,
) -> int:
    """The end of a run: its raw figures as JSON, then its section, published."""
    print(json.dumps(report, indent=1))
    publish(heading, section(report, command_line), no_docs)
    return 0


def row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def trials_row(label: str, values: list[float], digits: int = 1, bold: bool = False) -> str:
    """A table row: what was measured, each trial's figure, their median (in bold if asked)."""
    middle = f"{median(values):.{digits}f}"
    return row(label, fmt(values, digits), f"**{middle}**" if bold else middle)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def fmt(values: list[float], digits: int = 1) -> str:
    return ", ".join(f"{v:.{digits}f}" for v in values)


def load1() -> float:
    return os.getloadavg()[0]
