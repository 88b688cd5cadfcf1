"""What a route is given, as FastAPI dependencies: the service's state, the caller's tenant,
the default engine once it is ready, and an upload received under the service's limits."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import Depends, Request

from service.api.auth import Tenant
from service.api.state import ServiceState, get_state
from service.api.uploads import Upload, receive_upload
from service.pipeline.loading import Engine

__all__ = ["ReadyEngine", "State", "Tenant", "receive"]

State = Annotated[ServiceState, Depends(get_state)]


def _ready_engine(state: State) -> Engine:
    return state.ready_engine()


ReadyEngine = Annotated[Engine, Depends(_ready_engine)]


async def receive(
    request: Request, state: ServiceState, path: Path, fields: frozenset[str]
) -> Upload:
    """The request's upload, written to `path`, within the service's upload slots and limits."""
    settings = state.settings
    with state.uploads.take():
        return await receive_upload(
            request,
            path,
            max_bytes=settings.max_upload_bytes,
            fields=fields,
            idle_timeout_s=settings.upload_idle_timeout_s,
            min_bytes_per_s=settings.upload_min_bytes_per_s,
        )
