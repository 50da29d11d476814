"""One look at an etcd cluster on Kubernetes: its member Pods, claims, Services, disruption
budget and TLS Secrets (when asked, its quorum-recovery Jobs and their Pods, and the operator's
own image), then what etcd itself says, in one process.

Each module process costs ansible about a second of start-up on a small machine, and a run
with nothing to do used to start eight of them to look. Everything here is read-only; the
facts go back to the role, where etcd_runbook/rules/etcd_plan.py decides what they mean. No answer
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

from etcd_runbook.clients.etcd_client import EtcdClient
from etcd_runbook.clients.etcd_common import ConnectionParams, normalize_url, private_file
from etcd_runbook.clients.etcd_errors import EtcdInputError, EtcdModuleError
from etcd_runbook.clients.etcd_kube import KubeError, KubeReader, credentials, namespaced
from etcd_runbook.names import (
    API_VERSION,
    LABEL_HOSTNAME,
    LABEL_MEMBER,
)
from etcd_runbook.observe.etcd_backup_observe import own_image
from etcd_runbook.operations.etcd_health import cluster_info
from etcd_runbook.rules import etcd_pods as pod_rules
from etcd_runbook.rules.cluster.nodes import NODE_SILENCE
from etcd_runbook.rules.etcd_pods import seconds_between
from etcd_runbook.rules.etcd_tls_secrets import client_material

CLIENT_PORT = 2379
PEER_PORT = 2380
LEASE_GROUP_VERSION = "coordination.k8s.io/v1"
NODE_LEASES = "kube-node-lease"
# A kubelet renews its Lease every 10 s (counted here to the second, so up to 11 s between two
# renewals). A member whose Pod's node has been silent longer has its volume read: below the
# plan's NODE_SILENCE, so each member the plan may judge lost is one whose volume this look read.
QUESTION_SILENCE = NODE_SILENCE - 3
# At most this many Nodes of a volume's affinity are listed, and the facts of at most
# MAX_VOLUME_NODES of them (the Ready first) kept: a zone of many nodes needs only a few that
# run to say the volume is not stranded.
MAX_LISTED_NODES = 100
MAX_VOLUME_NODES = 5
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


def dialable(pods: list[dict[str, Any]], nodes: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The running Pods (see running) whose node this look saw exist and Ready: a Pod on a node
    that is gone or not Ready is never dialled. Its address may by now be another Pod's on a
    node that came back, and with TLS off whoever answers there would be taken at its word.
    Every running Pod when Nodes cannot be read."""
    if nodes is None:
        return running(pods)
    return [
        pod
        for pod in running(pods)
        if (node := nodes.get(str((pod.get("spec") or {}).get("nodeName") or ""))) is None
        or (node.get("found") and node.get("ready") == "True")
    ]


def leaving(pods: list[dict[str, Any]]) -> list[str]:
    """Names of the Pods being deleted."""
    return sorted(
        str(pod["metadata"].get("name"))
        for pod in pods
        if (pod.get("metadata") or {}).get("deletionTimestamp")
    )


def renewed_at(lease: dict[str, Any] | None) -> str:
    """When the API server stored the last renewal of a node's Lease, on its own clock: the time
    of the managedFields entry that owns spec.renewTime (the API server sets it when that
    writer changes a field). '' when the Lease or its entry is missing."""
    times = [
        str(entry.get("time") or "")
        for entry in ((lease or {}).get("metadata") or {}).get("managedFields") or []
        if "f:renewTime" in (((entry.get("fieldsV1") or {}).get("f:spec")) or {})
    ]
    return max(times, default="")


def node_facts(
    node: dict[str, Any] | None, lease: dict[str, Any] | None, read_at: str
) -> dict[str, Any]:
    """A node as the plan judges it: whether it exists, its Ready condition and since when, when
    its kubelet last renewed its Lease (`renewed`, the kubelet's clock), how long ago that was
    on the API server's clock (`silent_for`: from the API server's record of the renewal to its
    Date header when the Lease was read at `read_at`; None when unknown), and `read_at`.
    Never the kubelet's clock against another one: a skewed node would look silent."""
    if node is None:
        return {
            "found": False,
            "ready": "Unknown",
            "ready_since": "",
            "renewed": "",
            "silent_for": None,
            "read_at": read_at,
        }
    conditions = (node.get("status") or {}).get("conditions") or []
    ready: dict[str, Any] = next((c for c in conditions if c.get("type") == "Ready"), {})
    silent = seconds_between(renewed_at(lease), read_at)
    return {
        "found": True,
        "ready": str(ready.get("status") or "Unknown"),
        "ready_since": str(ready.get("lastTransitionTime") or ""),
        "renewed": str(((lease or {}).get("spec") or {}).get("renewTime") or ""),
        "silent_for": None if silent is None else max(0.0, silent),
        "read_at": read_at,
    }


def usable(node: dict[str, Any] | None) -> bool:
    """A node a member can run on as far as this look can tell: it exists, is Ready, and its
    kubelet was heard from within QUESTION_SILENCE. Stricter than the plan's test of a lost
    node (NODE_SILENCE), so every member the plan may judge has its volume read."""
    if not node or not node.get("found") or node.get("ready") != "True":
        return False
    silent = node.get("silent_for")
    return silent is None or silent <= QUESTION_SILENCE


# --- where a volume can go -------------------------------------------------------------------


def _requirement_matches(req: dict[str, Any], value: str | None) -> bool:
    """One node selector requirement against a node's label (or field) value, None when the
    node has no such label; Kubernetes' semantics (an unknown operator matches nothing)."""
    op, values = req.get("operator"), [str(v) for v in req.get("values") or []]
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            have, bound = int(value), int(values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def term_matches(term: dict[str, Any], node: dict[str, Any]) -> bool:
    """Whether `node` satisfies one nodeSelectorTerm (all its requirements); an empty term
    matches no node, as in Kubernetes."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False
    name = str(meta.get("name") or "")
    return all(_requirement_matches(r, labels.get(r.get("key"))) for r in exprs) and all(
        _requirement_matches(r, name if r.get("key") == "metadata.name" else None) for r in fields
    )


def term_query(term: dict[str, Any]) -> dict[str, str]:
    """A LIST query that narrows Nodes to those a term may match (what a label or field
    selector can say; term_matches decides)."""
    parts = []
    for r in term.get("matchExpressions") or []:
        key, op, values = r.get("key"), r.get("operator"), r.get("values") or []
        if op == "In" and values:
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn" and values:
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    query = {"limit": str(MAX_LISTED_NODES)}
    if parts:
        query["labelSelector"] = ",".join(parts)
    names = [
        r.get("values") or []
        for r in term.get("matchFields") or []
        if r.get("key") == "metadata.name" and r.get("operator") == "In"
    ]
    if len(names) == 1 and len(names[0]) == 1:
        query["fieldSelector"] = f"metadata.name={names[0][0]}"
    return query


def pinned_names(terms: list[dict[str, Any]]) -> list[str]:
    """The node names a node-local volume's affinity spells out (kubernetes.io/hostname or
    metadata.name In ...): what to name when none of them exists any more."""
    names: list[str] = []
    for term in terms:
        for r in (term.get("matchExpressions") or []) + (term.get("matchFields") or []):
            if r.get("key") in (LABEL_HOSTNAME, "metadata.name") and r.get("operator") == "In":
                names.extend(str(v) for v in r.get("values") or [])
    return sorted(set(names))


def volume_terms(pv: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The node selector terms a PersistentVolume's nodes must satisfy; None when any node
    may mount it (no required node affinity)."""
    required = (((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required")) or None
    if required is None:
        return None
    return list(required.get("nodeSelectorTerms") or [])


def _pod(pods: list[dict[str, Any]], member: str) -> dict[str, Any]:
    return next((p for p in pods if (p.get("metadata") or {}).get("name") == member), {})


def unschedulable(pods: list[dict[str, Any]], member: str) -> str:
    """The scheduler's word when it found no node for `member`'s Pod, else ''."""
    return pod_rules.unschedulable(_pod(pods, member))


def cannot_run(pods: list[dict[str, Any]], member: str) -> str:
    """Why the kubelet cannot run `member`'s etcd container, or that it restarted since its
    Pod was made, as the plan says it (it halts the roll on the same); '' while it runs or is
    being started."""
    pod = _pod(pods, member)
    trouble = pod_rules.container_trouble(pod) or pod_rules.restart_trouble(pod)
    return trouble.get("why", "")


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
    secret_names: list[str] | None = None
    recovery_selector: str | None = None
    own_pod: dict[str, Any] | None = None

    def listed(
        self, group_version: str, resource: str, kind: str, selector: str
    ) -> list[dict[str, Any]]:
        """The namespace's objects of one kind that carry `selector`, made lean."""
        path = namespaced(group_version, self.namespace, resource)
        return lean(self.reader.items(path, selector, kind, group_version))

    def pods(self) -> list[Any]:
        return self.listed("v1", "pods", "Pod", self.selector)

    def node(self, name: str, node: dict[str, Any] | None = None) -> dict[str, Any]:
        """node_facts of one node, read with its Lease (the Node too unless given)."""
        if node is None:
            node = self.reader.get(f"/api/v1/nodes/{quote(name, safe='')}")
        lease = self.reader.get(namespaced(LEASE_GROUP_VERSION, NODE_LEASES, "leases", name))
        return node_facts(node, lease, self.reader.date)

    def nodes_of(self, pods: list[dict[str, Any]]) -> dict[str, Any] | None:
        """What the plan needs of each node a member Pod was placed on (node_facts), by node
        name; None when Nodes cannot be read (the namespaced install), so no member is ever
        judged by a node nobody could see."""
        names = sorted({str((p.get("spec") or {}).get("nodeName") or "") for p in pods} - {""})
        try:
            return {name: self.node(name) for name in names}
        except KubeError as error:
            if error.reason == "Forbidden":
                return None
            raise

    def admitted(self, terms: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The Nodes that satisfy one of `terms` (a volume's node affinity), the Ready first."""
        found: dict[str, dict[str, Any]] = {}
        for term in terms:
            query = term_query(term)
            try:
                body = self.reader.get("/api/v1/nodes", query) or {}
            except KubeError as error:
                if error.reason == "Forbidden":
                    raise
                # A selector the API server does not take: every node, judged here.
                body = self.reader.get("/api/v1/nodes", {"limit": query["limit"]}) or {}
            for node in body.get("items") or []:
                if term_matches(term, node):
                    found[str(node["metadata"]["name"])] = node

        def rank(node: dict[str, Any]) -> tuple[bool, str]:
            return node_facts(node, None, "")["ready"] != "True", str(node["metadata"]["name"])

        return sorted(found.values(), key=rank)

    def volume(self, claim: dict[str, Any], nodes: dict[str, Any]) -> dict[str, Any]:
        """Where a claim's volume can be mounted: {bound} while no volume is bound; else
        {bound, pv, found} and, for a volume found, `anywhere` (no node affinity) or the
        `nodes` its affinity admits (at most MAX_VOLUME_NODES, the Ready first; their facts
        added to `nodes`) and the node names it `pinned`."""
        name = str((claim.get("spec") or {}).get("volumeName") or "")
        if not name:
            return {"bound": False}
        pv = self.reader.get(f"/api/v1/persistentvolumes/{quote(name, safe='')}")
        if pv is None:
            return {"bound": True, "pv": name, "found": False}
        terms = volume_terms(pv)
        if terms is None:
            return {"bound": True, "pv": name, "found": True, "anywhere": True}
        admitted = self.admitted(terms)[:MAX_VOLUME_NODES]
        for node in admitted:
            node_name = str(node["metadata"]["name"])
            if node_name not in nodes:
                nodes[node_name] = self.node(node_name, node)
        return {
            "bound": True,
            "pv": name,
            "found": True,
            "anywhere": False,
            "nodes": [str(n["metadata"]["name"]) for n in admitted],
            "pinned": pinned_names(terms),
        }

    def volumes_of(
        self, pods: list[dict[str, Any]], claims: list[dict[str, Any]], nodes: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Where the volume of each member's claim can go (volume), by claim name, for the
        members whose Pod is missing, not placed, or on a node that is not usable: the others
        run where they are. None when PersistentVolumes or Nodes cannot be read: no member is
        then judged by where its volume can go."""
        placed = {
            str((p.get("metadata") or {}).get("name") or ""): str(
                (p.get("spec") or {}).get("nodeName") or ""
            )
            for p in pods
        }
        volumes: dict[str, Any] = {}
        try:
            for claim in claims:
                meta = claim.get("metadata") or {}
                member = str((meta.get("labels") or {}).get(LABEL_MEMBER) or "") or str(
                    meta.get("name") or ""
                ).removesuffix("-data")
                node = placed.get(member, "")
                if node and usable(nodes.get(node)):
                    continue
                volumes[str(meta.get("name") or "")] = self.volume(claim, nodes)
        except KubeError as error:
            if error.reason == "Forbidden":
                return None
            raise
        return volumes

    def kubernetes(self) -> dict[str, Any]:
        sel, recovery = self.selector, self.recovery_selector
        facts: dict[str, Any] = {
            "pods": self.pods(),
            "claims": self.listed("v1", "persistentvolumeclaims", "PersistentVolumeClaim", sel),
            "services": self.listed("v1", "services", "Service", sel),
            "budgets": self.listed("policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", sel),
            "secrets": [],
            # A quorum recovery's Job and its Pods carry another app name than the members
            # (names.recovery_selector), so the member selector never takes them. Only asked
            # for by a run that may recover: each list costs a request on every look.
            "recovery_jobs": self.listed("batch/v1", "jobs", "Job", recovery) if recovery else [],
            "recovery_pods": self.listed("v1", "pods", "Pod", recovery) if recovery else [],
            # The image a recovery Job runs: the operator's own.
            "image": own_image(self.reader, self.own_pod),
        }
        facts["nodes"] = self.nodes_of(facts["pods"])
        facts["volumes"] = (
            None
            if facts["nodes"] is None
            else self.volumes_of(facts["pods"], facts["claims"], facts["nodes"])
        )
        if self.secret_selector is not None and self.secret_names is not None:
            facts["secrets"] = self.named_secrets(self.secret_names, self.secret_selector)
        elif self.secret_selector is not None:
            facts["secrets"] = self.listed("v1", "secrets", "Secret", self.secret_selector)
        if self.backups:
            # Every EtcdBackup of the namespace: the plan picks this cluster's (by clusterName,
            # which no label carries) for the snapshot a minor upgrade starts with.
            facts["backups"] = self.listed(API_VERSION, "etcdbackups", "EtcdBackup", "")
        return facts

    def named_secrets(self, names: list[str], selector: str) -> list[dict[str, Any]]:
        """The Secrets of `names` that exist and carry `selector`, each read by name: the
        same Secrets a list by `selector` would return of them, for an account that may not
        list Secrets."""
        found = []
        for name in dict.fromkeys(names):
            secret = self.reader.get(namespaced("v1", self.namespace, "secrets", name))
            if secret is not None and selected(secret, selector):
                found.append(secret)
        return lean(found)


def selected(obj: dict[str, Any], selector: str) -> bool:
    """Whether `obj`'s labels match an equality selector (`k=v,k2=v2`, what the runbooks
    select Secrets with)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, (t.strip() for t in selector.split(","))):
        key, _, value = term.partition("=")
        if labels.get(key.strip()) != value.strip().lstrip("="):
            return False
    return True


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
    """Connection options for the etcd client (`client_material`, in private files); empty
    when no Secret holds them."""
    chosen = client_material(secrets, server, client)
    if chosen is None:
        return {}
    ca, cert, key = (base64.b64decode(v).decode() for v in chosen)
    return {
        "ca_cert": private_file("ca.crt", ca),
        "client_cert": private_file("client.crt", cert),
        "client_key": private_file("client.key", key),
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


def reach_dialable(
    etcd: dict[str, Any],
    forwarder: Forwarder | None,
    nodes: dict[str, Any] | None,
    pods: list[dict[str, Any]],
) -> dict[str, Any]:
    """reach, of the Pods this look may dial (dialable)."""
    return reach(etcd, forwarder, dialable(pods, nodes))


def probe_until_answering(
    pods: Callable[[], list[dict[str, Any]]],
    reach_pods: Callable[[list[dict[str, Any]]], dict[str, Any]],
    probe: Callable[[dict[str, str], dict[str, str]], bool],
    members: list[str],
    deadline: float,
    sleep: Callable[[float], None] = time.sleep,
    stopped: Callable[[], bool] = never,
    failing: bool = False,
) -> None:
    """Reads only the member Pods and asks only `members` for their own status, every
    PROBE_INTERVAL, until they answer, the scheduler finds no node for one of them (or, with
    `failing`, the kubelet cannot run one: cannot_run), `deadline` (monotonic) passes or the
    run is asked to stop: the caller then looks at everything again."""
    while time.monotonic() < deadline and not stopped():
        sleep(PROBE_INTERVAL)
        seen = pods()
        if any(unschedulable(seen, m) or (failing and cannot_run(seen, m)) for m in members):
            return
        where = reach_pods(seen)
        if probe(where["endpoints"], where["addresses"]):
            return


def observe(params: dict[str, Any]) -> dict[str, Any]:
    """The module's work: see the module's RETURN for the shape."""
    etcd = params.get("etcd") or {}
    check(etcd)
    observer = _observer(params, etcd)
    forwarder = _forwarder(params, etcd)
    wait = params.get("wait_for") or {}
    deadline = time.monotonic() + float(wait.get("timeout") or 0)
    stopped = partial(stop_asked, str(wait.get("stop_file") or ""))
    going = (
        wait_pods_gone(observer, wait["pods_gone"], deadline, stopped=stopped)
        if wait.get("pods_gone")
        else []
    )
    while True:
        facts, result, tls = _look(etcd, observer, forwarder)
        if going:
            # The facts go back with the failure, as below.
            result.update(_pods_still_going(going, wait, stopped))
            return result
        waiting = [
            m for m in awaited(wait) if not member_healthy(result["info"], m, peer_url(etcd, m))
        ]
        if not waiting:
            return result
        if failure := _wait_failure(result, facts["pods"], wait, waiting, deadline, stopped):
            result.update(failure)
            return result
        if not etcd.get("enabled"):
            time.sleep(PROBE_INTERVAL)
            continue
        probe_until_answering(
            # Every member Pod is read (one that cannot run is never dialled, but stops the
            # wait); only those dialable are reached.
            observer.pods,
            partial(reach_dialable, etcd, forwarder, facts["nodes"]),
            partial(answering, tls=tls, members=waiting),
            waiting,
            deadline,
            stopped=stopped,
            failing=bool(wait.get("stop_when_failing")),
        )


def _observer(params: dict[str, Any], etcd: dict[str, Any]) -> Observer:
    """What reads the Kubernetes side of a look, with the module's credentials."""
    reader = KubeReader(credentials(params.get("kubeconfig"), params.get("context")), 10.0)
    return Observer(
        reader=reader,
        namespace=params["namespace"],
        selector=params["selector"],
        secret_selector=params.get("secret_selector"),
        secret_names=params.get("secret_names"),
        timeout=float(etcd.get("timeout") or 5),
        backups=bool(params.get("backups")),
        recovery_selector=params.get("recovery_selector") or None,
        own_pod=params.get("own_pod"),
    )


def _forwarder(params: dict[str, Any], etcd: dict[str, Any]) -> Forwarder | None:
    """The port-forwards that reach members from outside the cluster, when asked for; None
    when members are dialled by their DNS names."""
    forward = etcd.get("port_forward")
    if not forward:
        return None
    return Forwarder(
        script=forward["script"],
        kubectl=forward.get("kubectl") or "kubectl",
        namespace=params["namespace"],
        max_seconds=int(forward.get("max_seconds") or 3600),
        state_dir=forward.get("state_dir") or "",
    )


def _look(
    etcd: dict[str, Any], observer: Observer, forwarder: Forwarder | None
) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """One look: the Kubernetes facts, then (when etcd is to be asked) etcd's answer through
    the Pods this look may dial. Returns the facts, the result and the TLS files used."""
    # The runbook's own clock, compared only with times it wrote itself (a rolled member's
    # healthy-since mark), never with a kubelet's or the API server's.
    observed_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    facts = observer.kubernetes()
    result: dict[str, Any] = {
        **facts,
        "endpoints": {},
        "addresses": {},
        "forward_failed": {},
        "observed_at": observed_at,
    }
    result.update(info={}, info_error="etcd was not asked")
    tls: dict[str, str] = {}
    if etcd.get("enabled"):
        result.update(reach_dialable(etcd, forwarder, facts["nodes"], facts["pods"]))
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
    return facts, result, tls


def _pods_still_going(
    going: list[str], wait: dict[str, Any], stopped: Callable[[], bool]
) -> dict[str, str]:
    """Member Pods still being deleted when the wait for them ended: asked to stop, or out
    of time."""
    if stopped():
        return {
            "wait_error": f"the run was asked to stop: {', '.join(going)} still going",
            "wait_reason": "Stopped",
        }
    return {
        "wait_error": (
            f"member Pods still being deleted after {wait['timeout']}s: {', '.join(going)}"
        )
    }


def _wait_failure(
    result: dict[str, Any],
    pods: list[dict[str, Any]],
    wait: dict[str, Any],
    waiting: list[str],
    deadline: float,
    stopped: Callable[[], bool],
) -> dict[str, str]:
    """Why the wait for `waiting` ends without them healthy, or {} to go on waiting."""
    for member in waiting:
        if why := unschedulable(pods, member):
            # No node takes it: waiting out the timeout would change nothing, and the plan
            # says why in status.
            return {
                "wait_error": f"member {member}'s Pod cannot be scheduled: {why}",
                "wait_reason": "Unschedulable",
            }
        if wait.get("stop_when_failing") and (why := cannot_run(pods, member)):
            # A roll's new Pod that cannot run: the roll halts now, not after the timeout.
            return {
                "wait_error": f"member {member}'s Pod cannot run: {why}",
                "wait_reason": "CannotRun",
            }
    if time.monotonic() >= deadline:
        # The facts go back with the failure: the role still reports from them and
        # closes the port-forwards this look opened.
        return {
            "wait_error": (
                f"member {', '.join(waiting)} was not healthy within {wait['timeout']}s: "
                f"{result['info_error'] or 'etcd does not report it healthy yet'}"
            )
        }
    if stopped():
        # Nothing was changed; the run ends at its next task boundary (the watcher's
        # ero_task_boundary), so no task acts on this look.
        return {
            "wait_error": (
                f"the run was asked to stop while member {', '.join(waiting)} was awaited"
            ),
            "wait_reason": "Stopped",
        }
    return {}
