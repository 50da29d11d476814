"""The figures of etcd's `benchmark` tool read from what it prints (bench/etcd_benchmark.py).

The samples are the tool's real stdout (go.etcd.io/etcd/v3/tools/benchmark v3.6.8, from
hack/etcd-benchmark-bin) against one etcd 3.6.16 on loopback, captured on 2026-11-28."""

from __future__ import annotations

import math

import pytest

from bench.etcd_benchmark import Summary, Workload, parse_summary, workloads

# put, 10 clients, default precision (%4.4f)
PUT_DEFAULT = """
Summary:
  Total:\t0.4881 secs.
  Slowest:\t0.0127 secs.
  Fastest:\t0.0004 secs.
  Average:\t0.0024 secs.
  Stddev:\t0.0018 secs.
  Requests/sec:\t4097.5207

Response time histogram:
  0.0004 [1]\t|
  0.0016 [617]\t|∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎
  0.0028 [986]\t|∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎
  0.0041 [185]\t|∎∎∎∎∎∎∎
  0.0053 [59]\t|∎∎
  0.0065 [66]\t|∎∎
  0.0078 [41]\t|∎
  0.0090 [15]\t|
  0.0102 [0]\t|
  0.0115 [5]\t|
  0.0127 [25]\t|∎

Latency distribution:
  10% in 0.0011 secs.
  25% in 0.0015 secs.
  50% in 0.0019 secs.
  75% in 0.0026 secs.
  90% in 0.0042 secs.
  95% in 0.0060 secs.
  99% in 0.0116 secs.
  99.9% in 0.0124 secs.

"""

# range --consistency=s, default precision: its first line names the run
RANGE_SERIALIZABLE = """bench with serializable range

Summary:
  Total:\t0.2158 secs.
  Slowest:\t0.0129 secs.
  Fastest:\t0.0001 secs.
  Average:\t0.0011 secs.
  Stddev:\t0.0011 secs.
  Requests/sec:\t9269.3613

Response time histogram:
  0.0001 [1]\t|
  0.0014 [1706]\t|∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎
  0.0027 [206]\t|∎∎∎∎
  0.0040 [44]\t|∎
  0.0052 [20]\t|
  0.0065 [12]\t|
  0.0078 [1]\t|
  0.0090 [1]\t|
  0.0103 [0]\t|
  0.0116 [2]\t|
  0.0129 [7]\t|

Latency distribution:
  10% in 0.0006 secs.
  25% in 0.0006 secs.
  50% in 0.0008 secs.
  75% in 0.0011 secs.
  90% in 0.0017 secs.
  95% in 0.0024 secs.
  99% in 0.0057 secs.
  99.9% in 0.0128 secs.
"""

# put, --precise (%g): 200 requests, so no 99.9% line
PUT_PRECISE = """
Summary:
  Total:\t0.070586436 secs.
  Slowest:\t0.004842463 secs.
  Fastest:\t0.00053805 secs.
  Average:\t0.0013940412300000001 secs.
  Stddev:\t0.0007330611810221893 secs.
  Requests/sec:\t2833.405556840977

Response time histogram:
  0.00053805 [1]\t|
  0.0009684913 [45]\t|∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎
  0.0013989326 [88]\t|∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎
  0.0018293739 [38]\t|∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎
  0.0022598152 [11]\t|∎∎∎∎∎
  0.0026902565 [6]\t|∎∎
  0.0031206978 [2]\t|
  0.0035511391 [2]\t|
  0.0039815804 [0]\t|
  0.004412021699999999 [5]\t|∎∎
  0.004842463 [2]\t|

Latency distribution:
  10% in 0.000764237 secs.
  25% in 0.001003112 secs.
  50% in 0.001231723 secs.
  75% in 0.001492821 secs.
  90% in 0.002161947 secs.
  95% in 0.002939273 secs.
  99% in 0.004453375 secs.

"""

# every put too large for --max-request-bytes: no summary, only errors
ALL_FAILED = """
Error distribution:
  [20]\tetcdserver: request is too large

"""

# A run where some requests failed prints both parts; composed from the two real ones above.
MIXED = PUT_DEFAULT + ALL_FAILED.lstrip("\n")


@pytest.mark.parametrize(
    "text, rps, p50, p90, p99, total, ok, errors",
    [
        (PUT_DEFAULT, 4097.5207, 0.0019, 0.0042, 0.0116, 0.4881, 2000, {}),
        (RANGE_SERIALIZABLE, 9269.3613, 0.0008, 0.0017, 0.0057, 0.2158, 2000, {}),
        (
            PUT_PRECISE,
            2833.405556840977,
            0.001231723,
            0.002161947,
            0.004453375,
            0.070586436,
            200,
            {},
        ),
        (ALL_FAILED, 0.0, None, None, None, None, 0, {"etcdserver: request is too large": 20}),
        (
            MIXED,
            4097.5207,
            0.0019,
            0.0042,
            0.0116,
            0.4881,
            2000,
            {"etcdserver: request is too large": 20},
        ),
    ],
)
def test_parse_summary(
    text: str,
    rps: float,
    p50: float | None,
    p90: float | None,
    p99: float | None,
    total: float | None,
    ok: int,
    errors: dict[str, int],
) -> None:
    got = parse_summary(text)
    assert got.rps == rps
    for pct, want in ((50.0, p50), (90.0, p90), (99.0, p99)):
        if want is None:
            assert pct not in got.percentiles and math.isnan(got.ms(pct))
        else:
            assert got.percentiles[pct] == want
            assert got.ms(pct) == pytest.approx(want * 1000)
    if total is None:
        assert math.isnan(got.total)
    else:
        assert got.total == total
    assert got.ok == ok
    assert got.errors == errors


def test_precise_percentiles_stop_where_the_tool_stops() -> None:
    # With 200 requests the tool prints no 99.9% line: it is absent, not zero.
    assert sorted(parse_summary(PUT_PRECISE).percentiles) == [10, 25, 50, 75, 90, 95, 99]
    assert 99.9 in parse_summary(PUT_DEFAULT).percentiles


@pytest.mark.parametrize(
    "text, words",
    [
        # A tool that died before its report (a dial error, killed).
        ("", "no summary"),
        ("dial error: context deadline exceeded\n", "no summary"),
        # A summary cut short: figures missing are an error, never a zero.
        ("\nSummary:\n  Total:\t0.4881 secs.\n", "lacks slowest, fastest, average, stddev, rps"),
    ],
)
def test_parse_summary_refuses(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_summary(text)


def test_summary_defaults() -> None:
    assert Summary(1.0, 2.0, 3.0, 4.0, 5.0, 6.0).errors == {}


@pytest.mark.parametrize(
    "workload, argv",
    [
        (
            Workload("put", ("put", "--key-size=8"), 100, 1, 1),
            ["--conns=1", "--clients=1", "put", "--key-size=8", "--total=100"],
        ),
        (
            Workload("range", ("range", "k", "--consistency=s"), 5, 50, 10),
            ["--conns=10", "--clients=50", "range", "k", "--consistency=s", "--total=5"],
        ),
    ],
)
def test_workload_argv(workload: Workload, argv: list[str]) -> None:
    assert workload.argv() == argv


def test_workloads_are_bounded() -> None:
    loads = workloads(total=20000, clients=50, conns=10)
    assert [w.total for w in loads] == [2000, 20000, 20000, 20000]
    assert [w.args[0] for w in loads] == ["put", "put", "range", "range"]
    assert {w.args[-1] for w in loads if w.args[0] == "range"} == {
        "--consistency=l",
        "--consistency=s",
    }
