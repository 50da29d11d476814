"""The Kubernetes objects of an etcd cluster, built as data from the plan (etcd_plan.py).

Built in Python rather than rendered from YAML templates: a value a user wrote (an annotation,
a Secret name, a toleration) is placed into the object as a value, so no quoting mistake can
turn it into YAML structure, and the member Pod is checked by unit tests against the
`restricted` Pod Security Standard (tests/unit/test_etcd_manifests.py).

Every function takes the plan (`etcd_cluster_plan`'s result) and returns plain dicts for
kubernetes.core.k8s.
"""

from __future__ import annotations

import math
from typing import Any

from etcd_runbook.names import (
    ANN_BOOTSTRAP_STARTED,
    ANN_CLUSTER_ID,
    ANN_DELETED_BY_RUNBOOK,
    ANN_HEALTHY_RUN,
    ANN_HEALTHY_SINCE,
    ANN_INITIAL_CLUSTER,
    ANN_INITIAL_STATE,
    ANN_MEMBER_ID,
    ANN_POD_HASH,
    ANN_RECOVERY,
    ANN_RESTORE_PENDING,
    ANN_RESTORED_FROM,
    ANN_VERSION,
    GROUP,
    LABEL_CLUSTER,
    LABEL_MEMBER,
    LABEL_VERSION,
    LABEL_VOTER,
    MEMBER_DATA_DIR,
)
from etcd_runbook.rules.cluster.common import PlanError, parse_quantity, version_tuple
from etcd_runbook.rules.cluster.spec import (
    FEATURE_GATES,
    MAX_DEFRAG_MEMBER_TIMEOUT,
    member_image,
    pod_security_context,
)
from etcd_runbook.rules.etcd_restore_plan import recovery_job

DATA_DIR = MEMBER_DATA_DIR


def selector_labels(p: dict[str, Any]) -> dict[str, str]:
    return {"app.kubernetes.io/name": "etcd", LABEL_CLUSTER: p["name"]}


def cluster_labels(p: dict[str, Any]) -> dict[str, str]:
    return {
        **selector_labels(p),
        "app.kubernetes.io/instance": p["name"],
        "app.kubernetes.io/managed-by": "etcd-runbook-operator",
    }


def owner_references(p: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": f"{GROUP}/v1alpha1",
            "kind": "EtcdCluster",
            "name": p["name"],
            "uid": p["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def scheme(p: dict[str, Any]) -> str:
    return "https" if p["spec"]["tls"] else "http"


def member_fqdn(p: dict[str, Any], member: str) -> str:
    return f"{member}.{p['name']}.{p['namespace']}.svc.{p['domain']}"


def peer_url(p: dict[str, Any], member: str) -> str:
    return f"{scheme(p)}://{member_fqdn(p, member)}:2380"


def initial_cluster_entry(peer: str) -> str:
    """`<member>=<peer URL>` of --initial-cluster, the member named by its URL's first label."""
    host = peer.split("://", 1)[-1].split(":", 1)[0]
    return f"{host.split('.', 1)[0]}={peer}"


def token(p: dict[str, Any]) -> str:
    return f"{p['name']}-{(p['uid'] or 'local')[:8]}"


NODE_LOSS_TOLERATIONS = [
    {"key": f"node.kubernetes.io/{taint}", "operator": "Exists", "effect": "NoExecute"}
    for taint in ("not-ready", "unreachable")
]


def _affinity(p: dict[str, Any]) -> dict[str, Any]:
    """The user's affinity, with member spreading over nodes added to its podAntiAffinity."""
    pod = p["spec"]["pod"]
    affinity = {k: v for k, v in (pod["affinity"] or {}).items()}
    anti = dict(affinity.get("podAntiAffinity") or {})
    term = {
        "labelSelector": {"matchLabels": selector_labels(p)},
        "topologyKey": "kubernetes.io/hostname",
    }
    if pod["anti_affinity"] == "required":
        key = "requiredDuringSchedulingIgnoredDuringExecution"
        anti[key] = [*(anti.get(key) or []), term]
    else:
        key = "preferredDuringSchedulingIgnoredDuringExecution"
        anti[key] = [*(anti.get(key) or []), {"weight": 100, "podAffinityTerm": term}]
    affinity["podAntiAffinity"] = anti
    return affinity


def member_claim(
    p: dict[str, Any], member: str, initial_cluster: str, initial_state: str
) -> dict[str, Any]:
    """A member's claim: its data, and the record of how its etcd first starts (a seed
    `new`, votes at once; a learner `existing`, votes once promoted)."""
    spec = p["spec"]
    claim_spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": spec["storage_size"]}},
    }
    if spec["storage_class"]:
        claim_spec["storageClassName"] = spec["storage_class"]
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": f"{member}-data",
            "namespace": p["namespace"],
            "labels": {
                **cluster_labels(p),
                LABEL_MEMBER: member,
                LABEL_VOTER: "true" if initial_state == "new" else "false",
            },
            "annotations": {
                ANN_INITIAL_CLUSTER: initial_cluster,
                ANN_INITIAL_STATE: initial_state,
                ANN_VERSION: p["versions"].get(member, spec["version"]),
            },
        },
        "spec": claim_spec,
    }


class UnmountableSecret(ValueError):
    """A member Pod would mount a TLS Secret the plan did not find fit to mount."""


def check_mountable(p: dict[str, Any], member: str) -> None:
    """The one check every member Pod passes, whichever step makes it (a new cluster, a heal,
    a Pod made again, an added or replacing member, a roll): the plan's `tls_unmountable`, a
    Secret the Pod would mount that is missing or, named in spec.tls.secrets, not labelled
    for the cluster. The plan already makes no such Pod; this stops any step that would."""
    if unfit := p.get("tls_unmountable"):
        raise UnmountableSecret(
            f"not making the Pod of {member}: it would mount Secret "
            f"{', '.join(sorted(unfit.values()))}, not fit to mount (see the Degraded condition)"
        )


def member_pod(p: dict[str, Any], member: str, claim: dict[str, Any]) -> dict[str, Any]:
    """A member's Pod, made from its claim's record. A claim of a member that has joined says
    `existing` with only the member itself in --initial-cluster: with its data, etcd ignores
    both; with an empty data dir, etcd finds no peer to ask and refuses to start, so the member
    never comes back under its old identity without its data."""
    check_mountable(p, member)
    spec = p["spec"]
    pod = spec["pod"]
    version = p["versions"].get(member, spec["version"])
    voter = ((claim.get("metadata") or {}).get("labels") or {}).get(LABEL_VOTER, "true")
    args = _etcd_args(p, member, claim, version)
    mounts: list[dict[str, Any]] = [{"name": "data", "mountPath": "/var/lib/etcd"}]
    volumes: list[dict[str, Any]] = [
        {"name": "data", "persistentVolumeClaim": {"claimName": f"{member}-data"}}
    ]
    if spec["tls"]:
        args += _tls_args(spec, version)
        for purpose in ("peer", "server"):
            mounts.append(
                {
                    "name": f"{purpose}-tls",
                    "mountPath": f"/etc/etcd/tls/{purpose}",
                    "readOnly": True,
                }
            )
            # 0440: readable by the fsGroup etcd runs in, no one else.
            volumes.append(
                {
                    "name": f"{purpose}-tls",
                    "secret": {"secretName": spec["secrets"][purpose], "defaultMode": 0o440},
                }
            )
    container = _etcd_container(spec, version, args, mounts)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": member,
            "namespace": p["namespace"],
            "labels": {
                **pod["labels"],
                **cluster_labels(p),
                LABEL_MEMBER: member,
                LABEL_VERSION: version,
                LABEL_VOTER: voter,
            },
            "annotations": {**pod["annotations"], ANN_POD_HASH: p["pod_hashes"][member]},
            "ownerReferences": owner_references(p),
        },
        "spec": _member_pod_spec(p, member, container, volumes),
    }


def _etcd_args(p: dict[str, Any], member: str, claim: dict[str, Any], version: str) -> list[str]:
    """etcd's flags for the member: its URLs by its stable DNS name, and how it starts as
    its claim's record says (a new cluster, or joining an existing one)."""
    spec = p["spec"]
    fqdn = member_fqdn(p, member)
    url = scheme(p)
    record = (claim.get("metadata") or {}).get("annotations") or {}
    return [
        f"--name={member}",
        f"--data-dir={DATA_DIR}",
        f"--listen-peer-urls={url}://0.0.0.0:2380",
        f"--listen-client-urls={url}://0.0.0.0:2379",
        "--listen-metrics-urls=http://0.0.0.0:2381",
        f"--advertise-client-urls={url}://{fqdn}:2379",
        f"--initial-advertise-peer-urls={url}://{fqdn}:2380",
        f"--initial-cluster={record[ANN_INITIAL_CLUSTER]}",
        f"--initial-cluster-state={record[ANN_INITIAL_STATE]}",
        f"--initial-cluster-token={token(p)}",
        f"--quota-backend-bytes={spec['quota_bytes']}",
        *settings_args(p, version),
    ]


def settings_args(p: dict[str, Any], version: str) -> list[str]:
    """etcd's flags from spec.etcd (spec.py checked them), only those set: etcd's defaults
    otherwise; auto-compaction always (the operator's retention unless the spec sets one).
    Feature gates as the member's version spells them: --feature-gates from 3.6, the
    experimental flag each was before."""
    settings = p["spec"]["etcd"]
    mode = settings["auto_compaction_mode"]
    retention = settings["auto_compaction_retention"] or p["auto_compaction_retention"]
    args = [f"--auto-compaction-mode={mode}", f"--auto-compaction-retention={retention}"]
    flags = (
        ("--heartbeat-interval", "heartbeat_ms"),
        ("--election-timeout", "election_ms"),
        ("--snapshot-count", "snapshot_count"),
        ("--max-request-bytes", "max_request_bytes"),
        ("--max-txn-ops", "max_txn_ops"),
        ("--log-level", "log_level"),
    )
    args += [f"{flag}={settings[key]}" for flag, key in flags if settings[key] is not None]
    gates = settings["feature_gates"]
    if not gates:
        return args
    if version_tuple(version) >= (3, 6, 0):
        listed = ",".join(f"{name}={str(on).lower()}" for name, on in sorted(gates.items()))
        return [*args, f"--feature-gates={listed}"]
    # A member still on an older minor than the spec's (an upgrade under way) gets only the
    # gates its version has a flag for; the spec's version was checked to have them all.
    minor = ".".join(version.split(".")[:2])
    return args + [
        f"{FEATURE_GATES[name][minor]}={str(on).lower()}"
        for name, on in sorted(gates.items())
        if minor in FEATURE_GATES[name]
    ]


def _tls_args(spec: dict[str, Any], version: str) -> list[str]:
    """Clients and peers both prove who they are with certificates from the mounted
    Secrets; with the certificates the role issues, a peer's address is not checked against
    them (peer_san_check_off says why)."""
    args = [
        "--client-cert-auth=true",
        "--trusted-ca-file=/etc/etcd/tls/server/ca.crt",
        "--cert-file=/etc/etcd/tls/server/tls.crt",
        "--key-file=/etc/etcd/tls/server/tls.key",
        "--peer-client-cert-auth=true",
        "--peer-trusted-ca-file=/etc/etcd/tls/peer/ca.crt",
        "--peer-cert-file=/etc/etcd/tls/peer/tls.crt",
        "--peer-key-file=/etc/etcd/tls/peer/tls.key",
    ]
    if spec["tls_own"]:
        args.append(peer_san_check_off(version))
    return args


def _etcd_container(
    spec: dict[str, Any], version: str, args: list[str], mounts: list[dict[str, Any]]
) -> dict[str, Any]:
    """The etcd container: locked down to the `restricted` standard, Ready when the member
    serves linearizable reads, restarted only when it stops serving its own reads for longer
    than any defragmentation may take (health_probes)."""
    container: dict[str, Any] = {
        "name": "etcd",
        "image": member_image(spec, version),
        "imagePullPolicy": "IfNotPresent",
        "command": ["/usr/local/bin/etcd"],
        "args": args,
        "ports": [
            {"name": "client", "containerPort": 2379, "protocol": "TCP"},
            {"name": "peer", "containerPort": 2380, "protocol": "TCP"},
            {"name": "metrics", "containerPort": 2381, "protocol": "TCP"},
        ],
        **health_probes(version),
        # A failed start leaves etcd's last log lines in the Pod's status, where the runbook
        # reads why (the data-loss guard's words among them).
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": mounts,
    }
    if spec["pod"]["resources"]:
        container["resources"] = spec["pod"]["resources"]
        if env := go_runtime_env(spec["pod"]["resources"]):
            container["env"] = env
    return container


# The releases that answer /livez and /readyz (etcd's health split: liveness that needs no
# quorum, readiness that does), the first of each minor: 3.5.11 (read in its source) and
# 3.4.31 (the oldest 3.4 the test bed runs: its earlier patches keep /health here).
HEALTH_SPLIT = {(3, 4): 31, (3, 5): 11}
# How long a member may fail /livez before the kubelet restarts it: a defragmentation blocks
# the member's reads for its whole rewrite, and a run gives one member at most
# spec.defragmentation.memberTimeout (MAX_DEFRAG_MEMBER_TIMEOUT): five minutes more than that
# (15 minutes) never cuts one short.
LIVENESS_PERIOD = 10
LIVENESS_FAILURES = (MAX_DEFRAG_MEMBER_TIMEOUT + 300) // LIVENESS_PERIOD


def has_health_split(version: str) -> bool:
    major, minor, patch = version_tuple(version)
    first = HEALTH_SPLIT.get((major, minor))
    return patch >= first if first is not None else (major, minor) > (3, 5)


def health_probes(version: str) -> dict[str, Any]:
    """The container's probes for an etcd version.

    Ready = this member serves linearizable reads (it sees a leader and is caught up),
    checked every 2 s: a restarted member's first probe comes before etcd is up, and the next
    one is when the Pod turns Ready (with 5 s, a healed member was healthy at 7 s and Ready at
    12 s); 5 failures still take 10 s. A learner stays Ready (`exclude=non_learner`): a roll waits
    for every member's Pod Ready, learners' included, and the client Service selects voters
    by label, not by readiness alone. NOSPACE keeps it Ready (/readyz does not count it;
    /health is told to exclude it): under it a member still serves reads and deletes, which
    the client Service must keep reaching, and the runbook recovers it.

    Where etcd has /livez, it is the liveness probe: a serializable read, which needs no
    quorum, so a member cut off from its peers is never restarted for it (restarting would
    not help, and would replay its log). Patient (LIVENESS_FAILURES): a defragmentation stops
    reads while it rewrites. A startup probe on the same path holds liveness off while a
    member replays a long log or receives a large snapshot. Older releases get no liveness
    probe: their /health needs a leader."""
    if not has_health_split(version):
        return {"readinessProbe": _probe("/health?exclude=NOSPACE", 2, 2, 5)}
    return {
        "readinessProbe": _probe("/readyz?exclude=non_learner", 2, 2, 5),
        "startupProbe": _probe("/livez", 2, 2, 1800),
        "livenessProbe": _probe("/livez", LIVENESS_PERIOD, 5, LIVENESS_FAILURES),
    }


def _probe(path: str, period: int, timeout: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": 2381},
        "periodSeconds": period,
        "timeoutSeconds": timeout,
        "failureThreshold": failures,
    }


def go_runtime_env(resources: dict[str, Any]) -> list[dict[str, str]]:
    """GOMAXPROCS and GOMEMLIMIT from the container's limits. Go sizes its threads to the
    node's cores and collects garbage against no bound: a member limited to one CPU on a large
    node is throttled across many threads, and one limited in memory is killed before its
    collector works harder. GOMAXPROCS is the CPU limit rounded up; GOMEMLIMIT 90% of the
    memory limit, room for what Go's heap does not count. A limit that is not set, or cannot
    be read, sets nothing."""
    limits = resources.get("limits") or {}
    env = []
    cpu = _cpu_cores(limits.get("cpu"))
    if cpu is not None:
        env.append({"name": "GOMAXPROCS", "value": str(max(1, math.ceil(cpu)))})
    try:
        memory = parse_quantity(limits["memory"]) if "memory" in limits else None
    except PlanError:
        memory = None
    if memory:
        env.append({"name": "GOMEMLIMIT", "value": str(memory * 9 // 10)})
    return env


def _cpu_cores(value: Any) -> float | None:
    """A CPU quantity ("500m", "2", 1.5) in cores; None when unset or unreadable."""
    if value is None or isinstance(value, bool):
        return None
    text = str(value).strip()
    try:
        cores = float(text[:-1]) / 1000 if text.endswith("m") else float(text)
    except ValueError:
        return None
    return cores if cores > 0 else None


def _member_pod_spec(
    p: dict[str, Any], member: str, container: dict[str, Any], volumes: list[dict[str, Any]]
) -> dict[str, Any]:
    """The member Pod's spec: its stable DNS name, non-root with the data dir owned through
    fsGroup, placed as spec.pod says, and never evicted by Kubernetes for a lost node."""
    pod = p["spec"]["pod"]
    pod_spec: dict[str, Any] = {
        "hostname": member,
        "subdomain": p["name"],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "affinity": _affinity(p),
        # Ownership is fixed once, not walked through the whole database at every start.
        "securityContext": pod_security_context(pod, {"fsGroupChangePolicy": "OnRootMismatch"}),
        "containers": [container],
        "volumes": volumes,
    }
    if pod.get("image_pull_secrets"):
        pod_spec["imagePullSecrets"] = pod["image_pull_secrets"]
    if pod.get("topology_spread"):
        pod_spec["topologySpreadConstraints"] = [
            # Spread among this cluster's members unless the constraint says among what.
            {"labelSelector": {"matchLabels": selector_labels(p)}, **c}
            for c in pod["topology_spread"]
        ]
    if pod["node_selector"]:
        pod_spec["nodeSelector"] = pod["node_selector"]
    # Kubernetes would evict a member Pod 300 s after its node stops answering, leaving a Pod
    # that never finishes going (no kubelet confirms it). The operator decides instead, after
    # spec.nodeLossTimeout, and removes the member from etcd before it deletes the Pod.
    pod_spec["tolerations"] = [*(pod["tolerations"] or []), *NODE_LOSS_TOLERATIONS]
    if pod["priority_class"]:
        pod_spec["priorityClassName"] = pod["priority_class"]
    return pod_spec


def services(p: dict[str, Any]) -> list[dict[str, Any]]:
    """The headless Service (every member's DNS name, published before it is Ready: peers
    must resolve each other to form a quorum), the client Service (voting members that are
    Ready; learners serve no clients) and the metrics Service (every member's metrics port,
    Ready or not: a member without quorum is unready, and its metrics are what tell why)."""
    meta = {
        "namespace": p["namespace"],
        "labels": cluster_labels(p),
        "ownerReferences": owner_references(p),
    }
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": p["name"], **meta},
            "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": True,
                "selector": selector_labels(p),
                "ports": [
                    {"name": "client", "port": 2379, "targetPort": 2379, "protocol": "TCP"},
                    {"name": "peer", "port": 2380, "targetPort": 2380, "protocol": "TCP"},
                ],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": f"{p['name']}-client", **meta},
            "spec": {
                "type": "ClusterIP",
                "selector": {**selector_labels(p), LABEL_VOTER: "true"},
                "ports": [{"name": "client", "port": 2379, "targetPort": 2379, "protocol": "TCP"}],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": f"{p['name']}-metrics",
                **meta,
                "labels": {**meta["labels"], "app.kubernetes.io/component": "metrics"},
            },
            "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": True,
                "selector": selector_labels(p),
                "ports": [
                    {"name": "metrics", "port": 2381, "targetPort": "metrics", "protocol": "TCP"}
                ],
            },
        },
    ]


def disruption_budget(p: dict[str, Any]) -> dict[str, Any]:
    """A drain may evict a voting member only while a quorum of the voting members etcd lists
    stays (learners are not counted, and do not count)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": p["name"],
            "namespace": p["namespace"],
            "labels": cluster_labels(p),
            "ownerReferences": owner_references(p),
        },
        "spec": {
            "minAvailable": p["pdb_min_available"],
            "selector": {"matchLabels": {**selector_labels(p), LABEL_VOTER: "true"}},
        },
    }


def peer_san_check_off(version: str) -> str:
    """The flag that stops a member checking a peer's address against the DNS names of its
    certificate. A joining member's DNS record appears only once its Pod has an address, a
    moment after etcd started in it; until then every member refused its connections, so each
    learner failed to join and crash-looped (about 45 s lost per learner of a 3-member create).
    Set only with the certificates the role issues: their CA is the cluster's own and signs
    nothing but its members, so a certificate it signed is a member wherever it connects from.
    With a user's Secrets (a CA that may sign other things) etcd's check stays. etcd 3.6
    dropped the flag's `experimental-` prefix."""
    major, minor = (int(x) for x in version.split(".")[:2])
    prefix = "" if (major, minor) >= (3, 6) else "experimental-"
    return f"--{prefix}peer-skip-client-san-verification=true"


def cert_profiles(p: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The certificates the role issues when spec.tls.secrets is unset. etcd checks a peer's
    client certificate against its address by DNS, so the peer certificate names every
    possible member; the server certificate also the client Service and loopback (a
    port-forward of a run outside the cluster)."""
    name, ns, domain = p["name"], p["namespace"], p["domain"]
    members = [f"{name}-{i}" for i in range(10)]
    member_dns = (
        [f"{m}.{name}.{ns}.svc.{domain}" for m in members]
        + [f"{m}.{name}.{ns}.svc" for m in members]
        + [f"*.{name}.{ns}.svc.{domain}"]
    )
    client_service = f"{name}-client"
    service_dns = [
        client_service,
        f"{client_service}.{ns}",
        f"{client_service}.{ns}.svc",
        f"{client_service}.{ns}.svc.{domain}",
    ]
    return {
        "peer": {
            "common_name": f"{name} peer",
            "sans": [f"DNS:{d}" for d in member_dns],
            "usage": ["serverAuth", "clientAuth"],
        },
        "server": {
            "common_name": f"{name} server",
            "sans": [f"DNS:{d}" for d in [*member_dns, *service_dns, "localhost"]]
            + ["IP:127.0.0.1", "IP:::1"],
            "usage": ["serverAuth", "clientAuth"],
        },
        "client": {"common_name": "etcd-runbook-operator", "sans": [], "usage": ["clientAuth"]},
    }


def tls_secrets(
    p: dict[str, Any], material: dict[str, dict[str, str]], purposes: list[str]
) -> list[dict[str, Any]]:
    """The Secrets of the role's own TLS material, one per purpose; the CA's is Opaque (it holds
    the CA key, which no Pod mounts)."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque" if purpose == "ca" else "kubernetes.io/tls",
            "metadata": {
                "name": p["spec"]["secrets"][purpose],
                "namespace": p["namespace"],
                "labels": {**cluster_labels(p), f"{GROUP}/tls": purpose},
                "ownerReferences": owner_references(p),
            },
            "stringData": material[purpose],
        }
        for purpose in purposes
    ]


def doomed_pods(p: dict[str, Any], members: list[str], reason: str) -> list[dict[str, Any]]:
    """The member Pods a runbook deletes, each with the mark it writes first: the watcher
    then knows the deletion for the runbook's own and does not preempt the run."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": member,
                "namespace": p["namespace"],
                "annotations": {ANN_DELETED_BY_RUNBOOK: reason},
            },
        }
        for member in members
    ]


def tls_restored_ca(p: dict[str, Any], material: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    """The CA Secret put back from what the members trust (the plan's `tls_ca_from`: the
    ca.crt of that Secret), its certificate only: the private key was kept nowhere else.
    Annotated with where it came from; [] when the plan puts nothing back."""
    source = p.get("tls_ca_from")
    if not source:
        return []
    cert = material[source]["ca.crt"]
    (secret,) = tls_secrets(p, {"ca": {"tls.crt": cert, "ca.crt": cert}}, ["ca"])
    secret["metadata"]["annotations"] = {ANN_RESTORED_FROM: p["spec"]["secrets"][source]}
    return [secret]


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    return str(obj.get("kind", "")), str(obj["metadata"]["name"])


def replace_objects(
    observed: list[dict[str, Any]], updated: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The observed objects with the ones this run just wrote in their place (by kind and
    name: the headless Service and the budget share the cluster's name)."""
    fresh = {_key(obj): obj for obj in updated if obj}
    kept = [obj for obj in observed if _key(obj) not in fresh]
    return kept + list(fresh.values())


def _holds(live: Any, desired: Any) -> bool:
    """Whether `live` already holds every value of `desired` (what the API server adds, such
    as a Service's clusterIP or defaulted fields, does not count as a difference)."""
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(
            _holds(live.get(key), value) for key, value in desired.items()
        )
    if isinstance(desired, list):
        return (
            isinstance(live, list)
            and len(live) == len(desired)
            and all(_holds(a, b) for a, b in zip(live, desired, strict=True))
        )
    return bool(live == desired)


def out_of_date(desired: list[dict[str, Any]], live: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The desired objects that are missing from `live` or differ from it in a value this
    role sets: only those need a write."""
    seen = {_key(obj): obj for obj in live}
    stale = []
    for obj in desired:
        current = seen.get(_key(obj))
        wanted = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        if current is None or not _holds(current, wanted):
            stale.append(obj)
    return stale


def bootstrap_claims(
    p: dict[str, Any], members: list[str], record: str = ""
) -> list[dict[str, Any]]:
    """The claims of a brand-new cluster's members, started all at once: each records `new`
    and the whole --initial-cluster (`record`, that of an interrupted bootstrap being
    finished; else all of `members`), so any of their Pods, made now or re-made after an
    interruption, starts into the same bootstrap."""
    initial_cluster = record or ",".join(f"{m}={peer_url(p, m)}" for m in members)
    return [member_claim(p, m, initial_cluster, "new") for m in members]


def bootstrap_started(p: dict[str, Any], claims: list[dict[str, Any]]) -> dict[str, Any]:
    """The merge patch that records on the EtcdCluster, before its first member Pod exists,
    the --initial-cluster its members start into (the bootstrap claims' record): from then on
    the plan never makes a member `new` again, even if etcd never answers the operator."""
    record = ((claims[0].get("metadata") or {}).get("annotations") or {})[ANN_INITIAL_CLUSTER]
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {
            "name": p["name"],
            "namespace": p["namespace"],
            "annotations": {ANN_BOOTSTRAP_STARTED: record},
        },
    }


def member_pods(p: dict[str, Any], members: list[str], claims: list[dict[str, Any]]) -> list[Any]:
    """The Pods of `members`, each made from its own claim (`<member>-data`)."""
    by_name = {(c.get("metadata") or {}).get("name"): c for c in claims}
    return [member_pod(p, m, by_name[f"{m}-data"]) for m in members]


def claim_records(p: dict[str, Any]) -> list[dict[str, Any]]:
    """Merge patches writing who each joined member is on its claim (the plan's `record`):
    member and cluster ID, voting, and the flags it restarts with from now on, `existing`
    with only itself, under which etcd refuses to start on an empty data dir."""
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": f"{r['name']}-data",
                "namespace": p["namespace"],
                "labels": {LABEL_VOTER: str(r["voter"]).lower()},
                "annotations": {
                    ANN_MEMBER_ID: r["member_id"],
                    ANN_CLUSTER_ID: r["cluster_id"],
                    ANN_INITIAL_CLUSTER: r["initial_cluster"],
                    ANN_INITIAL_STATE: "existing",
                    ANN_VERSION: r["version"],
                },
            },
        }
        for r in p["record"]
    ]


def pod_voter_labels(p: dict[str, Any]) -> list[dict[str, Any]]:
    """Merge patches labelling member Pods voting or not (the plan's `relabel`)."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": r["name"],
                "namespace": p["namespace"],
                "labels": {LABEL_VOTER: str(r["voter"]).lower()},
            },
        }
        for r in p["relabel"]
    ]


def pod_settle_marks(p: dict[str, Any]) -> list[dict[str, Any]]:
    """Merge patches marking member Pods of a roll not over healthy since the run's look (the
    plan's `settle_marks`): the roll takes the next member down only once each has stayed so
    for spec.minReadySeconds."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": m["name"],
                "namespace": p["namespace"],
                "annotations": {ANN_HEALTHY_SINCE: m["since"], ANN_HEALTHY_RUN: m["run"]},
            },
        }
        for m in p["settle_marks"]
    ]


def recovery_objects(p: dict[str, Any]) -> list[dict[str, Any]]:
    """What a quorum recovery's Restoring step makes that is missing (recover_steps.py), in
    order: the first member's claim (marked restore-pending, so no Pod starts on it before
    its data is written; recording the request, the cluster ID recovered from and the
    EtcdBackup restored, if that is the source), then the Job that writes it from the
    survivor's claim or the backup's snapshot (`from`, etcd_restore_plan's source)."""
    recover = p["recover"]
    seed, fingerprint = recover["seed"], recover["fingerprint"]
    peer = peer_url(p, seed)
    out: list[dict[str, Any]] = []
    if recover["claim"]:
        claim = member_claim(p, seed, initial_cluster_entry(peer), "new")
        backup = f" backup={recover['backup']}" if recover.get("backup") else ""
        claim["metadata"]["annotations"] |= {
            ANN_RESTORE_PENDING: fingerprint,
            ANN_RECOVERY: f"{fingerprint} {recover['cluster_id']}{backup}",
        }
        out.append(claim)
    if recover["job"]:
        target = {
            "member": seed,
            "claim_name": f"{seed}-data",
            "peer_url": peer,
            # A new cluster: its own token, so no member of the old one takes it for theirs.
            "token": f"{p['name']}-{fingerprint[:8]}",
            "spec": {**p["spec"], "version": p["versions"].get(seed, p["spec"]["version"])},
        }
        cluster = {"metadata": {"name": p["name"], "namespace": p["namespace"], "uid": p["uid"]}}
        out.append(
            recovery_job(
                cluster,
                fingerprint,
                recover["from"],
                target,
                recover["image"],
                {"deadline_seconds": recover["deadline"]},
            )
        )
    return out
