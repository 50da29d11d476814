"""The etcd client layer without etcd: input validation, error wording, connection failures."""

from __future__ import annotations

import os
import shutil
import socket

import pytest

from etcd_runbook.clients import etcd_common
from etcd_runbook.clients.etcd_client import EtcdClient, foreign_answer
from etcd_runbook.clients.etcd_common import (
    ConnectionParams,
    connection_argument_spec,
    member_id_hex,
    normalize_url,
    parse_member_id,
    parse_url,
)
from etcd_runbook.clients.etcd_errors import (
    EtcdAuthError,
    EtcdForeignClusterError,
    EtcdInputError,
    EtcdModuleError,
    EtcdServerError,
    EtcdTimeoutError,
    EtcdUnreachableError,
    translate,
)


class FakeRpcError(Exception):
    """Shaped like grpc.aio.AioRpcError: what translate() looks at."""

    def __init__(self, code: str, details: str):
        super().__init__(details)
        self._code = code
        self._details = details

    def code(self):
        return type("Code", (), {"name": self._code})()

    def details(self):
        return self._details


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("127.0.0.1:2379", "scheme must be http or https"),
        ("unix:///run/etcd.sock", "scheme must be http or https"),
        ("http://:2379", "no host"),
        ("http://10.0.0.1", "no port"),
        ("http://10.0.0.1:99999", "Port out of range"),
        ("https://10.0.0.1:2379/v3", "path"),
        ("", "non-empty"),
    ],
)
def test_bad_urls_are_explained(url, words):
    with pytest.raises(EtcdInputError, match=words):
        parse_url(url, what="endpoint")


def test_url_parsing_and_normalizing():
    parsed = parse_url("https://etcd-0.etcd.ns.svc:2379/", what="endpoint")
    assert (parsed.target, parsed.secure) == ("etcd-0.etcd.ns.svc:2379", True)
    assert parse_url("http://[::1]:2379", what="endpoint").target == "[::1]:2379"
    assert normalize_url("HTTP://Host:2380/") == normalize_url("http://host:2380")
    assert normalize_url("unix://a/b/") == "unix://a/b"


def test_member_ids_are_hex_like_etcdctl():
    assert member_id_hex(0x8E9E05C52164694D) == "8e9e05c52164694d"
    assert parse_member_id("8e9e05c52164694d") == 0x8E9E05C52164694D
    with pytest.raises(EtcdInputError, match="not a hex number"):
        parse_member_id("m1")
    with pytest.raises(EtcdInputError, match="out of range"):
        parse_member_id("0")


def test_connection_params_validation(tmp_path):
    with pytest.raises(EtcdInputError, match="at least one"):
        ConnectionParams.from_module_params({"endpoints": []})
    with pytest.raises(EtcdInputError, match="together"):
        ConnectionParams(endpoints=("https://a:1",), client_cert="/x").validate()
    with pytest.raises(EtcdInputError, match="user and password"):
        ConnectionParams(endpoints=("http://a:1",), user="root").validate()
    with pytest.raises(EtcdInputError, match="cannot be read"):
        ConnectionParams(endpoints=("https://a:1",), ca_cert=str(tmp_path / "none")).validate()
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    with pytest.raises(EtcdInputError, match="uses http://"):
        ConnectionParams(endpoints=("http://a:1",), ca_cert=str(ca)).validate()
    params = ConnectionParams.from_module_params(
        {"endpoints": ["https://a:1"], "ca_cert": str(ca), "timeout": 3}
    )
    assert params.timeout == 3.0


def test_connection_spec_hides_the_password_only():
    spec = connection_argument_spec()
    assert spec["password"]["no_log"] is True
    assert spec["client_key"]["no_log"] is False
    assert spec["endpoints"]["required"] is True


@pytest.mark.parametrize(
    ("code", "details", "cls", "reason", "words"),
    [
        (
            "FAILED_PRECONDITION",
            "etcdserver: too many learner members in cluster",
            EtcdServerError,
            "TooManyLearners",
            "one learner at a time",
        ),
        (
            "FAILED_PRECONDITION",
            "etcdserver: can only promote a learner member which is in sync with leader",
            EtcdServerError,
            "LearnerNotReady",
            "not caught up",
        ),
        (
            "FAILED_PRECONDITION",
            "etcdserver: Peer URLs already exists",
            EtcdServerError,
            "PeerURLExists",
            "already uses this peer URL",
        ),
        (
            "FAILED_PRECONDITION",
            "etcdserver: re-configuration failed due to not enough started members",
            EtcdServerError,
            "NotEnoughStartedMembers",
            "keep quorum",
        ),
        (
            "INVALID_ARGUMENT",
            "etcdserver: authentication failed, invalid user ID or password",
            EtcdAuthError,
            "AuthFailed",
            "user name or password",
        ),
        (
            "UNKNOWN",
            "auth: invalid auth token",
            EtcdAuthError,
            "InvalidToken",
            "does not know the auth token",
        ),
        (
            "UNAUTHENTICATED",
            "etcdserver: invalid auth token",
            EtcdAuthError,
            "InvalidToken",
            "does not know the auth token",
        ),
        (
            "UNAVAILABLE",
            "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:2379: "
            "Ssl handshake failed: SSL_ERROR_SSL: CERTIFICATE_VERIFY_FAILED",
            EtcdUnreachableError,
            "TLSError",
            "TLS handshake failed",
        ),
        (
            "UNAVAILABLE",
            "failed to connect to all addresses; last error: Connection refused",
            EtcdUnreachableError,
            "Unreachable",
            "connection refused",
        ),
        ("DEADLINE_EXCEEDED", "Deadline Exceeded", EtcdTimeoutError, "Timeout", "timed out"),
        (
            "UNAVAILABLE",
            "etcdserver: some new error",
            EtcdServerError,
            "EtcdError",
            "etcd said 'etcdserver: some new error'",
        ),
    ],
)
def test_grpc_errors_become_explained_errors(code, details, cls, reason, words):
    # etcd3aio raises its own class "from" the gRPC error: translate must look through it.
    try:
        try:
            raise FakeRpcError(code, details)
        except FakeRpcError as rpc:
            raise RuntimeError("wrapped") from rpc
    except RuntimeError as wrapped:
        error = translate(wrapped, endpoint="https://127.0.0.1:2379", operation="x", timeout=5)
    assert type(error) is cls
    assert error.reason == reason
    assert words in error.message
    assert "https://127.0.0.1:2379" in error.message
    assert error.as_result()["reason"] == reason


def test_asyncio_timeout_names_the_deadline():
    error = translate(TimeoutError(), endpoint="http://a:1", operation="status", timeout=2.5)
    assert isinstance(error, EtcdTimeoutError)
    assert "status at http://a:1 timed out after 2.5s" in error.message


def test_no_endpoint_answers_names_every_endpoint():
    urls = [f"http://127.0.0.1:{closed_port()}" for _ in range(2)]
    with EtcdClient(ConnectionParams(endpoints=tuple(urls), timeout=3)) as client:
        with pytest.raises(EtcdUnreachableError) as caught:
            client.member_list()
        statuses = client.statuses(urls)
    assert caught.value.reason == "Unreachable"
    for url in urls:
        assert url in caught.value.message
    assert "connection refused" in caught.value.message
    assert [s.healthy for s in statuses] == [False, False]
    assert "connection refused" in statuses[0].errors[0]


def test_bad_input_is_refused_before_any_connection():
    with EtcdClient(ConnectionParams(endpoints=("http://127.0.0.1:1",))) as client:
        with pytest.raises(EtcdInputError, match="peer URL"):
            client.member_add(["10.0.0.1:2380"])
        with pytest.raises(EtcdModuleError, match="downgrade action"):
            client.downgrade("rollback", "3.5")


@pytest.mark.parametrize(
    ("preferred", "order"),
    [
        pytest.param([], "abc", id="nothing known: as given"),
        pytest.param(["{c}"], "cab", id="the one that answered first"),
        pytest.param(["{c}", "{b}"], "cba", id="in the order preferred"),
        pytest.param(["{c}/", " {b}"], "cba", id="spelled as the endpoints are keyed"),
        pytest.param(["http://elsewhere:2379"], "abc", id="one not given changes nothing"),
    ],
)
def test_calls_through_any_endpoint_try_the_preferred_first(preferred, order):
    """The order in which a call made through any one endpoint tries them: those known to
    answer first (cluster_health prefers the endpoints that answered their status)."""
    urls = [f"http://127.0.0.1:{closed_port()}" for _ in range(3)]
    name = dict(zip("abc", urls, strict=True))
    with EtcdClient(ConnectionParams(endpoints=tuple(urls), timeout=1)) as client:
        client.prefer([p.format(**name) for p in preferred])
        with pytest.raises(EtcdUnreachableError) as caught:
            client.member_list()
    message = caught.value.message
    assert sorted(urls, key=message.index) == [name[k] for k in order], message


@pytest.mark.parametrize(
    ("expected", "got", "foreign"),
    [
        (None, 0xABC, False),  # nothing known yet: any answer is taken (and decides)
        ("abc", 0xABC, False),
        ("abc", 0xDEF, True),
        # etcd leaves some headers empty (defragment, move leader, 3.4's alarms): those calls
        # go only through an endpoint whose status named the cluster on the same channel.
        ("abc", 0, False),
    ],
)
def test_an_answer_of_another_cluster_is_foreign(expected, got, foreign):
    assert foreign_answer(expected, got) is foreign


def test_the_first_answer_decides_the_cluster_and_another_one_fails_the_call():
    url = f"http://127.0.0.1:{closed_port()}"
    with EtcdClient(ConnectionParams(endpoints=(url,))) as client:
        assert client.expected_cluster_id is None
        client.answered(url, "MemberList", 0)
        assert client.expected_cluster_id is None, "an empty header decides nothing"
        client.answered(url, "MemberList", 0xABC)
        assert client.expected_cluster_id == "abc"
        client.expect_cluster("def")
        assert client.expected_cluster_id == "abc", "the cluster, once known, stays"
        with pytest.raises(EtcdForeignClusterError) as raised:
            client.answered(url, "MemberAdd", 0xDEF)
        assert "MemberAdd" in str(raised.value) and "def" in str(raised.value)
        assert client.trusted([url]) == [], "no later call goes through that endpoint"
    with EtcdClient(ConnectionParams(endpoints=(url,), cluster_id="ABC")) as client:
        assert client.expected_cluster_id == "abc", "a given cluster ID is expected at once"


def test_a_private_file_is_written_again_after_its_directory_went() -> None:
    # The in-worker action runs exit handlers after each loop item of one worker process:
    # the next item must get a directory again, not the removed one's path.
    first = etcd_common.private_file("ca_cert", "one")
    shutil.rmtree(os.path.dirname(first))
    second = etcd_common.private_file("ca_cert", "two")
    with open(second) as handle:
        assert handle.read() == "two"
    assert os.stat(second).st_mode & 0o777 == 0o600
    shutil.rmtree(os.path.dirname(second))
