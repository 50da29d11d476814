#!/usr/bin/env python3
"""Remove from a venv every Ansible collection that operator-collections.txt does not list.

Usage: operator-prune-collections.py SITE_PACKAGES KEEP_FILE
Run by hack/build-operator-image (in its chroot) and by the Dockerfile, so both images hold
the same collections. Standard library only: it runs with the image's own python.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def main(site_packages: str, keep_file: str) -> int:
    lines = (line.strip() for line in Path(keep_file).read_text().splitlines())
    keep = {line for line in lines if line and not line.startswith("#")}
    root = Path(site_packages) / "ansible_collections"
    missing = [name for name in keep if not (root / name.replace(".", "/")).is_dir()]
    if missing:
        print(
            f"prune: kept collections not installed: {', '.join(sorted(missing))}", file=sys.stderr
        )
        return 1
    namespaces = {name.split(".")[0] for name in keep}
    for ns_dir in sorted(p for p in root.iterdir() if p.is_dir() and p.name != "__pycache__"):
        if ns_dir.name not in namespaces:
            shutil.rmtree(ns_dir)
            continue
        for coll in sorted(p for p in ns_dir.iterdir() if p.is_dir() and p.name != "__pycache__"):
            if f"{ns_dir.name}.{coll.name}" not in keep:
                shutil.rmtree(coll)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
