"""A circuit breaker for the cache store: after a few failures in a row, stop asking for a while.

    closed --`failures` failures in a row--> open --`reset_s` later, one caller--> half-open
    half-open --that trial call succeeds--> closed;  --it fails--> open (for another `reset_s`)

The caller asks `allow()` before a call and reports the outcome with `record_success()` or
`record_failure()`. While open, `allow()` is False at no cost, so a dead store costs a request
nothing. In half-open exactly one caller gets True (the trial); the others keep skipping until it
reports. A trial that never reports (its caller died) is replaced by a new one after `reset_s`.

Thread-safe: one lock guards the state; it is held only to read and update it, never across the
guarded call, so callers on several threads never queue behind one another's slow call.

Written here rather than taken from pybreaker (the well-kept library for this): pybreaker's
`CircuitBreaker.call` holds the breaker's lock for the whole guarded call, which would put every
cache call of every thread in one line behind the one waiting out its timeout; it reads the wall
clock (`datetime.now`), which jumps; and it takes no clock to test with. The class below is
sixty lines.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Literal

State = Literal["closed", "open", "half-open"]


class CircuitBreaker:
    def __init__(
        self, failures: int, reset_s: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if failures < 1 or reset_s <= 0:
            raise ValueError(f"need failures >= 1 and reset_s > 0, got {failures}, {reset_s}")
        self.failures = failures
        self.reset_s = reset_s
        self._clock = clock
        self._lock = threading.Lock()
        self._state: State = "closed"
        self._failed = 0  # consecutive failures while closed
        self._since = 0.0  # when it opened, or when the half-open trial started

    @property
    def state(self) -> State:
        return self._state

    @property
    def closed(self) -> bool:
        return self._state == "closed"

    def allow(self) -> bool:
        """May a call go through now? In half-open, True for the one trial caller only."""
        with self._lock:
            if self._state == "closed":
                return True
            if self._clock() - self._since < self.reset_s:
                return False  # open and waiting, or half-open with a trial in flight
            self._state = "half-open"
            self._since = self._clock()
            return True

    def record_success(self) -> bool:
        """-> True when this success closed a breaker that was not closed."""
        with self._lock:
            self._failed = 0
            if self._state != "half-open":
                # Open: a call let through before it opened came back late; the trial decides.
                return False
            self._state = "closed"
            return True

    def record_failure(self) -> bool:
        """-> True when this failure opened a closed breaker (not a failed trial's reopening)."""
        with self._lock:
            if self._state == "closed":
                self._failed += 1
                if self._failed < self.failures:
                    return False
                self._open()
                return True
            if self._state == "half-open":
                self._open()
            return False

    def _open(self) -> None:
        self._state = "open"
        self._failed = 0
        self._since = self._clock()
