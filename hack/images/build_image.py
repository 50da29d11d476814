#!/usr/bin/env python3
"""Write a container image as a docker-archive tarball, with no registry and no docker engine.

The tarball (manifest.json, the image config, one layer tar) imports with
`ctr -n k8s.io images import`. The layer is built from host files:

    build_image.py --tag local/busybox:1 --out busybox.tar \\
        --file /bin/busybox:/bin/busybox:0755 --symlink /bin/sh:busybox \\
        --dir /tmp:1777 --passwd --entrypoint /bin/sh

Layer content is deterministic (fixed mtimes, owners root) so the same inputs give the same
image ID and a re-import changes nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import tarfile
from pathlib import Path

PASSWD = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
GROUP = "root:x:0:\nnogroup:x:65534:\n"


def _parent_dirs(path: str) -> list[str]:
    parts = path.strip("/").split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


class Layer:
    """An uncompressed layer tar assembled in memory, entries in insertion order."""

    def __init__(self) -> None:
        self.buf = io.BytesIO()
        self.tar = tarfile.open(  # noqa: SIM115 - closed by finish()
            fileobj=self.buf, mode="w", format=tarfile.PAX_FORMAT
        )
        self.seen: set[str] = set()

    def _info(self, path: str, kind: bytes, mode: int) -> tarfile.TarInfo:
        info = tarfile.TarInfo(path.strip("/"))
        info.type, info.mode, info.mtime = kind, mode, 0
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    def dir(self, path: str, mode: int = 0o755) -> None:
        for parent in _parent_dirs(path):
            if parent not in self.seen:
                self.dir(parent)
        name = path.strip("/")
        if name in self.seen:
            return
        self.seen.add(name)
        self.tar.addfile(self._info(name, tarfile.DIRTYPE, mode))

    def data(self, path: str, content: bytes, mode: int) -> None:
        for parent in _parent_dirs(path):
            self.dir(parent)
        info = self._info(path, tarfile.REGTYPE, mode)
        info.size = len(content)
        self.seen.add(info.name)
        self.tar.addfile(info, io.BytesIO(content))

    def symlink(self, path: str, target: str) -> None:
        for parent in _parent_dirs(path):
            self.dir(parent)
        info = self._info(path, tarfile.SYMTYPE, 0o777)
        info.linkname = target
        self.seen.add(info.name)
        self.tar.addfile(info)

    def finish(self) -> bytes:
        self.tar.close()
        return self.buf.getvalue()


def _split(spec: str, parts: int, what: str) -> list[str]:
    fields = spec.split(":")
    if len(fields) < parts - 1 or len(fields) > parts:
        raise SystemExit(f"bad {what} {spec!r}")
    return fields


def build(args: argparse.Namespace) -> bytes:
    layer = Layer()
    for spec in args.dir:
        path, *mode = _split(spec, 2, "--dir")
        layer.dir(path, int(mode[0], 8) if mode else 0o755)
    for spec in args.file:
        src, dest, *mode = _split(spec, 3, "--file")
        content = Path(src).read_bytes()
        layer.data(dest, content, int(mode[0], 8) if mode else 0o755)
    for spec in args.symlink:
        path, target = _split(spec, 2, "--symlink")
        layer.symlink(path, target)
    if args.passwd:
        layer.data("/etc/passwd", PASSWD.encode(), 0o644)
        layer.data("/etc/group", GROUP.encode(), 0o644)
    layer_tar = layer.finish()
    diff_id = "sha256:" + hashlib.sha256(layer_tar).hexdigest()

    container: dict[str, object] = {"Env": args.env or ["PATH=/usr/local/bin:/usr/bin:/bin"]}
    if args.entrypoint:
        container["Entrypoint"] = args.entrypoint
    if args.cmd:
        container["Cmd"] = args.cmd
    if args.user:
        container["User"] = args.user
    if args.workdir:
        container["WorkingDir"] = args.workdir
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": container,
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [
            {"created": "1970-01-01T00:00:00Z", "created_by": "hack/images/build_image.py"}
        ],
    }
    config_json = json.dumps(config, sort_keys=True).encode()
    config_name = hashlib.sha256(config_json).hexdigest() + ".json"
    layer_name = diff_id.removeprefix("sha256:") + "/layer.tar"
    manifest = [{"Config": config_name, "RepoTags": args.tag, "Layers": [layer_name]}]

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, content in (
            (layer_name, layer_tar),
            (config_name, config_json),
            ("manifest.json", json.dumps(manifest).encode()),
        ):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(content), 0o644, 0
            archive.addfile(info, io.BytesIO(content))
    return out.getvalue()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", action="append", required=True, help="repo:tag, repeatable")
    parser.add_argument("--out", required=True, type=Path, help="tarball to write")
    parser.add_argument("--file", action="append", default=[], help="SRC:DEST[:OCTAL_MODE]")
    parser.add_argument("--dir", action="append", default=[], help="DEST[:OCTAL_MODE]")
    parser.add_argument("--symlink", action="append", default=[], help="PATH:TARGET")
    parser.add_argument("--passwd", action="store_true", help="add /etc/passwd and /etc/group")
    parser.add_argument("--entrypoint", nargs="+", help="entrypoint argv")
    parser.add_argument("--cmd", nargs="+", help="default arguments")
    parser.add_argument("--env", action="append", help="NAME=value, repeatable")
    parser.add_argument("--user", help="user[:group] the container runs as")
    parser.add_argument("--workdir", help="working directory")
    args = parser.parse_args(argv)
    tarball = build(args)
    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.write_bytes(tarball)
    tmp.replace(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
