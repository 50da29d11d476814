"""The checker itself, on histories whose answer is known: it must tell a linearizable history
from one that is not, or the chaos runs prove nothing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chaos.history import check

pytestmark = pytest.mark.etcd


def put(client: int, key: str, value: str, call: int, ret: int | None) -> dict[str, Any]:
    op: dict[str, Any] = {"client": client, "op": "put", "key": key, "value": value, "call": call}
    if ret is not None:
        op["return"] = ret
    return op


def get(client: int, key: str, value: str | None, call: int, ret: int) -> dict[str, Any]:
    return {"client": client, "op": "get", "key": key, "value": value, "call": call, "return": ret}


@pytest.mark.parametrize(
    "ops, result",
    [
        # Sequential: a get after a put returned reads it.
        ([put(0, "k", "1", 1, 5), get(1, "k", "1", 6, 8)], "ok"),
        # An acknowledged write lost: a later get reads the key absent.
        ([put(0, "k", "1", 1, 5), get(1, "k", None, 6, 8)], "illegal"),
        # A stale read: the older of two sequential puts read after both returned.
        ([put(0, "k", "1", 1, 2), put(0, "k", "2", 3, 4), get(1, "k", "1", 5, 6)], "illegal"),
        # A value that was never written.
        ([put(0, "k", "1", 1, 2), get(1, "k", "9", 3, 4)], "illegal"),
        # Concurrent with the put: either answer is right.
        ([put(0, "k", "1", 1, 10), get(1, "k", None, 2, 3)], "ok"),
        ([put(0, "k", "1", 1, 10), get(1, "k", "1", 2, 3)], "ok"),
        # A put whose outcome is unknown may have happened, late...
        ([put(0, "k", "1", 1, None), get(1, "k", None, 2, 3), get(1, "k", "1", 4, 5)], "ok"),
        # ... or never.
        ([put(0, "k", "1", 1, None), get(1, "k", None, 20, 30)], "ok"),
        # But once read it stays (a read may not go back in time).
        ([put(0, "k", "1", 1, None), get(1, "k", "1", 2, 3), get(1, "k", None, 4, 5)], "illegal"),
        # Keys are independent registers.
        ([put(0, "a", "1", 1, 2), put(1, "b", "2", 1, 2), get(2, "a", "1", 3, 4)], "ok"),
        ([put(0, "a", "1", 1, 2), get(2, "b", "1", 3, 4)], "illegal"),
    ],
)
def test_the_checker_tells_linearizable_histories_from_others(ops, result):
    assert check(ops)["result"] == result


def test_bad_input_is_an_error_not_a_verdict():
    with pytest.raises(RuntimeError, match="neither put nor get"):
        check([{"client": 0, "op": "delete", "key": "k", "call": 1, "return": 2}])
