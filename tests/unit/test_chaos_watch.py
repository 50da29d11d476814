"""What a chaos run's watcher saw, checked (tests/chaos/watch.py): every revision once and in
order, nothing never written, every acknowledged put seen, no compaction in the way."""

from __future__ import annotations

import pytest

from tests.chaos.watch import Event, _prefix_end, problems


def put(key: str, value: str, acked: bool = True) -> dict[str, object]:
    op: dict[str, object] = {"op": "put", "key": key, "value": value, "call": 1}
    if acked:
        op["return"] = 2
    return op


PUTS = [put("c/0", "a"), put("c/1", "b"), put("c/0", "c", acked=False), put("c/1", "d")]
SEEN = [Event(11, "c/0", "a", False), Event(12, "c/1", "b", False), Event(13, "c/1", "d", False)]


@pytest.mark.parametrize(
    "events, end, puts, compacted, words",
    [
        # Every revision once, in order; the unacknowledged put never took effect.
        (SEEN, 13, PUTS, 0, []),
        # It took effect: seen, and written, so nothing wrong.
        ([*SEEN, Event(14, "c/0", "c", False)], 14, PUTS, 0, []),
        # Seen twice (a watch made again from too early a revision).
        ([*SEEN[:2], SEEN[1], SEEN[2]], 13, PUTS, 0, ["revision 12 came after 12"]),
        # Out of order.
        ([SEEN[1], SEEN[0], SEEN[2]], 13, PUTS, 0, ["revision 11 came after 12"]),
        # A revision never delivered (a watch made again from too late a revision): the
        # acknowledged put in it is missing too.
        (
            [SEEN[0], SEEN[2]],
            13,
            PUTS,
            0,
            ["1 revisions never seen, the first [12]", "1 acknowledged puts never seen"],
        ),
        # The last revision never came, nor the acknowledged put in it.
        (
            SEEN[:2],
            13,
            PUTS,
            0,
            [
                "1 revisions never seen, the first [13]",
                "acknowledged puts never seen, the first [('c/1', 'd')]",
            ],
        ),
        # A value no client wrote, and a delete no client made.
        (
            [*SEEN, Event(14, "c/0", "zz", False)],
            14,
            PUTS,
            0,
            ["c/0=zz at revision 14 was never written"],
        ),
        ([*SEEN, Event(14, "c/0", "", True)], 14, PUTS, 0, ["c/0 deleted at revision 14"]),
        # Past the end the run asked about.
        ([*SEEN, Event(15, "c/0", "c", False)], 13, PUTS, 0, ["revisions outside (10, 13]: [15]"]),
        # Compaction: the watcher could not be given what it asked for.
        (SEEN, 13, PUTS, 12, ["told of compaction at revision 12"]),
    ],
)
def test_problems(events, end, puts, compacted, words):
    found = problems(events, 10, end, puts, compacted)
    assert len(found) == len(words), found
    for said, expected in zip(found, words, strict=True):
        assert expected in said, found


@pytest.mark.parametrize("prefix, end", [("chaos/", b"chaos0"), ("a", b"b"), ("k\x7e", b"k\x7f")])
def test_the_range_end_covers_the_prefix(prefix, end):
    assert _prefix_end(prefix) == end


@pytest.mark.parametrize(
    "events, words",
    [
        # Another writer's revisions (12 to 21) between the clients' puts: not the watch's fault.
        (
            [
                Event(11, "c/0", "a", False),
                Event(22, "c/1", "b", False),
                Event(23, "c/1", "d", False),
            ],
            [],
        ),
        # Still a fault: an acknowledged put never seen, and the order broken.
        (
            [Event(12, "c/1", "b", False), Event(11, "c/0", "a", False)],
            ["revision 11 came after 12", "acknowledged puts never seen, the first [('c/1', 'd')]"],
        ),
    ],
    ids=["gaps-of-another-writer", "faults-still-found"],
)
def test_with_another_writer_only_gaps_are_forgiven(events, words):
    found = problems(events, 10, 30, PUTS, others=True)
    assert len(found) == len(words), found
    for said, expected in zip(found, words, strict=True):
        assert expected in said, found
