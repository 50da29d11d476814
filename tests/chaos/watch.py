"""A watcher as a client of etcd sees one: it watches a prefix from a start revision and, when
the stream breaks (its member killed, cut off, without a leader), watches again from the
revision after the last event it got. What it saw is checked against what etcd promises a
watcher and what the writers were told (`problems`): every revision once and in order, no
value that was never written, every acknowledged put among the events, and no compaction
in the way."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
from etcd3aio._protobuf import WatchCreateRequest, WatchRequest, WatchStub

# etcd cancels a watch that asks for it when its member has no leader; without it, a watch on
# a member cut off from its peers waits silently for as long as the cut lasts.
REQUIRE_LEADER = [("hasleader", "true")]


@dataclass(frozen=True)
class Event:
    revision: int
    key: str
    value: str
    deleted: bool


def _prefix_end(prefix: str) -> bytes:
    """The range end that makes a watch of every key under `prefix` (its last byte plus one)."""
    raw = prefix.encode()
    return raw[:-1] + bytes([raw[-1] + 1])


@dataclass
class Watcher:
    """Watches `prefix` from `start` + 1 through `stub()`'s channel until `finish`; bounded
    by `max_seconds` whatever happens."""

    stub: Callable[[], WatchStub]
    prefix: str
    start: int
    max_seconds: float = 1800
    events: list[Event] = field(default_factory=list)
    reconnects: int = 0
    compacted: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _call: Any = None
    _thread: threading.Thread | None = None

    @property
    def next_revision(self) -> int:
        return self.events[-1].revision + 1 if self.events else self.start + 1

    def begin(self) -> Watcher:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def finish(self, end: int, timeout: float = 60) -> bool:
        """Waits until the watch has got every revision up to `end` (or `timeout`), then stops
        it. True when it caught up."""
        deadline = time.monotonic() + timeout
        while self.next_revision <= end and time.monotonic() < deadline and not self.compacted:
            time.sleep(0.2)
        caught_up = self.next_revision > end
        self._stop.set()
        if self._call is not None:
            self._call.cancel()
        if self._thread is not None:
            self._thread.join(30)
        return caught_up

    def _requests(self, revision: int, ended: threading.Event) -> Iterator[WatchRequest]:
        yield WatchRequest(
            create_request=WatchCreateRequest(
                key=self.prefix.encode(),
                range_end=_prefix_end(self.prefix),
                start_revision=revision,
            )
        )
        # The send side stays open for as long as the stream is read: etcd ends a watch
        # stream whose client closed its side.
        while not ended.wait(0.5) and not self._stop.is_set():
            pass

    def _run(self) -> None:
        deadline = time.monotonic() + self.max_seconds
        while not self._stop.is_set() and time.monotonic() < deadline and not self.compacted:
            ended = threading.Event()
            try:
                self._call = self.stub().Watch(
                    self._requests(self.next_revision, ended), metadata=REQUIRE_LEADER
                )
                for response in self._call:
                    if response.compact_revision:
                        self.compacted = response.compact_revision
                        return
                    if response.canceled:
                        break
                    self.events.extend(
                        Event(
                            e.kv.mod_revision, e.kv.key.decode(), e.kv.value.decode(), e.type == 1
                        )
                        for e in response.events
                    )
            except grpc.RpcError:
                pass  # the stream broke: watched again below, from the next revision
            finally:
                ended.set()
            if not self._stop.is_set():
                self.reconnects += 1
                self._stop.wait(0.2)


def problems(
    events: list[Event],
    start: int,
    end: int,
    puts: list[dict[str, Any]],
    compacted: int = 0,
    others: bool = False,
) -> list[str]:
    """What is wrong with what a watcher of (`start`, `end`] saw, given every put the clients
    made (`puts`, History ops: those with a `return` were acknowledged) and no other writer of
    the revisions in that range; `others`: another writer, outside the watched keys, takes
    revisions too, so a revision not seen is no fault (the order, and every acknowledged put
    seen, still are). Empty when nothing is wrong."""
    found: list[str] = []
    if compacted:
        found.append(f"the watch was told of compaction at revision {compacted}")
    revisions = [e.revision for e in events]
    found += [f"revision {b} came after {a}" for a, b in itertools.pairwise(revisions) if b <= a][
        :5
    ]
    missed = [] if others else sorted(set(range(start + 1, end + 1)) - set(revisions))
    if missed:
        found.append(f"{len(missed)} revisions never seen, the first {missed[:5]}")
    beyond = [r for r in revisions if not start < r <= end]
    if beyond:
        found.append(f"revisions outside ({start}, {end}]: {beyond[:5]}")
    written = {(p["key"], p["value"]) for p in puts}
    seen = {(e.key, e.value) for e in events if not e.deleted}
    found += [
        f"{e.key} deleted at revision {e.revision}, and no client deletes"
        if e.deleted
        else f"{e.key}={e.value} at revision {e.revision} was never written"
        for e in events
        if e.deleted or (e.key, e.value) not in written
    ][:5]
    unseen = [p for p in puts if "return" in p and (p["key"], p["value"]) not in seen]
    if unseen:
        found.append(
            f"{len(unseen)} acknowledged puts never seen, the first "
            f"{[(p['key'], p['value']) for p in unseen[:5]]}"
        )
    return found
