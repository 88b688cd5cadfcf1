"""HEAD on every GET route (probes and CDNs ask with it), as the GET without its body.

ASGI middleware: a HEAD request runs as the GET it stands for; the response's status and
headers (Content-Length included) go out, its body does not. Routes and the OpenAPI schema stay
GET-only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.types import Message, Receive, Scope, Send


class HeadAsGet:
    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return
        ended = False

        async def headers_only(message: Message) -> None:
            nonlocal ended
            if message["type"] == "http.response.body":
                if ended:
                    return
                if message.get("more_body", False):
                    return  # drop the body, end once it ends
                ended = True
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, headers_only)
