"""etcd_runbook/clients/etcd_s3.py and etcd_snapshot_s3.py without a store: option checks, how
listed objects count as verified, the error texts (credentials scrubbed), the pipe between
etcd's stream and the uploader, and that the module names keys as the plan's filter does.
The same code against a real store: tests/modules/test_etcd_snapshot_s3.py."""

from __future__ import annotations

import hashlib
import threading
from typing import Any

import pytest
import urllib3
from minio.error import S3Error

from etcd_runbook.clients.etcd_errors import EtcdInputError
from etcd_runbook.clients.etcd_s3 import S3Params, explain
from etcd_runbook.clients.etcd_snapshot_io import SnapshotIntegrityError
from etcd_runbook.operations.etcd_snapshot_s3 import UploadPipe, UploadStopped, snapshot_name
from etcd_runbook.rules import etcd_backup_plan as bp
from etcd_runbook.rules.etcd_snapshot_catalog import describe_snapshot

SECRET = "s3cr3t/with+chars"
ACCESS = "AKIDEXAMPLE123"


def params(**overrides: Any) -> S3Params:
    option = {
        "endpoint": "https://s3.example.com:9000",
        "bucket": "backups",
        "region": "us-east-1",
        "access_key": ACCESS,
        "secret_key": SECRET,
        **overrides,
    }
    return S3Params.from_option(option)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"endpoint": "s3.example.com"}, "s3.endpoint must be http://host"),
        ({"endpoint": "ftp://s3.example.com"}, "s3.endpoint must be"),
        ({"endpoint": "https://s3.example.com/bucket"}, "s3.endpoint must be"),
        ({"secret_key": None}, "s3 needs access_key and secret_key"),
        ({"ca_file": "/nonexistent/ca.pem"}, "s3.ca_file /nonexistent/ca.pem does not exist"),
    ],
)
def test_bad_options_are_named(overrides, message):
    with pytest.raises(EtcdInputError, match=message):
        params(**overrides)


def test_params_hide_credentials():
    p = params(endpoint="https://s3.example.com/")
    assert p.endpoint == "https://s3.example.com" and p.secure
    assert SECRET not in repr(p) and ACCESS not in repr(p)
    assert p.scrub(f"sig {SECRET} key {ACCESS}") == "sig ******** key ********"


def s3_error(code: str, message: str = "m") -> S3Error:
    response = urllib3.HTTPResponse(body=b"", status=403)
    return S3Error(response, code, message, "/backups", "req", "host")


@pytest.mark.parametrize(
    ("error", "reason", "text"),
    [
        (s3_error("SignatureDoesNotMatch"), "S3AuthFailed", "access key and secret key are wrong"),
        (s3_error("InvalidAccessKeyId"), "S3AuthFailed", "access key and secret key are wrong"),
        (s3_error("XAdminUserNotFound"), "S3AuthFailed", "access key and secret key are wrong"),
        (s3_error("AccessDenied"), "S3AuthFailed", "lack permission on bucket backups"),
        (s3_error("NoSuchBucket"), "S3BucketMissing", "bucket backups does not exist"),
        (s3_error("NoSuchKey"), "S3ObjectMissing", "no such object"),
        (s3_error("PermanentRedirect"), "S3WrongRegion", "in another region"),
        (s3_error("SlowDown", "please"), "S3Error", "failed: S3 SlowDown: please"),
        (OSError("Connection refused"), "S3Unreachable", "cannot reach the object store"),
        (OSError("[SSL: CERTIFICATE_VERIFY_FAILED]"), "S3TLSError", "TLS handshake failed"),
        (ValueError("invalid bucket name b"), "InvalidInput", "invalid bucket name"),
    ],
)
def test_errors_say_what_to_fix(error, reason, text):
    explained = explain(error, params(), "upload", "k.db")
    assert explained.reason == reason and text in explained.message, explained.message
    assert "s3://backups/k.db at https://s3.example.com:9000" in explained.message


def test_the_stores_answer_reaches_a_message_only_as_a_short_s3_error():
    # An endpoint that is no store, or a hostile one, writes what it likes into its answer:
    # only an S3 error code and a short line of it reach a message (and so status).
    body = "<html>" + "internal page " * 200 + "\n\x1b[31m secret-ish </html>"
    from minio.error import InvalidResponseError, ServerError

    not_s3 = explain(InvalidResponseError(200, "text/html", body), params(), "list")
    assert not_s3.reason == "S3InvalidResponse", not_s3.message
    assert "HTTP 200 (text/html)" in not_s3.message and "internal page" not in not_s3.message
    long = explain(s3_error("AccessDenied", body), params(), "list")
    assert "S3 AccessDenied: <html>internal page" in long.message
    assert len(long.message) < 400 and "\x1b" not in long.message and "\n" not in long.message
    odd = explain(s3_error("<script>alert(1)</script>", "x"), params(), "list")
    assert "<script>" not in odd.message and "an unreadable code" in odd.message
    down = explain(ServerError("server failed with HTTP status code 503", 503), params(), "list")
    assert "HTTP 503" in down.message
    # HTML that parses as XML, and what does not parse at all: neither is a listing.
    from xml.etree import ElementTree

    for answer in (ValueError("XML element <Name> not found"), ElementTree.ParseError("x")):
        assert explain(answer, params(), "list").reason == "S3InvalidResponse"
    assert explain(ValueError("invalid bucket name b"), params(), "list").reason == "InvalidInput"


def test_errors_never_carry_credentials():
    explained = explain(s3_error("Odd", f"echoed {SECRET} and {ACCESS}"), params(), "list")
    assert SECRET not in explained.message and ACCESS not in explained.message
    explained = explain(OSError(f"refused for {ACCESS}"), params(), "list")
    assert ACCESS not in explained.message


@pytest.mark.parametrize(
    ("manifest", "verified"),
    [
        ({"sha256": "a" * 64, "size": 1056}, True),
        ({"sha256": "a" * 64, "size": 1000}, False),  # truncated, or replaced
        ({"sha256": "short", "size": 1056}, False),
        ({"size": 1056}, False),
        ({}, False),  # unreadable
        (None, False),  # none
    ],
)
def test_verified_needs_a_manifest_that_matches(manifest, verified):
    obj = {"key": "p/x.db", "size": 1056, "time": "2026-05-01T00:00:00Z"}
    entry = describe_snapshot(obj, manifest)
    assert entry["verified"] is verified
    assert entry["location"] == entry["key"] == "p/x.db"
    assert (entry["sha256"] == "a" * 64) is verified


def test_manifest_time_and_facts_win_over_the_listing():
    obj = {"key": "p/x.db", "size": 10, "time": "2026-05-02T00:00:00Z"}
    manifest = {"sha256": "b" * 64, "size": 10, "time": "2026-05-01T23:59:00Z", "revision": 7}
    entry = describe_snapshot(obj, manifest)
    assert entry["time"] == "2026-05-01T23:59:00Z" and entry["revision"] == 7


@pytest.mark.parametrize("prefix", ["backups", "/a/b/", ""])
def test_the_module_names_keys_as_the_plan_does(prefix):
    backup_prefix = bp.backup_prefix(prefix, "ns", "e", "nightly")
    made = snapshot_name(backup_prefix, "20260501T030000Z", 42)
    assert made == bp.snapshot_key(prefix, "ns", "e", "nightly", "2026-05-01T03:00:00Z", 42)
    assert (bp.parse_snapshot_key(made) or {}).get("revision") == 42


def test_pipe_reads_whole_parts_in_order_and_ends_cleanly():
    pipe = UploadPipe()
    db = b"".join(bytes([i]) * 512 for i in range(19))
    data = db + hashlib.sha256(db).digest()
    chunks = [data[i : i + 1000] for i in range(0, len(data), 1000)]

    def produce() -> None:
        for chunk in chunks:
            pipe.write_many([chunk])
        pipe.end(None)

    producer = threading.Thread(target=produce)
    producer.start()
    parts = []
    while part := pipe.read(3000):
        parts.append(part)
    producer.join()
    assert [len(p) for p in parts] == [3000, 3000, 3000, 760]
    assert b"".join(parts) == data
    assert pipe.hasher.size == len(data) == 9760
    assert pipe.hasher.file_sha256() == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize(
    ("tail", "match"),
    [(bytes(32), "does not match the hash etcd appended"), (b"", "no etcd integrity hash")],
)
def test_pipe_checks_etcds_hash_in_the_read_that_reaches_the_end(tail, match):
    """put_object completes an upload only after a read returns less than a part: that read
    raises when etcd's hash does not match, and put_object aborts."""
    pipe = UploadPipe()
    pipe.write_many([bytes(512 * 4) + tail])
    pipe.end(None)
    assert len(pipe.read(1024)) == 1024  # not the end yet: nothing checked
    with pytest.raises(SnapshotIntegrityError, match=match):
        pipe.read(4096)


def test_pipe_raises_the_producers_error_to_the_uploader():
    pipe = UploadPipe()
    pipe.write_many([b"x" * 10])
    pipe.end(ValueError("hash mismatch"))
    assert pipe.read(5) == b"xxxxx"
    with pytest.raises(ValueError, match="hash mismatch"):
        pipe.read(100)


def test_pipe_stops_the_producer_when_the_uploader_is_gone():
    pipe = UploadPipe()
    pipe.reader_done.set()
    with pytest.raises(UploadStopped):
        pipe.write_many([b"x"])
    pipe.end(None)  # nothing to tell a gone uploader; must not block
