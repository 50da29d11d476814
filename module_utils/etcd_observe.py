"""One look at an etcd cluster on Kubernetes: its member Pods, claims, Services, disruption
budget and TLS Secrets, then what etcd itself says, in one process.

Each module process costs ansible about a second of start-up on a small machine, and a run
with nothing to do used to start eight of them to look. Everything here is read-only; the
facts go back to the role, where plugins/filter/etcd_plan.py decides what they mean. No answer
from etcd is a fact too (`info_error`), not a failure of the look.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any
from urllib.parse import quote

from ansible.module_utils.etcd_client import EtcdClient
from ansible.module_utils.etcd_common import ConnectionParams, normalize_url, private_file
from ansible.module_utils.etcd_errors import EtcdInputError, EtcdModuleError
from ansible.module_utils.etcd_health import cluster_info
from ansible.module_utils.etcd_kube import KubeError, KubeReader, credentials, namespaced

CLIENT_PORT = 2379
PEER_PORT = 2380
BACKUP_GROUP_VERSION = "etcd.runbook.io/v1alpha1"
LEASE_GROUP_VERSION = "coordination.k8s.io/v1"
NODE_LEASES = "kube-node-lease"
# Set on a claim by the scheduler when its volume binds on first use: a node-local volume
# stays on that node.
SELECTED_NODE = "volume.kubernetes.io/selected-node"
# While members are awaited, only their Pods and their own status are read this often; the
# whole look is taken again once they answer.
PROBE_INTERVAL = 0.5
# A member that is starting accepts connections before it serves (it first catches up with
# the leader): a look bounded by the call timeout would see it late, so the probe is shorter.
PROBE_TIMEOUT = 1.0
# Pods going away are polled faster: a heal is waiting on exactly this, and a LIST of a few
# Pods costs the API server little.
GONE_INTERVAL = 0.25


def running(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pods etcd can be reached in: Running and not being deleted."""
    return [
        pod
        for pod in pods
        if (pod.get("status") or {}).get("phase") == "Running"
        and not (pod.get("metadata") or {}).get("deletionTimestamp")
    ]


def leaving(pods: list[dict[str, Any]]) -> list[str]:
    """Names of the Pods being deleted."""
    return sorted(
        str(pod["metadata"].get("name"))
        for pod in pods
        if (pod.get("metadata") or {}).get("deletionTimestamp")
    )


def node_facts(node: dict[str, Any] | None, lease: dict[str, Any] | None) -> dict[str, Any]:
    """A node as the plan judges it: whether it exists, its Ready condition and since when, and
    when its kubelet last renewed its Lease (every 10 s while it runs)."""
    if node is None:
        return {"found": False, "ready": "Unknown", "ready_since": "", "renewed": ""}
    conditions = (node.get("status") or {}).get("conditions") or []
    ready: dict[str, Any] = next((c for c in conditions if c.get("type") == "Ready"), {})
    return {
        "found": True,
        "ready": str(ready.get("status") or "Unknown"),
        "ready_since": str(ready.get("lastTransitionTime") or ""),
        "renewed": str(((lease or {}).get("spec") or {}).get("renewTime") or ""),
    }


def unschedulable(pods: list[dict[str, Any]], member: str) -> str:
    """The scheduler's word when it found no node for `member`'s Pod, else ''. (The plan filter
    keeps its own copy: a filter plugin cannot import module_utils.)"""
    for pod in pods:
        if (pod.get("metadata") or {}).get("name") != member:
            continue
        for c in (pod.get("status") or {}).get("conditions") or []:
            if (c.get("type"), c.get("status"), c.get("reason")) == (
                "PodScheduled",
                "False",
                "Unschedulable",
            ):
                return str(c.get("message") or "no node fits it").strip()
    return ""


def dns_endpoints(pods: list[dict[str, Any]], scheme: str, suffix: str) -> dict[str, str]:
    """Member name -> client URL by the headless Service's DNS name (`suffix` follows the Pod
    name: <service>.<namespace>.svc.<domain>)."""
    names = sorted(pod["metadata"]["name"] for pod in running(pods))
    return {name: f"{scheme}://{name}.{suffix}:{CLIENT_PORT}" for name in names}


def pod_addresses(pods: list[dict[str, Any]], suffix: str) -> dict[str, str]:
    """The DNS name of each running member Pod (as in dns_endpoints) -> its Pod IP: the look
    connects there, so a Pod made again is reached before cluster DNS answers for its name."""
    return {
        f"{pod['metadata']['name']}.{suffix}": str(pod["status"]["podIP"])
        for pod in running(pods)
        if (pod.get("status") or {}).get("podIP")
    }


def forward_targets(pods: list[dict[str, Any]]) -> list[str]:
    """`name=uid` of each running member Pod, as port_forward.py takes them (a Pod re-created
    under the same name has a new uid and gets a new forward)."""
    return sorted(f"{pod['metadata']['name']}={pod['metadata']['uid']}" for pod in running(pods))


@dataclass
class Forwarder:
    """Port-forwards through the API server for runs outside the cluster, kept by the role's
    port_forward.py in a private directory that outlives this process (the role closes it)."""

    script: str
    kubectl: str
    namespace: str
    max_seconds: int
    state_dir: str = ""

    def ensure(self, pods: list[dict[str, Any]]) -> tuple[dict[str, str], dict[str, str]]:
        if not self.state_dir:
            self.state_dir = tempfile.mkdtemp(prefix="etcd-runbook-")
        argv = [
            sys.executable,
            self.script,
            "ensure",
            "--state-dir",
            self.state_dir,
            "--namespace",
            self.namespace,
            "--kubectl",
            self.kubectl,
            "--max-seconds",
            str(self.max_seconds),
            *forward_targets(pods),
        ]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        try:
            answer = json.loads(done.stdout)
        except ValueError as exc:
            raise EtcdModuleError(
                f"port_forward.py failed ({done.returncode}): {done.stderr.strip()[-300:]}"
            ) from exc
        if done.returncode != 0:
            raise EtcdModuleError(f"port_forward.py: {answer.get('msg', done.returncode)}")
        return dict(answer["endpoints"]), dict(answer["failed"])


@dataclass
class Observer:
    reader: KubeReader
    namespace: str
    selector: str
    secret_selector: str | None
    timeout: float
    backups: bool = False

    def listed(
        self, group_version: str, resource: str, kind: str, selector: str
    ) -> list[dict[str, Any]]:
        """The namespace's objects of one kind that carry `selector`, made lean."""
        path = namespaced(group_version, self.namespace, resource)
        return lean(self.reader.items(path, selector, kind, group_version))

    def pods(self) -> list[Any]:
        return self.listed("v1", "pods", "Pod", self.selector)

    def nodes_of(
        self, pods: list[dict[str, Any]], claims: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        """What the plan needs of each node a member Pod was placed on, or the scheduler picked
        for a member's claim (node_facts), by node name; None when Nodes cannot be read (the
        namespaced install), so no member is ever judged by a node nobody could see."""
        placed = {str((p.get("spec") or {}).get("nodeName") or "") for p in pods}
        picked = {
            str(((c.get("metadata") or {}).get("annotations") or {}).get(SELECTED_NODE) or "")
            for c in claims
        }
        names = sorted((placed | picked) - {""})
        seen: dict[str, Any] = {}
        try:
            for name in names:
                node = self.reader.get(f"/api/v1/nodes/{quote(name, safe='')}")
                lease = self.reader.get(
                    namespaced(LEASE_GROUP_VERSION, NODE_LEASES, "leases", name)
                )
                seen[name] = node_facts(node, lease)
        except KubeError as error:
            if error.reason == "Forbidden":
                return None
            raise
        return seen

    def kubernetes(self) -> dict[str, Any]:
        sel = self.selector
        facts: dict[str, Any] = {
            "pods": self.pods(),
            "claims": self.listed("v1", "persistentvolumeclaims", "PersistentVolumeClaim", sel),
            "services": self.listed("v1", "services", "Service", sel),
            "budgets": self.listed("policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", sel),
            "secrets": [],
        }
        facts["nodes"] = self.nodes_of(facts["pods"], facts["claims"])
        if self.secret_selector is not None:
            facts["secrets"] = self.listed("v1", "secrets", "Secret", self.secret_selector)
        if self.backups:
            # Every EtcdBackup of the namespace: the plan picks this cluster's (by clusterName,
            # which no label carries) for the snapshot a minor upgrade starts with.
            facts["backups"] = self.listed(BACKUP_GROUP_VERSION, "etcdbackups", "EtcdBackup", "")
        return facts


def lean(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects without metadata.managedFields, which nothing decides on: every fact a run
    keeps is copied into each task's variables, so its size is paid on every task."""
    for item in items:
        (item.get("metadata") or {}).pop("managedFields", None)
    return items


def awaited(wait: dict[str, Any]) -> list[str]:
    """The members a look waits for until etcd reports each healthy: `member`, then `members`."""
    names = [str(wait.get("member") or ""), *(str(m) for m in wait.get("members") or [])]
    return [n for n in names if n]


def stop_asked(stop_file: str) -> bool:
    """Whoever started the run asks it to stop by creating this file (the watcher's
    ERO_STOP_FILE): a read-only wait may end early, as a wait tagged `interruptible` may between
    its attempts. No file named, never."""
    return bool(stop_file) and os.path.exists(stop_file)


def never() -> bool:
    return False


def wait_pods_gone(
    observer: Observer,
    names: list[str],
    deadline: float,
    sleep: Callable[[float], None] = time.sleep,
    stopped: Callable[[], bool] = never,
) -> list[str]:
    """Reads only the Pods until none of `names` is being deleted, `deadline` (monotonic)
    passes or the run is asked to stop; the names of those still going. Only the named: a Pod
    being deleted on a lost node never goes (no kubelet confirms it), and the plan leaves it
    out."""
    wanted = set(names)
    going = [n for n in leaving(observer.pods()) if n in wanted]
    while going and time.monotonic() < deadline and not stopped():
        sleep(GONE_INTERVAL)
        going = [n for n in leaving(observer.pods()) if n in wanted]
    return going


def tls_files(secrets: list[dict[str, Any]], server: str, client: str) -> dict[str, str]:
    """Connection options for the etcd client from the server Secret's CA and the client
    Secret's pair; empty unless both Secrets hold them."""
    data = {s["metadata"]["name"]: s.get("data") or {} for s in secrets}
    ca = data.get(server, {}).get("ca.crt")
    cert, key = data.get(client, {}).get("tls.crt"), data.get(client, {}).get("tls.key")
    if not (ca and cert and key):
        return {}
    return {
        "ca_cert": private_file("ca.crt", base64.b64decode(ca).decode()),
        "client_cert": private_file("client.crt", base64.b64decode(cert).decode()),
        "client_key": private_file("client.key", base64.b64decode(key).decode()),
    }


def ask_etcd(
    endpoints: dict[str, str],
    tls: dict[str, str],
    timeout: float,
    cluster_id: str | None,
    addresses: dict[str, str],
) -> tuple[dict[str, Any], str]:
    """(what etcd_cluster_info would return, why not) from the members at `endpoints`."""
    if not endpoints:
        return {}, "no member Pod is running"
    # The endpoints are every running member Pod: a member whose Pod is gone or going away
    # is not asked through its advertised URL, where the call could only time out.
    params = ConnectionParams(
        endpoints=tuple(endpoints.values()),
        timeout=timeout,
        cluster_id=cluster_id,
        advertised=False,
        addresses=addresses,
        **tls,
    )
    try:
        params.validate()
        with EtcdClient(params) as client:
            info = cluster_info(client)
    except EtcdModuleError as error:
        return {}, error.message
    return (info, "") if info.get("cluster_id") else ({}, "no member answered")


def peer_url(etcd: dict[str, Any], member: str) -> str:
    """The peer URL `member` was added and started with (etcd_manifests.peer_url); '' when
    the look knows no DNS suffix."""
    if not etcd.get("dns_suffix"):
        return ""
    scheme = "https" if etcd.get("tls") else "http"
    return f"{scheme}://{member}.{etcd['dns_suffix']}:{PEER_PORT}"


def member_healthy(info: dict[str, Any], member: str, peer: str = "") -> bool:
    """Whether etcd reports `member` healthy: the member whose peer URL is `peer`, the whole
    URL (a member of another namespace's cluster of the same name, which may call itself by the
    same name, is not it); by the name members give themselves only without one."""
    wanted = normalize_url(peer) if peer else ""
    return any(
        m.get("healthy")
        and (
            {normalize_url(u) for u in m.get("peer_urls") or []} == {wanted}
            if wanted
            else m.get("name") == member
        )
        for m in info.get("members") or []
    )


def check(etcd: dict[str, Any]) -> None:
    if not etcd.get("enabled"):
        return
    if not etcd.get("port_forward") and not etcd.get("dns_suffix"):
        raise EtcdInputError("etcd.dns_suffix is required unless etcd.port_forward is given")
    if etcd.get("tls") and not (etcd.get("server_secret") and etcd.get("client_secret")):
        raise EtcdInputError("etcd.tls needs etcd.server_secret and etcd.client_secret")


def reach(
    etcd: dict[str, Any], forwarder: Forwarder | None, pods: list[dict[str, Any]]
) -> dict[str, Any]:
    """How this look reaches the running member Pods: `endpoints` (member name -> client URL),
    `addresses` (their host names -> Pod IPs) and `forward_failed`."""
    scheme = "https" if etcd.get("tls") else "http"
    if forwarder is not None:
        local, failed = forwarder.ensure(pods)
        endpoints = {n: f"{scheme}://{a}" for n, a in sorted(local.items())}
        return {"endpoints": endpoints, "addresses": {}, "forward_failed": failed}
    return {
        "endpoints": dns_endpoints(pods, scheme, etcd["dns_suffix"]),
        "addresses": pod_addresses(pods, etcd["dns_suffix"]),
        "forward_failed": {},
    }


def answering(
    endpoints: dict[str, str], addresses: dict[str, str], tls: dict[str, str], members: list[str]
) -> bool:
    """Whether each of `members` answers its own status healthy (a leader, no error), asked
    with PROBE_TIMEOUT; False as soon as one has no running Pod."""
    urls = [endpoints[m] for m in members if m in endpoints]
    if len(urls) < len(members):
        return False
    params = ConnectionParams(
        endpoints=tuple(urls),
        timeout=PROBE_TIMEOUT,
        advertised=False,
        addresses=addresses,
        **tls,
    )
    try:
        with EtcdClient(params) as client:
            return all(status.healthy for status in client.statuses(urls))
    except EtcdModuleError:
        return False


def probe_until_answering(
    pods: Callable[[], list[dict[str, Any]]],
    reach_pods: Callable[[list[dict[str, Any]]], dict[str, Any]],
    probe: Callable[[dict[str, str], dict[str, str]], bool],
    members: list[str],
    deadline: float,
    sleep: Callable[[float], None] = time.sleep,
    stopped: Callable[[], bool] = never,
) -> None:
    """Reads only the member Pods and asks only `members` for their own status, every
    PROBE_INTERVAL, until they answer, the scheduler finds no node for one of them, `deadline`
    (monotonic) passes or the run is asked to stop: the caller then looks at everything
    again."""
    while time.monotonic() < deadline and not stopped():
        sleep(PROBE_INTERVAL)
        seen = pods()
        if any(unschedulable(seen, m) for m in members):
            return
        where = reach_pods(seen)
        if probe(where["endpoints"], where["addresses"]):
            return


def observe(params: dict[str, Any]) -> dict[str, Any]:
    """The module's work: see the module's RETURN for the shape."""
    etcd = params.get("etcd") or {}
    check(etcd)
    reader = KubeReader(credentials(params.get("kubeconfig"), params.get("context")), 10.0)
    observer = Observer(
        reader=reader,
        namespace=params["namespace"],
        selector=params["selector"],
        secret_selector=params.get("secret_selector"),
        timeout=float(etcd.get("timeout") or 5),
        backups=bool(params.get("backups")),
    )
    forward = etcd.get("port_forward")
    forwarder = (
        Forwarder(
            script=forward["script"],
            kubectl=forward.get("kubectl") or "kubectl",
            namespace=params["namespace"],
            max_seconds=int(forward.get("max_seconds") or 3600),
            state_dir=forward.get("state_dir") or "",
        )
        if forward
        else None
    )
    wait = params.get("wait_for") or {}
    deadline = time.monotonic() + float(wait.get("timeout") or 0)
    stopped = partial(stop_asked, str(wait.get("stop_file") or ""))
    going = (
        wait_pods_gone(observer, wait["pods_gone"], deadline, stopped=stopped)
        if wait.get("pods_gone")
        else []
    )
    while True:
        observed_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        facts = observer.kubernetes()
        result: dict[str, Any] = {
            **facts,
            "endpoints": {},
            "addresses": {},
            "forward_failed": {},
        }
        result["observed_at"] = observed_at
        result.update(info={}, info_error="etcd was not asked")
        if etcd.get("enabled"):
            result.update(reach(etcd, forwarder, facts["pods"]))
            tls = (
                tls_files(facts["secrets"], etcd["server_secret"], etcd["client_secret"])
                if etcd.get("tls")
                else {}
            )
            result["info"], result["info_error"] = ask_etcd(
                result["endpoints"],
                tls,
                observer.timeout,
                etcd.get("cluster_id") or None,
                result["addresses"],
            )
        result["state_dir"] = forwarder.state_dir if forwarder else ""
        if going and stopped():
            result["wait_error"] = f"the run was asked to stop: {', '.join(going)} still going"
            result["wait_reason"] = "Stopped"
            return result
        if going:
            # The facts go back with the failure, as below.
            result["wait_error"] = (
                f"member Pods still being deleted after {wait['timeout']}s: {', '.join(going)}"
            )
            return result
        waiting = [
            m for m in awaited(wait) if not member_healthy(result["info"], m, peer_url(etcd, m))
        ]
        if not waiting:
            return result
        for member in waiting:
            if why := unschedulable(facts["pods"], member):
                # No node takes it: waiting out the timeout would change nothing, and the plan
                # says why in status.
                result["wait_error"] = f"member {member}'s Pod cannot be scheduled: {why}"
                result["wait_reason"] = "Unschedulable"
                return result
        if time.monotonic() >= deadline:
            # The facts go back with the failure: the role still reports from them and
            # closes the port-forwards this look opened.
            result["wait_error"] = (
                f"member {', '.join(waiting)} was not healthy within {wait['timeout']}s: "
                f"{result['info_error'] or 'etcd does not report it healthy yet'}"
            )
            return result
        if stopped():
            # Nothing was changed; the run ends at its next task boundary (the watcher's
            # ero_task_boundary), so no task acts on this look.
            result["wait_error"] = (
                f"the run was asked to stop while member {', '.join(waiting)} was awaited"
            )
            result["wait_reason"] = "Stopped"
            return result
        if not etcd.get("enabled"):
            time.sleep(PROBE_INTERVAL)
            continue
        probe_until_answering(
            observer.pods,
            partial(reach, etcd, forwarder),
            partial(answering, tls=tls, members=waiting),
            waiting,
            deadline,
            stopped=stopped,
        )
