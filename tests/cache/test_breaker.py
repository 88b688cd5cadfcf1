"""The circuit breaker's state machine, on a fake clock."""

from __future__ import annotations

import threading

import pytest

from service.cache.breaker import CircuitBreaker
from tests.cache.servers import FakeClock

FAILURES, RESET_S = 3, 10.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def breaker(clock: FakeClock) -> CircuitBreaker:
    return CircuitBreaker(FAILURES, RESET_S, clock=clock)


def trip(breaker: CircuitBreaker) -> None:
    for _ in range(FAILURES):
        assert breaker.allow()
        breaker.record_failure()
    assert breaker.state == "open"


def test_closed_lets_every_call_through(breaker: CircuitBreaker) -> None:
    assert breaker.state == "closed" and breaker.closed
    assert all(breaker.allow() for _ in range(100))


def test_opens_after_consecutive_failures_and_says_so_once(breaker: CircuitBreaker) -> None:
    opened = [breaker.record_failure() for _ in range(FAILURES)]
    assert opened == [False] * (FAILURES - 1) + [True]
    assert breaker.state == "open" and not breaker.closed
    assert not breaker.allow()
    assert breaker.record_failure() is False  # already open: not news


def test_a_success_resets_the_count_of_failures_in_a_row(breaker: CircuitBreaker) -> None:
    for _ in range(5):
        for _ in range(FAILURES - 1):
            breaker.record_failure()
        assert breaker.record_success() is False  # was closed: nothing closed
    assert breaker.state == "closed"


def test_open_refuses_until_the_reset_time(breaker: CircuitBreaker, clock: FakeClock) -> None:
    trip(breaker)
    clock.advance(RESET_S - 0.001)
    assert not breaker.allow()
    assert breaker.state == "open"


def test_half_open_lets_exactly_one_trial_through(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    trip(breaker)
    clock.advance(RESET_S)
    assert breaker.allow()
    assert breaker.state == "half-open"
    assert not breaker.allow()
    assert not breaker.closed


def test_a_successful_trial_closes_it(breaker: CircuitBreaker, clock: FakeClock) -> None:
    trip(breaker)
    clock.advance(RESET_S)
    assert breaker.allow()
    assert breaker.record_success() is True
    assert breaker.state == "closed"
    assert all(breaker.allow() for _ in range(10))
    # And it takes FAILURES new failures in a row to open it again.
    assert [breaker.record_failure() for _ in range(FAILURES)][-1] is True


def test_a_failed_trial_reopens_it_for_another_reset_time(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    trip(breaker)
    clock.advance(RESET_S)
    assert breaker.allow()
    assert breaker.record_failure() is False  # a reopening, not a new outage
    assert breaker.state == "open"
    clock.advance(RESET_S - 0.001)
    assert not breaker.allow()
    clock.advance(0.001)
    assert breaker.allow()


def test_a_trial_that_never_reports_is_replaced_after_the_reset_time(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    trip(breaker)
    clock.advance(RESET_S)
    assert breaker.allow()  # this trial's caller never comes back
    clock.advance(RESET_S)
    assert breaker.allow()
    assert not breaker.allow()


def test_a_late_success_does_not_close_an_open_breaker(breaker: CircuitBreaker) -> None:
    trip(breaker)
    assert breaker.record_success() is False  # a call let through before it opened
    assert breaker.state == "open"


def test_one_trial_among_many_threads(breaker: CircuitBreaker, clock: FakeClock) -> None:
    trip(breaker)
    clock.advance(RESET_S)
    start = threading.Barrier(16)
    allowed: list[bool] = []

    def ask() -> None:
        start.wait()
        allowed.append(breaker.allow())

    threads = [threading.Thread(target=ask) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(allowed) == [False] * 15 + [True]


@pytest.mark.parametrize(("failures", "reset_s"), [(0, 1.0), (1, 0.0)])
def test_nonsense_settings_are_refused(failures: int, reset_s: float) -> None:
    with pytest.raises(ValueError):
        CircuitBreaker(failures, reset_s)
