"""What the etcd_snapshot module may be asked (etcd_runbook/rules/etcd_snapshot_requests.py):
each state's needs, a restore's settings, the sha256 a fetch must have. The module itself, on
real etcd and a real store: tests/modules/test_etcd_snapshot*.py."""

from __future__ import annotations

from typing import Any

import pytest

from etcd_runbook.rules.etcd_snapshot_requests import (
    expected_sha256,
    manifest_problem,
    request_problem,
    restore_problem,
    restore_settings,
    stored_in,
)

S3 = {"bucket": "b"}
A, B = "a" * 64, "b" * 64


def params(**given: Any) -> dict[str, Any]:
    """The module's params as AnsibleModule hands them: every option, unset ones None."""
    names = (
        "s3 directory key prefix backup path sha256 data_dir name initial_advertise_peer_urls "
        "initial_cluster initial_cluster_token"
    )
    return {
        **dict.fromkeys(names.split()),
        "state": "saved",
        "bump_revision": 1_000_000_000,
        "member_data_dir": None,
        **given,
    }


@pytest.mark.parametrize(
    ("given", "stored"),
    [({}, ""), ({"s3": S3}, "s3"), ({"directory": "/backup"}, "directory")],
)
def test_stored_in(given, stored):
    assert stored_in(params(**given)) == stored


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        # saved to a file
        ({"path": "/b/s.db"}, ""),
        ({}, "state=saved needs path"),
        ({"path": "/b/s.db", "key": "k"}, "key and prefix name snapshots in a store"),
        ({"path": "/b/s.db", "prefix": "p"}, "key and prefix name snapshots in a store"),
        ({"path": "/b/s.db", "backup": {"name": "n"}}, "backup goes into a manifest"),
        # saved into a store
        ({"s3": S3, "key": "k"}, ""),
        ({"directory": "/v", "prefix": "p", "backup": {"name": "n"}}, ""),
        ({"s3": S3}, "state=saved with s3 needs exactly one of key or prefix"),
        ({"directory": "/v", "key": "k", "prefix": "p"}, "with directory needs exactly one"),
        ({"s3": S3, "key": "k", "path": "/b/s.db"}, "writes no other file: drop path"),
        # fetched
        ({"state": "fetched", "s3": S3, "key": "k", "path": "/b/s.db"}, ""),
        (
            {"state": "fetched", "path": "/b/s.db"},
            "state=fetched needs s3 or directory, and key (or member_data_dir)",
        ),
        ({"state": "fetched", "s3": S3, "path": "/b/s.db"}, "state=fetched with s3 needs key"),
        (
            {"state": "fetched", "s3": S3, "key": "k", "path": "/b/s.db", "backup": {}},
            "",
        ),
        (
            {"state": "fetched", "s3": S3, "key": "k", "path": "/b/s.db", "backup": {"n": 1}},
            "backup goes into a manifest: only with state=saved and a store",
        ),
        ({"state": "fetched", "directory": "/v", "key": "k"}, "state=fetched needs path"),
        # restored, from a file or a store
        ({"state": "restored", "path": "/b/s.db"}, ""),
        ({"state": "restored"}, "state=restored needs path"),
        ({"state": "restored", "directory": "/v", "key": "k", "path": "/b/s.db"}, ""),
        (
            {"state": "restored", "directory": "/v", "path": "/b/s.db"},
            "state=restored with directory needs key (the snapshot to read)",
        ),
        # restored from a stopped member's own database
        ({"state": "restored", "member_data_dir": "/m", "path": "/b/s.db"}, ""),
        ({"state": "restored", "member_data_dir": "/m"}, "state=restored needs path"),
        (
            {"member_data_dir": "/m", "path": "/b/s.db"},
            "member_data_dir is a stopped member's database to copy out: only with "
            "state=fetched or state=restored",
        ),
        (
            {"state": "restored", "member_data_dir": "/m", "s3": S3, "key": "k", "path": "/s"},
            "member_data_dir and s3 are two sources: give one",
        ),
        (
            {"state": "restored", "member_data_dir": "/m", "directory": "/v", "path": "/s"},
            "member_data_dir and directory are two sources: give one",
        ),
        (
            {"state": "restored", "member_data_dir": "/m", "path": "/s", "sha256": A},
            "member_data_dir is copied and hashed here: drop sha256",
        ),
        (
            {"state": "restored", "member_data_dir": "/m", "path": "/s", "key": "k"},
            "member_data_dir is copied, not read from a store: drop key",
        ),
        # fetched from a stopped member's own database
        ({"state": "fetched", "member_data_dir": "/m", "path": "/b/s.db"}, ""),
        ({"state": "fetched", "member_data_dir": "/m"}, "state=fetched needs path"),
        (
            {"state": "fetched", "member_data_dir": "/m", "s3": S3, "key": "k", "path": "/s"},
            "member_data_dir and s3 are two sources: give one",
        ),
        (
            {"state": "fetched", "member_data_dir": "/m", "directory": "/v", "path": "/s"},
            "member_data_dir and directory are two sources: give one",
        ),
        (
            {"state": "fetched", "member_data_dir": "/m", "key": "k", "path": "/s"},
            "member_data_dir is copied, not read from a store: drop key",
        ),
        (
            {"state": "fetched", "member_data_dir": "/m", "prefix": "p", "path": "/s"},
            "member_data_dir is copied, not read from a store: drop prefix",
        ),
        (
            {"state": "fetched", "member_data_dir": "/m", "path": "/s", "sha256": A},
            "member_data_dir is copied and hashed here: drop sha256",
        ),
        (
            {"state": "fetched", "member_data_dir": "/m", "path": "/s", "backup": {"n": 1}},
            "backup goes into a manifest: only with state=saved and a store",
        ),
    ],
)
def test_request_problem(given, problem):
    found = request_problem(params(**given))
    assert (found == "") if problem == "" else (problem in found), found


def test_a_key_and_a_prefix_when_reading_name_the_prefix():
    # The argument spec makes key and prefix exclusive; this rule is the one behind it.
    found = request_problem(params(state="restored", s3=S3, key="k", prefix="p", path="/s.db"))
    assert found == "state=restored reads one snapshot: give key, not prefix"


RESTORE = {"data_dir": "/var/lib/etcd", "name": "e-0", "initial_advertise_peer_urls": ["u"]}


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        (RESTORE, ""),
        ({**RESTORE, "bump_revision": 0}, ""),
        ({**RESTORE, "bump_revision": -1}, "bump_revision must be 0 or more"),
        ({**RESTORE, "name": None}, "state=restored needs name"),
        ({}, "state=restored needs data_dir, name, initial_advertise_peer_urls"),
        ({**RESTORE, "initial_advertise_peer_urls": []}, "needs initial_advertise_peer_urls"),
        # the missing arguments are said before a bad bump
        ({"bump_revision": -1}, "state=restored needs data_dir, name"),
    ],
)
def test_restore_problem(given, problem):
    found = restore_problem(params(state="restored", **given))
    assert (found == "") if problem == "" else (problem in found), found


@pytest.mark.parametrize(
    ("given", "cluster", "token"),
    [
        ({}, "e-0=https://e-0:2380,https://x:2380", "restore-0123456789abcdef"),
        ({"initial_cluster": "e-0=u0,e-1=u1"}, "e-0=u0,e-1=u1", "restore-0123456789abcdef"),
        ({"initial_cluster_token": "mine"}, "e-0=https://e-0:2380,https://x:2380", "mine"),
    ],
)
def test_restore_settings_default_to_this_member_alone_and_a_token_of_the_snapshot(
    given, cluster, token
):
    urls = ["https://e-0:2380", "https://x:2380"]
    settings = restore_settings(
        params(name="e-0", initial_advertise_peer_urls=urls, **given), "0123456789abcdef" * 4
    )
    assert settings == {
        "name": "e-0",
        "initial_cluster": cluster,
        "initial_cluster_token": token,
        "initial_advertise_peer_urls": "https://e-0:2380,https://x:2380",
        "bump_revision": 1_000_000_000,
    }


@pytest.mark.parametrize(
    ("given", "manifest", "expected"),
    [
        (None, {"sha256": A}, A),
        (f"  {B.upper()}\n", {"sha256": A}, B),  # as sha256sum prints it, any case
        (B, None, B),
        (None, None, ""),
        (None, {}, ""),  # an unreadable manifest says nothing
        ("", {"size": 3}, ""),
    ],
)
def test_expected_sha256(given, manifest, expected):
    assert expected_sha256(given, manifest) == expected


@pytest.mark.parametrize(
    ("expected", "manifest", "size", "problem"),
    [
        (A, {"sha256": A, "size": 10}, 10, ""),
        (A, None, 10, ""),
        (A, {}, 10, ""),
        (B, {"size": 10}, 99, ""),  # no sha256 recorded: the given one is checked on the way
        (B, {"sha256": A, "size": 10}, 10, f"is recorded with sha256 {A}, not the expected {B}"),
        (A, {"sha256": A, "size": 10}, 9, "is 9 bytes, not the 10 its manifest records"),
        (A, {"sha256": A}, 9, "is 9 bytes, not the None its manifest records"),
    ],
)
def test_manifest_problem(expected, manifest, size, problem):
    found = manifest_problem("s3://b/k", expected, manifest, size)
    assert (found == "") if problem == "" else (problem in found), found
    assert not found or found.startswith("snapshot s3://b/k ")
