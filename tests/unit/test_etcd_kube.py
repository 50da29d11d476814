"""The small Kubernetes reader: which credentials it picks, and how each answer reads."""

from __future__ import annotations

import base64
import json
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import yaml

from etcd_runbook.clients.etcd_kube import (
    KubeCredentials,
    KubeError,
    KubeReader,
    credentials,
    from_kubeconfig,
    http_date,
    in_cluster,
    kubeconfig_path,
    namespaced,
)


@pytest.mark.parametrize(
    ("explicit", "env", "home_has_config", "expected"),
    [
        ("/given", {"KUBECONFIG": "/env"}, True, "/given"),
        (None, {"K8S_AUTH_KUBECONFIG": "/k8s", "KUBECONFIG": "/env"}, True, "/k8s"),
        (None, {"KUBECONFIG": "/a:/b"}, True, "/a"),
        (None, {}, True, "HOME/.kube/config"),
        (None, {}, False, None),
        (None, {"KUBECONFIG": ""}, False, None),
    ],
)
def test_kubeconfig_search_order(tmp_path, explicit, env, home_has_config, expected):
    if home_has_config:
        (tmp_path / ".kube").mkdir()
        (tmp_path / ".kube" / "config").write_text("{}")
    found = kubeconfig_path(explicit, env, str(tmp_path))
    assert found == (expected.replace("HOME", str(tmp_path)) if expected else None)


def _kubeconfig(tmp_path: Path, user: dict, cluster: dict | None = None) -> Path:
    path = tmp_path / "config"
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "c", "cluster": cluster or {"server": "https://k:6443/"}}],
                "users": [{"name": "u", "user": user}],
                "contexts": [
                    {"name": "one", "context": {"cluster": "c", "user": "u"}},
                    {"name": "broken", "context": {"cluster": "nope", "user": "u"}},
                ],
                "current-context": "one",
            }
        )
    )
    return path


def test_paths_are_relative_to_the_kubeconfig_and_data_goes_to_private_files(tmp_path):
    pem = "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"
    path = _kubeconfig(
        tmp_path,
        {"client-certificate": "pki/c.crt", "client-key-data": base64.b64encode(b"KEY").decode()},
        {
            "server": "https://k:6443/",
            "certificate-authority-data": base64.b64encode(pem.encode()).decode(),
        },
    )
    creds = from_kubeconfig(str(path), None)
    assert creds.server == "https://k:6443"
    assert creds.cert_file == str(tmp_path / "pki" / "c.crt")
    assert creds.key_file and Path(creds.key_file).read_text() == "KEY"
    assert (Path(creds.key_file).stat().st_mode & 0o777) == 0o600
    assert creds.ca_file and Path(creds.ca_file).read_text() == pem
    assert creds.verify and creds.token is None


@pytest.mark.parametrize(
    ("given", "env", "used"),
    [
        (None, {}, "one"),
        # A break-glass playbook's `-e context=` reaches every module as kubernetes.core's.
        (None, {"K8S_AUTH_CONTEXT": "broken"}, "broken"),
        ("one", {"K8S_AUTH_CONTEXT": "broken"}, "one"),
        (None, {"K8S_AUTH_CONTEXT": ""}, "one"),
    ],
)
def test_the_context_is_the_module_s_else_the_environment_s(
    tmp_path, monkeypatch, given, env, used
):
    path = _kubeconfig(tmp_path, {"token": "t"})
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.delenv("K8S_AUTH_CONTEXT", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    if used == "broken":
        with pytest.raises(KubeError, match="no cluster named 'nope'"):
            credentials(None, given)
    else:
        assert credentials(None, given).server == "https://k:6443"


def test_token_file_and_insecure(tmp_path):
    (tmp_path / "tok").write_text("abc\n")
    path = _kubeconfig(
        tmp_path, {"tokenFile": "tok"}, {"server": "https://k", "insecure-skip-tls-verify": True}
    )
    creds = from_kubeconfig(str(path), None)
    assert creds.token == "abc" and not creds.verify


@pytest.mark.parametrize(
    ("user", "context", "message"),
    [
        ({"token": "t"}, "missing", "no context named 'missing'"),
        ({"token": "t"}, "broken", "no cluster named 'nope'"),
        ({"username": "a", "password": "b"}, None, "basic auth"),
    ],
)
def test_kubeconfig_problems_are_named(tmp_path, user, context, message):
    with pytest.raises(KubeError, match=message):
        from_kubeconfig(str(_kubeconfig(tmp_path, user)), context)


def test_in_cluster_needs_the_service_env(tmp_path):
    with pytest.raises(KubeError, match="not running in a Pod"):
        in_cluster({}, str(tmp_path))
    (tmp_path / "token").write_text("sa-token")
    creds = in_cluster(
        {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}, str(tmp_path)
    )
    assert creds.server == "https://[fd00::1]:443" and creds.token == "sa-token"
    assert creds.ca_file == str(tmp_path / "ca.crt")


def test_paths():
    assert namespaced("v1", "ns", "pods") == "/api/v1/namespaces/ns/pods"
    assert namespaced("policy/v1", "a b", "poddisruptionbudgets", "x/y") == (
        "/apis/policy/v1/namespaces/a%20b/poddisruptionbudgets/x%2Fy"
    )


class _Api(BaseHTTPRequestHandler):
    answers: dict[str, tuple[int, bytes]] = {}
    seen: list[tuple[str, str | None]] = []

    def do_GET(self) -> None:
        self.seen.append((self.path, self.headers.get("Authorization")))
        status, body = self.answers.get(self.path.split("?")[0], (404, b"{}"))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def api():
    server = HTTPServer(("127.0.0.1", 0), _Api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Api.seen.clear()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_reader_answers(api):
    _Api.answers = {
        "/api/v1/namespaces/n/pods": (
            200,
            json.dumps({"items": [{"metadata": {"name": "p"}}]}).encode(),
        ),
        "/api/v1/namespaces/n/secrets": (
            403,
            json.dumps({"message": "secrets is forbidden"}).encode(),
        ),
        "/api/v1/namespaces/n/services": (500, b"<html>oops"),
    }
    reader = KubeReader(KubeCredentials(server=api, token="t0k"), timeout=5)
    pods = reader.items("/api/v1/namespaces/n/pods", "a=b,c=d", "Pod", "v1")
    assert pods == [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}]
    assert _Api.seen[0] == ("/api/v1/namespaces/n/pods?labelSelector=a%3Db%2Cc%3Dd", "Bearer t0k")
    assert reader.get("/api/v1/namespaces/n/pods/gone") is None
    with pytest.raises(KubeError, match="HTTP 403: secrets is forbidden") as denied:
        reader.get("/api/v1/namespaces/n/secrets")
    assert denied.value.reason == "Forbidden"
    with pytest.raises(KubeError, match="HTTP 500, not JSON"):
        reader.get("/api/v1/namespaces/n/services")


def test_the_reader_keeps_the_api_server_s_time_of_its_last_answer(api):
    reader = KubeReader(KubeCredentials(server=api), timeout=5)
    assert reader.date == ""
    before = datetime.now(UTC).replace(microsecond=0)
    assert reader.get("/api/v1/nodes/gone") is None  # a 404 is dated too
    answered = datetime.fromisoformat(reader.date.replace("Z", "+00:00"))
    assert before <= answered <= datetime.now(UTC)


@pytest.mark.parametrize(
    ("header", "rfc3339"),
    [
        ("Wed, 25 Nov 2026 10:00:07 GMT", "2026-11-25T10:00:07Z"),
        ("Wed, 25 Nov 2026 11:00:07 +0100", "2026-11-25T10:00:07Z"),
        ("Wed, 25 Nov 2026 10:00:07 -0000", ""),  # no zone said: no time to count on
        ("yesterday", ""),
        ("", ""),
        (None, ""),
    ],
)
def test_http_dates(header, rfc3339):
    assert http_date(header) == rfc3339


def test_unreachable_and_bad_url():
    with pytest.raises(KubeError, match="unreachable"):
        KubeReader(KubeCredentials(server="http://127.0.0.1:1"), timeout=2).get("/api")
    with pytest.raises(KubeError, match="not http"):
        KubeReader(KubeCredentials(server="k:6443"), timeout=2)
