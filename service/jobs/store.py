"""Where job records live: in this process (embedded mode) or in the broker's Redis.

Both stores give the same guarantees:
- `create` is atomic with its idempotency key: two requests with one key get one job.
- `transition` is a compare-and-set on the record's state (and, for starts, on `attempts`), so
  of two processes racing to move a job, exactly one does.
- Active records never expire; a finished record (and its idempotency key) expires `ttl_s`
  after it finished.

Redis keeps a record as a hash of JSON-encoded fields; every multi-step change is one Lua script,
so it is atomic without WATCH loops. Job records want the broker Redis (noeviction, AOF), not the
cache Redis, which may evict anything.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, is_dataclass
from typing import Any, Protocol, cast

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from service.jobs.records import ACTIVE, JobRecord


@dataclass(frozen=True)
class Caps:
    """How many jobs may be queued or running: in all, and of one tenant."""

    total: int | None = None
    per_tenant: int | None = None


NO_CAPS = Caps()


@dataclass(frozen=True)
class Transition:
    """A compare-and-set step of a job's record: `changes` applied if its state is in `expect`
    and, when `attempts` is given, its attempts equal it (a start, and each step of an attempt,
    check that the job is still theirs). `ttl_s`: the record (and its idempotency key) expire
    that long from now."""

    expect: Collection[str]
    changes: Mapping[str, Any]
    attempts: int | None = None
    ttl_s: float | None = None


class Full(Exception):
    """A cap of `Caps` would be passed: `scope` is "total" or "tenant"."""

    def __init__(self, scope: str, cap: int) -> None:
        super().__init__(f"{cap} jobs of the {scope} cap are queued or running")
        self.scope, self.cap = scope, cap


class JobStore(Protocol):
    """Thread-safe."""

    def create(self, record: JobRecord, caps: Caps = NO_CAPS) -> JobRecord:
        """Store a new record; if its tenant already used its idempotency key, store nothing and
        return that job's record instead (compare ids to tell). A new job is refused (Full) if
        it would pass `caps`, counted in the same atomic step: the caps hold under concurrency."""
        ...

    def get(self, job_id: str) -> JobRecord | None: ...

    def transition(self, job_id: str, step: Transition) -> JobRecord | None:
        """The job's record after `step`, or None if the job is missing or moved on."""
        ...

    def delete(self, job_id: str) -> JobRecord | None:
        """Remove the record and its idempotency key; returns the record as it was (None if it
        was not there). A running attempt finds it gone at its next window and stops."""
        ...

    def active_count(self, tenant: str | None = None) -> int:
        """Jobs queued or running (the tenant's, when given)."""
        ...

    def active_ids(self) -> list[str]:
        """The ids of the jobs queued or running."""
        ...

    def healthy(self) -> bool:
        """Answering now (quickly: for /readyz)."""
        ...


def idempotency_slot(tenant: str, key: str) -> str:
    """The tenant's key, hashed: any length or character set makes one short store key."""
    return hashlib.sha256(f"{tenant}\0{key}".encode()).hexdigest()[:32]


class MemoryJobStore:
    """The embedded store: records in a dict, gone with the process (as are its jobs)."""

    def __init__(self) -> None:
        self._records: dict[str, tuple[JobRecord, float]] = {}  # id -> (record, expires)
        self._keys: dict[str, str] = {}  # idempotency slot -> job id
        self._lock = threading.Lock()

    def create(self, record: JobRecord, caps: Caps = NO_CAPS) -> JobRecord:
        with self._lock:
            self._sweep()
            slot = _slot(record)
            if slot is not None and self._keys.get(slot) in self._records:
                return self._records[self._keys[slot]][0]
            active = [r for r, _ in self._records.values() if r.state in ACTIVE]
            if caps.total is not None and len(active) >= caps.total:
                raise Full("total", caps.total)
            mine = sum(1 for r in active if r.tenant == record.tenant)
            if caps.per_tenant is not None and mine >= caps.per_tenant:
                raise Full("tenant", caps.per_tenant)
            if slot is not None:
                self._keys[slot] = record.id
            self._records[record.id] = (record, float("inf"))
            return record

    def get(self, job_id: str) -> JobRecord | None:
        with self._lock:
            self._sweep()
            item = self._records.get(job_id)
            return item[0] if item else None

    def transition(self, job_id: str, step: Transition) -> JobRecord | None:
        with self._lock:
            item = self._records.get(job_id)
            if item is None or item[0].state not in step.expect:
                return None
            record, expires = item
            if step.attempts is not None and record.attempts != step.attempts:
                return None
            record = record.updated(**step.changes)
            if step.ttl_s is not None:
                expires = time.monotonic() + step.ttl_s
            self._records[job_id] = (record, expires)
            return record

    def delete(self, job_id: str) -> JobRecord | None:
        with self._lock:
            item = self._records.pop(job_id, None)
            if item is None:
                return None
            slot = _slot(item[0])
            if slot is not None and self._keys.get(slot) == job_id:
                del self._keys[slot]
            return item[0]

    def active_ids(self) -> list[str]:
        with self._lock:
            return [i for i, (record, _) in self._records.items() if record.state in ACTIVE]

    def active_count(self, tenant: str | None = None) -> int:
        with self._lock:
            return sum(
                1
                for record, _ in self._records.values()
                if record.state in ACTIVE and tenant in (None, record.tenant)
            )

    def healthy(self) -> bool:
        return True

    def _sweep(self) -> None:
        now = time.monotonic()
        for job_id in [i for i, (_, expires) in self._records.items() if expires <= now]:
            record, _ = self._records.pop(job_id)
            slot = _slot(record)
            if slot is not None and self._keys.get(slot) == job_id:
                del self._keys[slot]


def _slot(record: JobRecord) -> str | None:
    if record.idempotency_key is None:
        return None
    return idempotency_slot(record.tenant, record.idempotency_key)


# KEYS: record, idempotency key (or ""), active set, the tenant's active set. ARGV: id, the
# records' key prefix, the total cap and the tenant's ("" for none), then field/value pairs.
_CREATE = """
local existing = KEYS[2] ~= '' and redis.call('GET', KEYS[2])
if existing and redis.call('EXISTS', ARGV[2] .. existing) == 1 then return existing end
if ARGV[3] ~= '' and redis.call('SCARD', KEYS[3]) >= tonumber(ARGV[3]) then
  return 'full:total'
end
if ARGV[4] ~= '' and redis.call('SCARD', KEYS[4]) >= tonumber(ARGV[4]) then
  return 'full:tenant'
end
if KEYS[2] ~= '' then redis.call('SET', KEYS[2], ARGV[1]) end
redis.call('HSET', KEYS[1], unpack(ARGV, 5))
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('SADD', KEYS[4], ARGV[1])
return ARGV[1]
"""

# KEYS: record, active set. ARGV: id, ttl (0: none), attempts ("" or the expected count),
# number of expected states, the states (JSON), then field/value pairs. The record's `_idem`
# field names its idempotency key, which expires with it.
_TRANSITION = """
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return false end
local n = tonumber(ARGV[4])
local ok = false
for i = 5, 4 + n do if ARGV[i] == state then ok = true end end
if not ok then return false end
if ARGV[3] ~= '' and redis.call('HGET', KEYS[1], 'attempts') ~= ARGV[3] then return false end
if #ARGV > 4 + n then redis.call('HSET', KEYS[1], unpack(ARGV, 5 + n)) end
local now = redis.call('HGET', KEYS[1], 'state')
if now ~= '"queued"' and now ~= '"running"' then
  redis.call('SREM', KEYS[2], ARGV[1])
  local mine = redis.call('HGET', KEYS[1], '_tenant_active')
  if mine then redis.call('SREM', cjson.decode(mine), ARGV[1]) end
end
local ttl = tonumber(ARGV[2])
if ttl > 0 then
  redis.call('EXPIRE', KEYS[1], ttl)
  local idem = redis.call('HGET', KEYS[1], '_idem')
  if idem then redis.call('EXPIRE', cjson.decode(idem), ttl) end
end
return redis.call('HGETALL', KEYS[1])
"""

# KEYS: record, active set. ARGV: id.
_DELETE = """
local raw = redis.call('HGETALL', KEYS[1])
if #raw == 0 then return false end
local idem = redis.call('HGET', KEYS[1], '_idem')
if idem then
  local key = cjson.decode(idem)
  if redis.call('GET', key) == ARGV[1] then redis.call('DEL', key) end
end
local mine = redis.call('HGET', KEYS[1], '_tenant_active')
if mine then redis.call('SREM', cjson.decode(mine), ARGV[1]) end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[1])
return raw
"""


PROBE_TIMEOUT_S = 0.25


class RedisJobStore:
    """Records in Redis (the broker's instance): shared by the API and every worker."""

    def __init__(
        self, client: redis.Redis, *, probe: redis.Redis | None = None, prefix: str = "foley:"
    ) -> None:
        self.client = client
        self._probe = probe or client
        self.prefix = prefix
        self._create = client.register_script(_CREATE)
        self._transition = client.register_script(_TRANSITION)
        self._delete = client.register_script(_DELETE)

    @classmethod
    def from_url(cls, url: str) -> RedisJobStore:
        # Records are the source of truth: the default retries ride out a broker restart. The
        # probe (/readyz) must answer at once: short timeouts, no retries.
        probe = redis.Redis.from_url(
            url,
            socket_connect_timeout=PROBE_TIMEOUT_S,
            socket_timeout=PROBE_TIMEOUT_S,
            retry=Retry(NoBackoff(), 0),
        )
        return cls(
            redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=10), probe=probe
        )

    def create(self, record: JobRecord, caps: Caps = NO_CAPS) -> JobRecord:
        idem_key = self._idem_key(_slot(record))
        mine = self._tenant_active(record.tenant)
        fields = record.to_fields() | {"_tenant_active": mine}
        fields |= {"_idem": idem_key} if idem_key else {}
        answer = self._create(
            keys=[self._key(record.id), idem_key, self._active, mine],
            args=[
                record.id,
                self._key(""),
                "" if caps.total is None else caps.total,
                "" if caps.per_tenant is None else caps.per_tenant,
                *_flatten(fields),
            ],
        ).decode()
        if answer.startswith("full:"):
            scope = answer.removeprefix("full:")
            cap = caps.total if scope == "total" else caps.per_tenant
            raise Full(scope, cap or 0)
        job_id = answer
        if job_id == record.id:
            return record
        existing = self.get(job_id)
        if existing is None:  # expired between the script and now: vanishingly rare
            raise redis.RedisError("an idempotent job expired while being looked up")
        return existing

    def get(self, job_id: str) -> JobRecord | None:
        # Bytes, not str: the clients are made without decode_responses.
        raw = cast("dict[bytes, bytes]", self.client.hgetall(self._key(job_id)))
        return _record(raw) if raw else None

    def transition(self, job_id: str, step: Transition) -> JobRecord | None:
        expect = [json.dumps(s) for s in step.expect]
        raw = self._transition(
            keys=[self._key(job_id), self._active],
            args=[
                job_id,
                max(1, round(step.ttl_s)) if step.ttl_s is not None else 0,
                "" if step.attempts is None else json.dumps(step.attempts),
                len(expect),
                *expect,
                *_flatten(step.changes),
            ],
        )
        if not raw:
            return None
        return _record(dict(zip(raw[::2], raw[1::2], strict=True)))

    def delete(self, job_id: str) -> JobRecord | None:
        raw = self._delete(keys=[self._key(job_id), self._active], args=[job_id])
        if not raw:
            return None
        return _record(dict(zip(raw[::2], raw[1::2], strict=True)))

    def active_ids(self) -> list[str]:
        members = cast("set[bytes]", self.client.smembers(self._active))  # bytes, as in `get`
        return sorted(m.decode() for m in members)

    def active_count(self, tenant: str | None = None) -> int:
        return int(
            self.client.scard(self._active if tenant is None else self._tenant_active(tenant))
        )

    def healthy(self) -> bool:
        try:
            return bool(self._probe.ping())
        except redis.RedisError:
            return False

    @property
    def _active(self) -> str:
        return self.prefix + "jobs:active"

    def _tenant_active(self, tenant: str) -> str:
        digest = hashlib.sha256(tenant.encode()).hexdigest()[:16]
        return f"{self.prefix}jobs:active:{digest}"

    def _key(self, job_id: str) -> str:
        return f"{self.prefix}job:{job_id}"

    def _idem_key(self, slot: str | None) -> str:
        return "" if slot is None else f"{self.prefix}idem:{slot}"


def _flatten(values: Mapping[str, Any]) -> list[str]:
    return [part for name, value in values.items() for part in (name, json.dumps(_plain(value)))]


def _plain(value: Any) -> Any:
    return asdict(value) if is_dataclass(value) and not isinstance(value, type) else value


def _record(raw: dict[bytes, bytes]) -> JobRecord:
    return JobRecord.from_fields({k.decode(): json.loads(v) for k, v in raw.items()})
