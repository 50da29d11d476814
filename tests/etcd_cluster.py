"""Real etcd clusters on loopback for tests, and for people (hack/etcd-local).

Pytest use (plugin registered in tests/conftest.py)::

    def test_x(etcd_cluster_factory):
        c = etcd_cluster_factory(version="3.5", size=3, tls=False, auth=False)
        c.put("k", "v")
        result = run_module("etcd_member", {**c.module_args(), "state": "present", ...})

Each call starts `size` members of that version (binaries from hack/etcd-bin) as real
processes on 127.0.0.1 with free ports, a static bootstrap and a unique cluster token, data
dirs and logs under tmp_path, and returns once every member answers and a leader exists.
Every process is killed when the test ends, passed or failed; as safety nets the members also
die with the pytest process (PR_SET_PDEATHSIG) and an atexit hook kills what is left.

Membership changes, as a module test drives them::

    m = c.allocate_member("m4")          # free ports and a fresh data dir, not started
    ... add m.peer_url as a learner through the module under test ...
    c.start_member(m)                    # --initial-cluster-state=existing, initial
                                         # cluster computed from `member list`
    c.wait_healthy()

Restore tests start a cluster from data dirs made by `etcdutl snapshot restore`::

    peer = etcd_cluster_factory.free_url()
    data = tmp_path / "restored"
    c.etcdutl("snapshot", "restore", snap, "--name", "r1", "--data-dir", str(data),
              "--initial-cluster", f"r1={peer}", "--initial-advertise-peer-urls", peer)
    r = etcd_cluster_factory.from_data_dir("3.5", data, "r1", peer)

(`from_data_dirs` does the same for several members; pass `pki=c.pki` for a TLS cluster and
`user`/`password` when the snapshot had auth enabled.)

Outside pytest: `python -m tests.etcd_cluster up VERSION SIZE [--tls] [--auth] | down | env |
args` keeps one cluster running under $CACHE/etcd-local/ (this is what hack/etcd-local runs).
"""

from __future__ import annotations

import argparse
import atexit
import base64
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from testbed import TestbedError
from testbed.host import cache_root, die_with_parent, etcd_bin_dir, free_port
from tests.etcd_pki import Pki, make_pki

ROOT_ROLE = "root"
_PROBE = ("--command-timeout=3s",)  # later flags win: overrides etcdctl()'s default


class EtcdClusterError(TestbedError):
    """The cluster could not be built, started or made healthy (message carries log tails)."""


class EtcdctlError(subprocess.CalledProcessError):
    """An etcdctl/etcdutl call failed; str() shows its output, unlike CalledProcessError."""

    def __str__(self) -> str:
        return f"{super().__str__()}\nstdout: {self.stdout}\nstderr: {self.stderr}"


def _clean_env() -> dict[str, str]:
    # etcd reads ETCD_* and etcdctl ETCDCTL_* variables as flags: a person's shell must not
    # leak endpoints or data dirs into a test cluster.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ETCD_", "ETCDCTL_"))}
    env["ETCDCTL_API"] = "3"
    return env


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"(no log: {exc})"


@dataclass(eq=False)
class Member:
    """One etcd member: its identity, URLs and (once started) its process."""

    name: str
    peer_url: str
    client_url: str
    data_dir: Path
    log_path: Path
    bin_dir: Path
    proc: subprocess.Popen[bytes] | None = None
    meant_up: bool = False  # started and not stopped/killed by the fixture

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


_live: set[EtcdCluster] = set()


@atexit.register
def _kill_leftovers() -> None:
    for cluster in list(_live):
        cluster.close()


class EtcdCluster:
    """A set of etcd member processes on loopback, and etcdctl wired to reach them."""

    def __init__(
        self,
        bin_dir: Path,
        workdir: Path,
        *,
        pki: Pki | None = None,
        persistent: bool = False,
        extra_flags: Sequence[str] = (),
    ) -> None:
        self.bin_dir = bin_dir
        # Appended to every member's command line, e.g. --quota-backend-bytes for NOSPACE tests.
        self.extra_flags = list(extra_flags)
        self.version = bin_dir.name
        self.workdir = workdir
        self.pki = pki
        self.token = f"test-{secrets.token_hex(6)}"
        self.members: list[Member] = []
        self.user: str | None = None
        self.password: str | None = None
        # persistent clusters (hack/etcd-local) outlive this process on purpose.
        self._persistent = persistent
        workdir.mkdir(parents=True, exist_ok=True)
        if not persistent:
            _live.add(self)

    # --- addresses and credentials -------------------------------------------------------

    @property
    def scheme(self) -> str:
        return "https" if self.pki else "http"

    @property
    def client_urls(self) -> list[str]:
        """Client URLs of the members meant to be running (not the stopped/killed ones)."""
        return [m.client_url for m in self.members if m.meant_up]

    @property
    def ca_cert(self) -> str | None:
        return str(self.pki.ca_cert) if self.pki else None

    @property
    def client_cert(self) -> str | None:
        return str(self.pki.client_cert) if self.pki else None

    @property
    def client_key(self) -> str | None:
        return str(self.pki.client_key) if self.pki else None

    def module_args(self) -> dict[str, Any]:
        """Connection arguments for the etcd Ansible modules: only the ones that are set."""
        args: dict[str, Any] = {
            "endpoints": self.client_urls,
            "ca_cert": self.ca_cert,
            "client_cert": self.client_cert,
            "client_key": self.client_key,
            "user": self.user,
            "password": self.password,
        }
        return {k: v for k, v in args.items() if v is not None}

    def member(self, name: str) -> Member:
        for m in self.members:
            if m.name == name:
                return m
        raise KeyError(f"no member {name!r}; members: {[m.name for m in self.members]}")

    # --- processes -----------------------------------------------------------------------

    def allocate_member(self, name: str) -> Member:
        """A member with free ports and an empty data dir path, recorded but not started.

        A name may be reused once the member holding it is stopped (replacement); the new
        member always gets a fresh data dir.
        """
        for old in self.members:
            if old.name == name:
                if old.meant_up:
                    raise EtcdClusterError(f"member {name} is running: stop it before reusing")
                self.members.remove(old)
        data_dir = self.workdir / name
        n = 1
        while data_dir.exists():
            n += 1
            data_dir = self.workdir / f"{name}.{n}"
        member = Member(
            name=name,
            peer_url=f"{self.scheme}://127.0.0.1:{free_port()}",
            client_url=f"{self.scheme}://127.0.0.1:{free_port()}",
            data_dir=data_dir,
            log_path=data_dir.with_name(data_dir.name + ".log"),
            bin_dir=self.bin_dir,
        )
        self.members.append(member)
        return member

    def _flags(self, m: Member) -> list[str]:
        flags = [
            f"--name={m.name}",
            f"--data-dir={m.data_dir}",
            f"--listen-peer-urls={m.peer_url}",
            f"--initial-advertise-peer-urls={m.peer_url}",
            f"--listen-client-urls={m.client_url}",
            f"--advertise-client-urls={m.client_url}",
            "--logger=zap",  # 3.4 defaults to the deprecated capnslog
        ]
        if self.pki:
            p = self.pki
            flags += [
                f"--cert-file={p.server_cert}",
                f"--key-file={p.server_key}",
                f"--trusted-ca-file={p.ca_cert}",
                "--client-cert-auth",
                f"--peer-cert-file={p.server_cert}",
                f"--peer-key-file={p.server_key}",
                f"--peer-trusted-ca-file={p.ca_cert}",
                "--peer-client-cert-auth",
            ]
        return flags + self.extra_flags

    def _spawn(self, m: Member, flags: list[str]) -> None:
        if m.running:
            raise EtcdClusterError(f"member {m.name} is already running")
        cmd = [str(m.bin_dir / "etcd"), *flags]
        with open(m.log_path, "ab") as log:
            log.write(f"\n### {time.strftime('%H:%M:%S')} {' '.join(cmd)}\n".encode())
            log.flush()
            m.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=_clean_env(),
                start_new_session=True,  # own process group: killed as a group
                preexec_fn=None if self._persistent else die_with_parent,
            )
        m.meant_up = True

    def initial_cluster_with(self, member: Member) -> str:
        """--initial-cluster for `member` joining: current members from `member list`
        (an unstarted, unnamed learner is the member with its peer URL) plus `member`."""
        pairs = []
        for entry in self.member_list():
            name = entry["name"] or (member.name if member.peer_url in entry["peer_urls"] else "")
            if name and name != member.name:
                pairs += [f"{name}={url}" for url in entry["peer_urls"]]
        pairs.append(f"{member.name}={member.peer_url}")
        return ",".join(pairs)

    def start_member(
        self, member: Member, initial_cluster: str | None = None, state: str = "existing"
    ) -> None:
        """Start an allocated member. By default it joins the running cluster (after the
        test added it, e.g. as a learner). Does not wait: call wait_healthy()."""
        if initial_cluster is None:
            initial_cluster = self.initial_cluster_with(member)
        self._spawn(
            member,
            [
                *self._flags(member),
                f"--initial-cluster={initial_cluster}",
                f"--initial-cluster-state={state}",
                f"--initial-cluster-token={self.token}",
            ],
        )

    def restart_member(self, name: str, version: str | None = None) -> None:
        """Start a stopped member again on its own data dir, optionally with the binaries
        of another version (rolling upgrade/downgrade). Does not wait."""
        m = self.member(name)
        if version is not None:
            m.bin_dir = etcd_bin_dir(version)
        self._spawn(m, self._flags(m))

    def _signal(self, m: Member, sig: signal.Signals, timeout: float) -> None:
        m.meant_up = False
        if m.proc is None or m.proc.poll() is not None:
            return
        try:
            os.killpg(m.proc.pid, sig)
            m.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(m.proc.pid, signal.SIGKILL)
            m.proc.wait(10)
        except ProcessLookupError:
            m.proc.wait(10)

    def stop_member(self, name: str, timeout: float = 30) -> None:
        """SIGTERM (etcd shuts down gracefully) and wait; SIGKILL after `timeout`."""
        self._signal(self.member(name), signal.SIGTERM, timeout)

    def kill_member(self, name: str) -> None:
        """SIGKILL: a crash, as far as etcd is concerned."""
        self._signal(self.member(name), signal.SIGKILL, 10)

    def close(self) -> None:
        for m in self.members:
            self._signal(m, signal.SIGKILL, 10)
        _live.discard(self)

    def log_tails(self, lines: int = 25) -> str:
        return "\n".join(
            f"--- {m.name} ({m.log_path}) ---\n{_tail(m.log_path, lines)}"
            for m in self.members
            if m.log_path.exists()
        )

    # --- etcdctl -------------------------------------------------------------------------

    def _run(self, cmd: list[str], check: bool, timeout: float) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=_clean_env(), timeout=timeout, check=False
        )
        if check and proc.returncode != 0:
            raise EtcdctlError(proc.returncode, cmd, proc.stdout, proc.stderr)
        return proc

    def etcdctl(
        self,
        *args: str,
        endpoints: Sequence[str] | None = None,
        check: bool = True,
        client_cert: bool = True,
        auth: bool = True,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        """etcdctl (v3 API) against `endpoints` (default: every running member) with the
        cluster's CA, client certificate and root credentials; client_cert=False or
        auth=False leave those out (to prove the server demands them)."""
        cmd = [
            str(self.bin_dir / "etcdctl"),
            f"--endpoints={','.join(endpoints or self.client_urls)}",
            "--dial-timeout=3s",
            "--command-timeout=15s",
        ]
        if self.pki:
            cmd.append(f"--cacert={self.pki.ca_cert}")
            if client_cert:
                cmd += [f"--cert={self.pki.client_cert}", f"--key={self.pki.client_key}"]
        if auth and self.user:
            cmd.append(f"--user={self.user}:{self.password}")
        return self._run([*cmd, *args], check, timeout)

    def etcdutl(
        self, *args: str, check: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        tool = self.bin_dir / "etcdutl"
        if not tool.exists():
            raise EtcdClusterError(
                f"etcd {self.version} has no etcdutl (3.4): use etcdctl snapshot restore"
            )
        return self._run([str(tool), *args], check, timeout)

    def put(self, key: str, value: str) -> None:
        self.etcdctl("put", "--", key, value)

    def get(self, key: str) -> str | None:
        out = json.loads(self.etcdctl("get", "-w", "json", "--", key).stdout)
        kvs = out.get("kvs") or []
        return base64.b64decode(kvs[0]["value"]).decode() if kvs else None

    def member_list(self, endpoints: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """`member list` as dicts: id (hex, as etcdctl member remove takes it), name
        ("" until a learner starts), peer_urls, client_urls, is_learner."""
        out = json.loads(self.etcdctl("member", "list", "-w", "json", endpoints=endpoints).stdout)
        return [
            {
                "id": f"{int(m['ID']):x}",
                "name": m.get("name", ""),
                "peer_urls": list(m.get("peerURLs") or []),
                "client_urls": list(m.get("clientURLs") or []),
                "is_learner": bool(m.get("isLearner", False)),
            }
            for m in out.get("members", [])
        ]

    def endpoint_status(self, endpoints: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """`endpoint status -w json` of each endpoint (default: every running member)."""
        eps = list(endpoints or self.client_urls)
        # A short timeout: wait_healthy polls this and must notice a dead member quickly.
        status = self.etcdctl(*_PROBE, "endpoint", "status", "-w", "json", endpoints=eps)
        out = json.loads(status.stdout)
        if len(out) != len(eps):
            raise EtcdClusterError(f"endpoint status answered {len(out)} of {len(eps)}")
        return list(out)

    def leader_name(self) -> str:
        leader = {s["Status"].get("leader", 0) for s in self.endpoint_status()}
        if len(leader) != 1 or 0 in leader:
            raise EtcdClusterError(f"no agreed leader: {leader}")
        leader_id = f"{leader.pop():x}"
        for m in self.member_list():
            if m["id"] == leader_id:
                return str(m["name"])
        raise EtcdClusterError(f"leader {leader_id} is not in member list")

    def _check_processes(self) -> None:
        dead = [m for m in self.members if m.meant_up and not m.running]
        if dead:
            names = ", ".join(
                f"{m.name} (exit {m.proc.returncode if m.proc else '?'})" for m in dead
            )
            raise EtcdClusterError(f"etcd member(s) exited: {names}\n{self.log_tails()}")

    def _healthy(self) -> None:
        statuses = self.endpoint_status()
        # etcdctl's JSON leaves out a leader of 0, as during an election.
        leaders = {s["Status"].get("leader", 0) for s in statuses}
        ids = {s["Status"]["header"]["member_id"] for s in statuses}
        if len(leaders) != 1 or 0 in leaders or not leaders <= ids:
            raise EtcdClusterError(f"leader not agreed among running members: {leaders}")
        # A linearizable read proves quorum; learners cannot serve it, so ask voters only.
        voters = [s["Endpoint"] for s in statuses if not s["Status"].get("isLearner")]
        self.etcdctl(*_PROBE, "get", "--consistency=l", "health-probe", endpoints=voters)

    def wait_healthy(self, timeout: float = 60) -> None:
        """Every running member answers, they agree on a leader, a quorum read works."""
        deadline = time.monotonic() + timeout
        while True:
            self._check_processes()
            try:
                self._healthy()
                return
            except (EtcdctlError, EtcdClusterError, subprocess.TimeoutExpired) as exc:
                last = str(exc)
            if time.monotonic() > deadline:
                raise EtcdClusterError(
                    f"etcd {self.version} not healthy after {timeout}s: {last}\n{self.log_tails()}"
                )
            time.sleep(0.5)

    # --- bootstrap -----------------------------------------------------------------------

    def bootstrap(self, size: int, timeout: float = 60, attempts: int = 3) -> None:
        """Start `size` new members with a static --initial-cluster and wait until healthy.
        A port taken between allocation and bind (rare) means a fresh try on new ports."""
        if size < 1:
            raise EtcdClusterError(f"size must be >= 1, got {size}")
        for attempt in range(1, attempts + 1):
            self.token = f"test-{secrets.token_hex(6)}"
            members = [self.allocate_member(f"m{i}") for i in range(1, size + 1)]
            initial = ",".join(f"{m.name}={m.peer_url}" for m in members)
            for m in members:
                self.start_member(m, initial, state="new")
            try:
                self.wait_healthy(timeout)
                return
            except EtcdClusterError as exc:
                if attempt == attempts or "address already in use" not in str(exc):
                    raise
                self.close()
                if not self._persistent:
                    _live.add(self)
                for m in members:
                    shutil.rmtree(m.data_dir, ignore_errors=True)
                self.members.clear()

    def enable_auth(self, user: str = "root", password: str | None = None) -> None:
        """Create `user` with the root role and enable auth; etcdctl() uses it from now on."""
        password = password or secrets.token_urlsafe(12)
        self.etcdctl("user", "add", f"{user}:{password}", "--interactive=false")
        roles = self.etcdctl("role", "list").stdout.split()
        if ROOT_ROLE not in roles:
            self.etcdctl("role", "add", ROOT_ROLE)
        self.etcdctl("user", "grant-role", user, ROOT_ROLE)
        self.etcdctl("auth", "enable")
        self.user, self.password = user, password


class EtcdClusterFactory:
    """Makes clusters for one test and tears all of them down at its end."""

    def __init__(self, base: Path) -> None:
        self._base = base
        self.clusters: list[EtcdCluster] = []

    def _workdir(self) -> Path:
        return self._base / f"cluster{len(self.clusters) + 1}"

    def __call__(
        self,
        version: str = "3.5",
        size: int = 3,
        tls: bool = False,
        auth: bool = False,
        timeout: float = 60,
        extra_flags: Sequence[str] = (),
    ) -> EtcdCluster:
        bin_dir = etcd_bin_dir(version)
        workdir = self._workdir()
        pki = make_pki(workdir / "pki") if tls else None
        cluster = EtcdCluster(bin_dir, workdir, pki=pki, extra_flags=extra_flags)
        self.clusters.append(cluster)
        cluster.bootstrap(size, timeout)
        if auth:
            cluster.enable_auth()
        return cluster

    @staticmethod
    def free_url(scheme: str = "http") -> str:
        """A loopback URL on a free port, e.g. the peer URL to restore a snapshot with."""
        return f"{scheme}://127.0.0.1:{free_port()}"

    def from_data_dirs(
        self,
        version: str,
        members: Sequence[tuple[str, Path, str]],
        *,
        pki: Pki | None = None,
        user: str | None = None,
        password: str | None = None,
        timeout: float = 60,
    ) -> EtcdCluster:
        """Start members on existing data dirs, as (name, data_dir, peer_url) each, e.g. made
        by `snapshot restore` with those names and peer URLs. Client URLs are new; `pki`
        (e.g. the source cluster's) when the peer URLs are https; `user`/`password` when the
        restored data has auth enabled."""
        cluster = EtcdCluster(etcd_bin_dir(version), self._workdir(), pki=pki)
        self.clusters.append(cluster)
        cluster.user, cluster.password = user, password
        for name, data_dir, peer_url in members:
            m = Member(
                name=name,
                peer_url=peer_url,
                client_url=f"{cluster.scheme}://127.0.0.1:{free_port()}",
                data_dir=Path(data_dir),
                log_path=cluster.workdir / f"{name}.log",
                bin_dir=cluster.bin_dir,
            )
            cluster.members.append(m)
            cluster._spawn(m, cluster._flags(m))
        cluster.wait_healthy(timeout)
        return cluster

    def from_data_dir(
        self, version: str, data_dir: Path, name: str, peer_url: str, **kwargs: Any
    ) -> EtcdCluster:
        """One member on a restored data dir (see from_data_dirs for the keyword options)."""
        return self.from_data_dirs(version, [(name, data_dir, peer_url)], **kwargs)

    def log_tails(self) -> str:
        return "\n".join(c.log_tails() for c in self.clusters)

    def close(self) -> None:
        for cluster in self.clusters:
            cluster.close()


@pytest.fixture
def etcd_cluster_factory(tmp_path: Path) -> Iterator[EtcdClusterFactory]:
    """Call it to get a running EtcdCluster: factory(version="3.5", size=3, tls=False,
    auth=False, extra_flags=()). Every cluster made is killed when the test ends."""
    factory = EtcdClusterFactory(tmp_path / "etcd")
    try:
        yield factory
    finally:
        factory.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    factory = getattr(item, "funcargs", {}).get("etcd_cluster_factory")
    if report.when == "call" and report.failed and isinstance(factory, EtcdClusterFactory):
        report.sections.append(("etcd member logs", factory.log_tails()))
    return report


# --- hack/etcd-local: one persistent cluster for a person ------------------------------------


def _local_dir() -> Path:
    return cache_root() / "etcd-local"


def _state_file() -> Path:
    return _local_dir() / "state.json"


def _load_state() -> dict[str, Any] | None:
    try:
        return dict(json.loads(_state_file().read_text()))
    except FileNotFoundError:
        return None


def _is_our_etcd(pid: int, data_dir: str) -> bool:
    # A pid from the state file may have been reused: only signal it if it is still
    # an etcd on our data dir.
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"--data-dir={data_dir}".encode() in cmdline


def _kv_args(module_args: dict[str, Any]) -> str:
    return " ".join(
        f"{k}={','.join(v) if isinstance(v, list) else v}" for k, v in module_args.items()
    )


def _env_lines(state: dict[str, Any]) -> list[str]:
    args = state["module_args"]
    lines = [
        f"export PATH={state['bin_dir']}:$PATH",
        "export ETCDCTL_API=3",
        f"export ETCDCTL_ENDPOINTS={','.join(args['endpoints'])}",
    ]
    for key, var in (("ca_cert", "CACERT"), ("client_cert", "CERT"), ("client_key", "KEY")):
        if key in args:
            lines.append(f"export ETCDCTL_{var}={args[key]}")
    if "user" in args:
        lines.append(f"export ETCDCTL_USER={args['user']}:{args['password']}")
    lines.append(f"# module args: {json.dumps(args)}")
    return lines


def local_up(version: str, size: int, tls: bool, auth: bool) -> dict[str, Any]:
    state = _load_state()
    if state and any(_is_our_etcd(m["pid"], m["data_dir"]) for m in state["members"]):
        raise EtcdClusterError("a local cluster is already up: hack/etcd-local down first")
    shutil.rmtree(_local_dir(), ignore_errors=True)
    workdir = _local_dir()
    pki = make_pki(workdir / "pki") if tls else None
    cluster = EtcdCluster(etcd_bin_dir(version), workdir, pki=pki, persistent=True)
    try:
        cluster.bootstrap(size)
        if auth:
            cluster.enable_auth()
    except BaseException:
        cluster.close()
        raise
    state = {
        "version": cluster.version,
        "bin_dir": str(cluster.bin_dir),
        "members": [
            {
                "name": m.name,
                "pid": m.proc.pid if m.proc else None,
                "client_url": m.client_url,
                "peer_url": m.peer_url,
                "data_dir": str(m.data_dir),
                "log": str(m.log_path),
            }
            for m in cluster.members
        ],
        "module_args": cluster.module_args(),
    }
    _state_file().write_text(json.dumps(state, indent=2) + "\n")
    return state


def local_down() -> bool:
    state = _load_state()
    for m in state["members"] if state else []:
        if m["pid"] and _is_our_etcd(m["pid"], m["data_dir"]):
            os.killpg(m["pid"], signal.SIGTERM)
            for _ in range(100):
                if not _is_our_etcd(m["pid"], m["data_dir"]):
                    break
                time.sleep(0.1)
            else:
                os.killpg(m["pid"], signal.SIGKILL)
    shutil.rmtree(_local_dir(), ignore_errors=True)
    return state is not None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="hack/etcd-local", description="A real etcd cluster on loopback for a person."
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start VERSION (3.4/3.5/3.6/x.y.z) with SIZE members")
    up.add_argument("version")
    up.add_argument("size", type=int)
    up.add_argument("--tls", action="store_true", help="https with client certificates")
    up.add_argument("--auth", action="store_true", help="root user with a password")
    sub.add_parser("down", help="stop the cluster and delete its data")
    sub.add_parser("env", help='shell exports for etcdctl (eval "$(hack/etcd-local env)")')
    sub.add_parser("args", help="module arguments as key=value, for ansible -a")
    opts = parser.parse_args(argv)
    try:
        if opts.cmd == "up":
            state = local_up(opts.version, opts.size, opts.tls, opts.auth)
            print(f"etcd {state['version']} up, {len(state['members'])} member(s):")
            for m in state["members"]:
                print(
                    f"  {m['name']}  client {m['client_url']}  peer {m['peer_url']}  pid {m['pid']}"
                )
            print(f"module args (JSON): {json.dumps(state['module_args'])}")
            print(f"module args (k=v):  {_kv_args(state['module_args'])}")
            print('try: ansible localhost -m etcd_member -a "$(hack/etcd-local args) ..."')
            print('     eval "$(hack/etcd-local env)"; etcdctl member list -w table')
        elif opts.cmd == "down":
            print("stopped and removed" if local_down() else "no local cluster")
        else:
            saved = _load_state()
            if saved is None:
                raise EtcdClusterError("no local cluster: hack/etcd-local up VERSION SIZE")
            if opts.cmd == "env":
                print("\n".join(_env_lines(saved)))
            else:
                print(_kv_args(saved["module_args"]))
    except TestbedError as exc:
        print(f"etcd-local: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
