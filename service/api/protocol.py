"""uvicorn's h11 protocol with a deadline for each request's head.

uvicorn closes an idle keep-alive connection, and the app bounds a body (service.api.uploads),
but a client that sends its request line and headers a byte at a time holds a connection for
as long as it likes: the app never sees the request. Here the head must be complete within
`head_timeout_s` of its first byte (or of the connection), or the connection is closed.
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


class HeadDeadlineProtocol(H11Protocol):
    head_timeout_s = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_deadline: asyncio.TimerHandle | None = None
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:
            self._arm()  # a head under way (or the next one of a kept-alive connection)
        else:
            self._disarm()  # the head is in: the app (and its body deadlines) take over

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._head_deadline is None:
            self._head_deadline = self.loop.call_later(self.head_timeout_s, self._expired)

    def _disarm(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _expired(self) -> None:
        self._head_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.logger.info("closing a connection whose request head took over %g s",
                             self.head_timeout_s)  # fmt: skip
            self.transport.close()


def head_deadline_protocol(head_timeout_s: float) -> type[HeadDeadlineProtocol]:
    """The protocol class uvicorn instantiates (Config(http=...)), with this deadline."""
    return type("HeadDeadline", (HeadDeadlineProtocol,), {"head_timeout_s": head_timeout_s})
