"""The HTTP server around the app: uvicorn, configured once for `foley serve` and the tests."""

from __future__ import annotations

from typing import TYPE_CHECKING

from service.config import Settings

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI

# Without it, open WebSockets keep the process alive forever after SIGTERM.
GRACEFUL_SHUTDOWN_S = 30
WS_PING_S = 20.0


def serve(settings: Settings) -> None:
    """Run the API until it is stopped."""
    import uvicorn

    from service.api import create_app
    from service.api.logs import configure_root

    configure_root(settings.api_keys, settings.log_format)
    uvicorn.Server(uvicorn_config(create_app(settings), settings)).run()


def uvicorn_config(app: FastAPI, settings: Settings) -> uvicorn.Config:
    import uvicorn

    from service.api.logs import server_log_config
    from service.api.protocol import head_deadline_protocol

    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        http=head_deadline_protocol(settings.request_head_timeout_s),
        log_config=server_log_config(settings.api_keys, settings.log_format),
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        limit_concurrency=settings.max_connections,
        # uvicorn's default is 16 MiB: the largest frame a preview session may send is enough.
        ws_max_size=settings.preview_max_frame_pixels * 3 + 64,
        ws_ping_interval=WS_PING_S,
        ws_ping_timeout=WS_PING_S,
        # Compression costs CPU per message and invites decompression bombs; frames are
        # already compressed media.
        ws_per_message_deflate=False,
    )
