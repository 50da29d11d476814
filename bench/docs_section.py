"""Each benchmark owns one `## ` section of docs/benchmarks.md and rewrites only that."""

from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


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
