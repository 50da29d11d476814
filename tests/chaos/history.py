"""A history of client operations on etcd keys, recorded as clients see them, and the check
that it is linearizable (hack/lincheck: porcupine, one key at a time).

Each operation is recorded with one monotonic clock's nanoseconds at its call and at its
return. A put whose outcome the client never learned (an error, a timeout) is recorded
without a return: it may have taken effect at any time after its call, or never. A get that
failed is left out (it says nothing). What the checker says of such a history is what etcd
promises its clients: one order of every operation that respects real time, in which every
get reads the latest put of its key, so no acknowledged write is lost and no value read was
never written."""

from __future__ import annotations

import functools
import json
import random
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


@dataclass
class History:
    ops: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _add(self, op: dict[str, Any]) -> None:
        with self.lock:
            self.ops.append(op)

    def put(self, client: int, key: str, value: str, do: Callable[[], None]) -> bool:
        """Run `do` (a put of `value` at `key`) and record it; True when acknowledged."""
        call = time.monotonic_ns()
        try:
            do()
        except Exception:  # an unacknowledged put: it may or may not have taken effect
            self._add({"client": client, "op": "put", "key": key, "value": value, "call": call})
            return False
        self._add(
            {
                "client": client,
                "op": "put",
                "key": key,
                "value": value,
                "call": call,
                "return": time.monotonic_ns(),
            }
        )
        return True

    def get(self, client: int, key: str, do: Callable[[], str | None]) -> str | None:
        """Run `do` (a linearizable get of `key`) and record what it read; a failed get is
        not recorded and reads None."""
        call = time.monotonic_ns()
        try:
            value = do()
        except Exception:  # a failed read says nothing
            return None
        self._add(
            {
                "client": client,
                "op": "get",
                "key": key,
                "value": value,
                "call": call,
                "return": time.monotonic_ns(),
            }
        )
        return value


def run_client(
    h: History,
    n: int,
    seed: int,
    stop: threading.Event,
    keys: list[str],
    put: Callable[[str, str], None],
    get: Callable[[str], str | None],
    pause: float = 0.0,
    limit: int = 1_000_000,
) -> None:
    """Client `n`: until `stop` (or `limit` operations), puts a value of its own (half the
    time) or gets, on a key picked by a generator seeded from `seed` and `n`, so a seed replays
    every client's choices. After a failed put it waits `pause` s, and after a failed get a
    quarter of it: a store that refuses at once is not hammered."""
    rng = random.Random(seed * 100 + n)
    for i in range(limit):
        if stop.is_set():
            return
        key = rng.choice(keys)
        if rng.random() < 0.5:
            value = f"{n}-{i}"
            if not h.put(n, key, value, functools.partial(put, key, value)) and pause:
                stop.wait(pause)
        elif h.get(n, key, functools.partial(get, key)) is None and pause:
            stop.wait(pause / 4)


def lincheck_binary() -> Path:
    """The checker, built through the Go module proxy the first time (hack/lincheck-bin)."""
    out = subprocess.run(
        [str(REPO / "hack" / "lincheck-bin")], capture_output=True, text=True, check=True
    )
    return Path(out.stdout.strip())


def check(
    ops: list[dict[str, Any]], timeout: str = "2m", visualize: Path | None = None
) -> dict[str, Any]:
    """The checker's verdict on `ops`: {"result": "ok" | "illegal" | "unknown", ...}."""
    args = [str(lincheck_binary()), f"-timeout={timeout}"]
    if visualize is not None:
        args.append(f"-visualize={visualize}")
    proc = subprocess.run(
        args,
        input="".join(json.dumps(op) + "\n" for op in ops),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode not in (0, 1, 2):
        raise RuntimeError(f"lincheck failed ({proc.returncode}): {proc.stderr.strip()}")
    verdict: dict[str, Any] = json.loads(proc.stdout)
    return verdict
