"""API keys and tenants: with keys configured, every request names one (`X-API-Key` header, an
OpenAPI security scheme, so /docs has an Authorize button), and the key's tenant owns what the
request makes. Without keys the service is open and everything belongs to the tenant `public`.

`Tenant` is the dependency routes take; `tenant_of` the same check on a mapping of headers."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping, Sequence
from typing import Annotated

from fastapi import Request, Security
from fastapi.security import APIKeyHeader

from service.errors import FoleyError

PUBLIC = "public"


class Unauthorized(FoleyError, code="unauthorized", status=401):
    pass


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


API_KEY = APIKeyHeader(
    name="X-API-Key",
    scheme_name="ApiKey",
    description="Required when the service has keys (FOLEY_API_KEYS).",
    auto_error=False,
)


def _tenant(request: Request, key: Annotated[str | None, Security(API_KEY)] = None) -> str:
    return tenant_of({"x-api-key": key or ""}, request.app.state.foley.settings.api_keys)


Tenant = Annotated[str, Security(_tenant)]
