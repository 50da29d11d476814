"""The monitoring component (config/components/monitoring/, docs/install.md "Monitoring"):
promtool checks the alert rules and runs their unit tests (tests/monitoring/), the
PrometheusRule is the rule file's groups word for word, every alert tells a person what to do
and where to read (and docs/install.md lists it), the scrapes select what the operator makes,
and the dashboard's queries parse and name metrics etcd and the operator export.

promtool is built by hack/promtool (about 2 minutes cold: `make test-unit` builds it before pytest).
After an edit of the rule file, regenerate the PrometheusRule:
    .venv/bin/python tests/unit/test_alert_rules.py --write
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from etcd_runbook import names
from etcd_runbook.rules import etcd_manifests as em
from etcd_runbook.rules import etcd_plan as ep
from etcd_runbook_operator.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]
COMPONENT = ROOT / "config" / "components" / "monitoring"
RULES = COMPONENT / "rules" / "etcd.rules.yaml"
PROMETHEUSRULE = COMPONENT / "prometheusrule.yaml"
DASHBOARD = COMPONENT / "dashboards" / "etcd.json"
RULE_TESTS = ROOT / "tests" / "monitoring" / "etcd.rules.test.yaml"
OVERLAY = ROOT / "tests" / "monitoring" / "overlay"
NAMESPACE = "etcd-operator-system"
MEMBERS_JOB = "etcd-runbook-members"

# The etcd metrics the rules and the dashboard read. Each is served on --listen-metrics-urls by
# etcd 3.4.31, 3.5.35 and 3.6.16 (their /metrics read on loopback when this list was written;
# the peer metric appears once a member has peers).
ETCD_METRICS = frozenset(
    {
        "up",  # Prometheus's own, per scraped member
        "etcd_server_has_leader",
        "etcd_server_is_leader",
        "etcd_server_leader_changes_seen_total",
        "etcd_server_proposals_failed_total",
        "etcd_server_proposals_pending",
        "etcd_server_quota_backend_bytes",
        "etcd_mvcc_db_total_size_in_bytes",
        "etcd_mvcc_db_total_size_in_use_in_bytes",
        "etcd_disk_wal_fsync_duration_seconds_bucket",
        "etcd_disk_backend_commit_duration_seconds_bucket",
        "etcd_network_peer_sent_failures_total",
    }
)

PROMETHEUSRULE_HEAD = f"""\
# Generated from rules/etcd.rules.yaml (the label contract and why each alert is as it is are
# there): edit that file, then `.venv/bin/python tests/unit/test_alert_rules.py --write`.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: etcd-runbook-operator
  namespace: {NAMESPACE}
  labels:
    app.kubernetes.io/name: etcd-runbook-operator
    app.kubernetes.io/component: monitoring
spec:
"""


def prometheusrule_text(rules_text: str) -> str:
    """The PrometheusRule: the rule file from `groups:` on, indented under spec (comments and
    block scalars kept as written, so the two read alike)."""
    lines = rules_text.splitlines()
    start = lines.index("groups:")
    body = "".join(f"  {line}\n" if line else "\n" for line in lines[start:])
    return PROMETHEUSRULE_HEAD + body


def operator_metrics() -> set[str]:
    """The sample names of the operator's registry, as Prometheus stores them."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
    return {
        family.name + suffix
        for family in Metrics().registry.collect()
        for suffix in suffixes.get(family.type, ("",))
    }


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ROOT / "hack" / "promtool"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=840,  # a cold build of promtool (hack/promtool) under pytest's 900 s
    )


def alerts() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def kubectl() -> str:
    found = shutil.which("kubectl") or next(
        (str(p) for p in Path.home().glob(".cache/etcd-runbook-operator/k8s/bin/*/kubectl")), None
    )
    if found is None:
        pytest.skip("kubectl (for its built-in kustomize) is not installed")
    return found


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    out = subprocess.run(
        [kubectl(), "kustomize", str(OVERLAY)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def metric_names(expr: str) -> set[str]:
    """Metric names of a query. Every one here starts with etcd_ or is `up`; any other name
    before a selector's brace is caught too."""
    return set(re.findall(r"\b(etcd_[a-z0-9_]+|up)\b", expr)) | set(
        re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{", expr)
    )


def test_promtool_checks_the_rule_file():
    proc = promtool("check", "rules", str(RULES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in proc.stdout


def test_promtool_rule_tests_pass():
    proc = promtool("test", "rules", str(RULE_TESTS))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_every_alert_has_a_firing_case_and_a_quiet_one():
    """Near misses beside a firing series are proven by promtool (an alert not expected fails
    the test); each alert also has an evaluation where it must not fire at all."""
    evaluations = [
        check
        for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for check in test["alert_rule_test"]
    ]
    for name in {a["alert"] for a in alerts()}:
        mine = [c for c in evaluations if c["alertname"] == name]
        assert any(c["exp_alerts"] for c in mine), f"{name}: no test where it fires"
        assert any(not c["exp_alerts"] for c in mine), f"{name}: no test where it stays quiet"


def test_the_prometheusrule_is_the_rule_file():
    expected = prometheusrule_text(RULES.read_text())
    assert PROMETHEUSRULE.read_text() == expected, (
        "prometheusrule.yaml differs from rules/etcd.rules.yaml: "
        ".venv/bin/python tests/unit/test_alert_rules.py --write"
    )


def test_every_alert_says_what_it_is_and_what_to_do():
    for alert in alerts():
        name = alert["alert"]
        assert re.fullmatch(r"Etcd[A-Za-z]+", name), name
        assert alert["labels"]["severity"] in ("critical", "warning"), name
        annotations = alert["annotations"]
        assert set(annotations) == {"summary", "description"}, f"{name}: {set(annotations)}"
        assert annotations["summary"].endswith("."), name
        assert len(annotations["description"]) > 100, f"{name}: a description a person can act on"


def test_every_document_an_alert_points_at_exists():
    """`docs/x.md, "Heading"` and playbook paths in the descriptions are real."""
    headings: dict[str, set[str]] = {}
    for alert in alerts():
        text = alert["annotations"]["description"]
        for doc, quoted in re.findall(r'(docs/[\w.-]+\.md)((?:(?:,| and) "[^"]+")*)', text):
            assert (ROOT / doc).is_file(), f"{alert['alert']}: {doc}"
            if doc not in headings:
                lines = (ROOT / doc).read_text().splitlines()
                headings[doc] = {re.sub(r"^#+\s*", "", h) for h in lines if h.startswith("#")}
            for title in re.findall(r'"([^"]+)"', quoted):
                assert title in headings[doc], f"{alert['alert']}: {doc} has no {title!r}"
        for path in re.findall(r"\bplaybooks/[\w.-]+\.yml\b", text):
            assert (ROOT / path).is_file(), f"{alert['alert']}: {path}"


def test_install_docs_list_every_alert():
    """docs/install.md, "Monitoring": one table row per alert name, no more."""
    text = (ROOT / "docs" / "install.md").read_text()
    section = text.split("## Monitoring", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `(Etcd\w+)` \|", section, re.MULTILINE))
    assert listed == {a["alert"] for a in alerts()}


def test_rules_read_only_metrics_that_exist_and_members_of_the_contract():
    known = ETCD_METRICS | operator_metrics()
    for alert in alerts():
        expr = alert["expr"]
        assert metric_names(expr) <= known, (alert["alert"], metric_names(expr) - known)
        # Every etcd series through the members' job, so another etcd never counts.
        for selector in re.findall(r"\b(?:etcd_(?!runbook_)[a-z0-9_]+|up)(\{[^}]*\})?", expr):
            assert f'job="{MEMBERS_JOB}"' in selector, (alert["alert"], expr)


def test_the_component_renders_in_an_overlay(rendered):
    rule = one(rendered, "PrometheusRule", "etcd-runbook-operator")
    assert rule["spec"] == yaml.safe_load(RULES.read_text())
    one(rendered, "PodMonitor", "etcd-runbook-members")
    one(rendered, "ServiceMonitor", "etcd-runbook-operator")
    dashboards = one(rendered, "ConfigMap", "etcd-runbook-operator-dashboards")
    assert dashboards["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboards["data"] == {"etcd.json": DASHBOARD.read_text()}
    for doc in (rule, dashboards):
        assert doc["metadata"]["namespace"] == NAMESPACE
    one(rendered, "Deployment", "etcd-runbook-operator")  # config/default came along


def test_the_service_monitor_scrapes_the_operator_metrics_service(rendered):
    monitor = one(rendered, "ServiceMonitor", "etcd-runbook-operator")
    service = one(rendered, "Service", "etcd-runbook-operator-metrics")
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"] == NAMESPACE
    wanted = monitor["spec"]["selector"]["matchLabels"]
    assert wanted.items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert endpoint["honorLabels"] is True, "per-object gauges keep their own namespace"


def test_the_pod_monitor_scrapes_every_member_pod_with_the_contract_labels(rendered):
    monitor = one(rendered, "PodMonitor", "etcd-runbook-members")
    assert monitor["spec"]["namespaceSelector"] == {"any": True}
    obj = {
        "metadata": {"name": "main", "namespace": "team-a", "uid": "0123456789abcdef"},
        "spec": {"size": 3, "version": "3.6.16"},
    }
    p = ep.plan({"object": obj, "pods": [], "claims": [], "info": {}, "options": {}})
    claim = em.member_claim(p, "main-0", f"main-0={em.peer_url(p, 'main-0')}", "new")
    pod = em.member_pod(p, "main-0", claim)
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    (etcd,) = pod["spec"]["containers"]
    port = next(p["containerPort"] for p in etcd["ports"] if p["name"] == endpoint["port"])
    assert f"--listen-metrics-urls={endpoint['scheme']}://0.0.0.0:{port}" in etcd["args"]
    # Prometheus's name for a Pod label: every character but [a-zA-Z0-9_] becomes _.
    meta = "__meta_kubernetes_pod_label_" + re.sub(r"\W", "_", names.LABEL_CLUSTER)
    relabel = {r["targetLabel"]: r for r in endpoint["relabelings"]}
    assert relabel["cluster"]["sourceLabels"] == [meta]
    assert relabel["job"]["replacement"] == MEMBERS_JOB


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def panels() -> list[dict[str, Any]]:
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def test_the_dashboard_has_a_panel_for_each_question():
    titles = {p["title"] for p in panels()}
    assert titles == {
        "Members up",
        "Has leader",
        "Leader",
        "Leader changes in 15 minutes",
        "Proposals failed and pending",
        "Database size and quota",
        "Database in use",
        "WAL fsync, 99th percentile",
        "Backend commit, 99th percentile",
        "Runbook runs by result",
        "Operator leader",
        "Members ready and quorum",
        "Alarms",
        "Backup age",
    }
    ids = [p["id"] for p in dashboard()["panels"]]
    assert len(ids) == len(set(ids))


def test_the_dashboard_reads_from_the_templated_datasource():
    variables = {v["name"]: v for v in dashboard()["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    templated = {"type": "prometheus", "uid": "${datasource}"}
    for panel in panels():
        assert panel["datasource"] == templated, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == templated, panel["title"]
    for name in ("namespace", "cluster"):
        assert variables[name]["datasource"] == templated


def test_the_dashboard_queries_parse_and_read_known_metrics(tmp_path):
    """promtool has no checker for a lone expression: each query (Grafana's variables given
    values) becomes a recording rule of a file `promtool check rules` parses."""
    known = ETCD_METRICS | operator_metrics()
    grafana = {"$__rate_interval": "5m", "$namespace": ".*", "$cluster": ".*"}
    records: list[dict[str, str]] = []
    for panel in panels():
        for target in panel["targets"]:
            expr = target["expr"]
            assert metric_names(expr) <= known, (panel["title"], metric_names(expr) - known)
            for variable, value in grafana.items():
                expr = expr.replace(variable, value)
            assert "$" not in expr, (panel["title"], expr)
            records.append({"record": f"dashboard:panel_{len(records)}", "expr": expr})
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"]
            assert metric_names(query) <= known, (variable["name"], query)
    rule_file = tmp_path / "dashboard.rules.yaml"
    rule_file.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": records}]}))
    proc = promtool("check", "rules", str(rule_file))
    assert proc.returncode == 0, proc.stdout + proc.stderr


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit(f"usage: {sys.argv[0]} --write   (regenerates {PROMETHEUSRULE.relative_to(ROOT)})")
    PROMETHEUSRULE.write_text(prometheusrule_text(RULES.read_text()))
