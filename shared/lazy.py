"""Things made on first use, once: the composition roots' clients that most invocations never need."""

from __future__ import annotations

import threading
from collections.abc import Callable

# Clients made after cold start may be made on pool threads (the worker's), and boto3's default
# session is not thread-safe: by default they take turns on one lock.
CLIENT_LOCK = threading.Lock()


def once[T](make: Callable[[], T], lock: threading.Lock = CLIENT_LOCK) -> Callable[[], T]:
    """`make()` on the first call (callers take turns on `lock`), the same object on every later one."""
    made: list[T] = []

    def get() -> T:
        with lock:
            if not made:
                made.append(make())
            return made[0]

    return get
