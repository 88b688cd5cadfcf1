"""API keys and tenants: with keys configured, every request names one (`X-API-Key` header), and
the key's tenant owns what the request makes. Without keys the service is open and everything
belongs to the tenant `public`."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping, Sequence

from service.errors import FoleyError

PUBLIC = "public"


class Unauthorized(FoleyError):
    code = "unauthorized"
    http_status = 401


def valid_key(given: str, keys: Sequence[str]) -> bool:
    # Every key compared in constant time: timing tells nothing about a near miss.
    return any(secrets.compare_digest(given.encode(), k.encode()) for k in keys)


def tenant_of(headers: Mapping[str, str], keys: Sequence[str]) -> str:
    """The request's tenant: a digest of its key, never the key itself (records outlive
    requests and are seen by operators)."""
    if not keys:
        return PUBLIC
    given = headers.get("x-api-key", "")
    if not valid_key(given, keys):
        raise Unauthorized("a valid API key is required (X-API-Key header)")
    return "k-" + hashlib.sha256(given.encode()).hexdigest()[:24]
