"""The job store contract, for both stores: atomic idempotent create, compare-and-set moves,
deletion, expiry of finished records only."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from service.errors import Problem
from service.jobs.records import JobRecord, new_job_id
from service.jobs.store import Caps, Full, MemoryJobStore, RedisJobStore, Transition
from service.pipeline.types import RenderOptions


@pytest.fixture(params=["memory", "redis"])
def store(request):
    if request.param == "memory":
        return MemoryJobStore()
    server = request.getfixturevalue("redis_server")
    return RedisJobStore.from_url(server.url)


def record(key: str | None = None, tenant: str = "t1") -> JobRecord:
    return JobRecord(
        id=new_job_id(), tenant=tenant, options=RenderOptions(tier="export"),
        idempotency_key=key,
    )  # fmt: skip


def test_a_record_round_trips(store):
    r = record()
    assert store.create(r) == r
    assert store.get(r.id) == r
    assert store.get(new_job_id()) is None
    assert store.active_count() == 1 and store.active_ids() == [r.id]


def test_an_idempotency_key_makes_one_job_per_tenant(store):
    first = store.create(record("k"))
    again = store.create(record("k"))
    assert again.id == first.id
    other_tenant = store.create(record("k", tenant="t2"))
    assert other_tenant.id != first.id
    assert store.active_count() == 2


def test_concurrent_creates_with_one_key_make_one_job(store):
    with ThreadPoolExecutor(8) as pool:
        ids = set(pool.map(lambda _: store.create(record("same")).id, range(32)))
    assert len(ids) == 1


def test_transition_is_a_compare_and_set(store):
    r = store.create(record())
    started = store.transition(
        r.id, Transition({"queued"}, {"state": "running", "attempts": 1}, attempts=0)
    )
    assert started is not None and started.state == "running" and started.attempts == 1
    # A second start with the old attempt count loses, whatever the state allows.
    assert (
        store.transition(r.id, Transition({"queued", "running"}, {"attempts": 1}, attempts=0))
        is None
    )
    assert store.transition(r.id, Transition({"queued"}, {"state": "cancelled"})) is None
    error = Problem("x", "why")
    failed = store.transition(r.id, Transition({"running"}, {"state": "failed", "error": error}))
    assert failed is not None and failed.error == error and failed.finished
    assert store.get(r.id) == failed
    assert store.active_count() == 0


def test_racing_starts_have_one_winner(store):
    r = store.create(record())

    def start(_):
        start = Transition({"queued", "running"}, {"state": "running", "attempts": 1}, attempts=0)
        return store.transition(r.id, start)

    with ThreadPoolExecutor(8) as pool:
        winners = [w for w in pool.map(start, range(16)) if w is not None]
    assert len(winners) == 1


def test_only_finished_records_expire(store):
    active, done = store.create(record("a")), store.create(record("b"))
    store.transition(done.id, Transition({"queued"}, {"state": "cancelled"}, ttl_s=1))
    time.sleep(1.6)
    assert store.get(active.id) is not None
    assert store.get(done.id) is None
    # The expired job's idempotency key is free again.
    assert store.create(record("b")).id != done.id


def test_delete_removes_the_record_and_frees_its_key(store):
    first = store.create(record("k"))
    store.transition(
        first.id, Transition({"queued"}, {"state": "running", "attempts": 1}, attempts=0)
    )
    kept = store.create(record())
    deleted = store.delete(first.id)
    assert deleted is not None and deleted.id == first.id and deleted.state == "running"
    assert store.get(first.id) is None and store.delete(first.id) is None
    assert (
        store.transition(first.id, Transition({"running"}, {"progress": 0.5})) is None
    )  # its attempt stops
    assert store.active_count() == 1 and store.get(kept.id) == kept
    assert store.create(record("k")).id != first.id


def test_caps_hold_under_concurrent_creates(store):
    caps = Caps(total=5, per_tenant=3)

    def create(i):
        try:
            return store.create(record(tenant=f"t{i % 2}"), caps).tenant
        except Full as full:
            return full.scope

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(create, range(40)))
    made = [o for o in outcomes if o not in ("total", "tenant")]
    assert len(made) == 5 and max(made.count("t0"), made.count("t1")) == 3
    assert store.active_count() == 5
    assert store.active_count("t0") + store.active_count("t1") == 5


def test_a_finished_job_frees_its_place_under_the_caps(store):
    caps = Caps(total=10, per_tenant=1)
    first = store.create(record(), caps)
    with pytest.raises(Full) as full:
        store.create(record(), caps)
    assert full.value.scope == "tenant"
    store.transition(first.id, Transition({"queued"}, {"state": "cancelled"}))
    assert store.active_count("t1") == 0
    second = store.create(record(), caps)
    store.delete(second.id)
    assert store.create(record(), caps).state == "queued"
    # A replayed idempotency key is its first job, whatever the caps say now.
    keyed = store.create(record("k", tenant="t2"), Caps(total=10, per_tenant=1))
    assert store.create(record("k", tenant="t2"), Caps(total=0)).id == keyed.id
