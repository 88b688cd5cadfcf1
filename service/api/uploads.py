"""Receive a multipart upload into one file, never writing more than a byte cap to disk.

uvicorn has no request body limit and Starlette's `request.form()` spools file parts to disk
without one, so a client could fill the disk. Here the raw body is read chunk by chunk from
`request.stream()`, counted *before* it reaches the parser, and fed to python-multipart's push
parser; the request stops with 413 as soon as the count passes the cap (at once when
Content-Length already does). The cap covers the whole body, multipart framing included, so at
most `max_bytes` of file data ever reach the disk.

The parser's callbacks are synchronous and only collect bytes; the collected file data is
written by the coroutine in ~1 MiB batches in a worker thread, off the event loop. The same
thread hashes each batch (SHA-256, the result cache's key), so the file is read only once:
as it arrives.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect, Request

from service.api.errors import (
    BadMultipart,
    ClientDisconnected,
    UnsupportedContentType,
    UploadTimeout,
    UploadTooLarge,
)
from service.api.schemas import FoleyParams
from service.errors import InvalidInput

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks  # defined for type checkers only

FILE_FIELD = "file"
PARAM_FIELDS = frozenset(FoleyParams.model_fields)
MAX_FIELD_BYTES = 1024
FLUSH_BYTES = 1 << 20


@dataclass(frozen=True)
class Upload:
    path: Path
    filename: str | None  # as the client named it; never used to build a path
    size: int  # bytes of file data
    fields: dict[str, str]  # the other form fields (render parameters)
    sha256: str  # hex digest of the file data


def check_declared_length(headers: Headers, max_bytes: int) -> None:
    """Refuse before reading anything when Content-Length already exceeds the cap."""
    declared = headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise UploadTooLarge(f"the upload is {declared} bytes; the limit is {max_bytes}")


async def receive_upload(
    request: Request,
    path: Path,
    *,
    max_bytes: int,
    fields: frozenset[str] = PARAM_FIELDS,
    idle_timeout_s: float = 30.0,
    min_bytes_per_s: int = 0,
) -> Upload:
    """Stream the multipart body of `request`; its `file` part goes to `path`, and the text
    fields named in `fields` (others are refused) come back in `Upload.fields`. A body that
    sends nothing for `idle_timeout_s`, or averages under `min_bytes_per_s` once that long has
    passed, is UploadTimeout."""
    check_declared_length(request.headers, max_bytes)
    boundary = _boundary(request.headers.get("content-type"))
    parts = _Parts(known=fields)
    parser = MultipartParser(boundary, parts.callbacks())
    received = 0
    digest = hashlib.sha256()
    async with await anyio.open_file(path, "wb") as out:

        def write(data: bytes) -> None:
            # hashlib releases the GIL on large buffers: this runs beside the event loop.
            digest.update(data)
            out.wrapped.write(data)

        async def flush() -> None:
            await anyio.to_thread.run_sync(write, parts.take_file_data())

        try:
            async for chunk in _paced(request, idle_timeout_s, min_bytes_per_s):
                received += len(chunk)
                if received > max_bytes:
                    raise UploadTooLarge(f"the upload exceeds the limit of {max_bytes} bytes")
                parser.write(chunk)
                if len(parts.file_data) >= FLUSH_BYTES:
                    await flush()
            parser.finalize()
        except MultipartParseError as exc:
            raise BadMultipart(f"malformed multipart body: {exc}") from exc
        except ClientDisconnect as exc:
            raise ClientDisconnected("the client went away during the upload") from exc
        await flush()
    return parts.result(path, digest.hexdigest())


async def _paced(
    request: Request, idle_timeout_s: float, min_bytes_per_s: int
) -> AsyncIterator[bytes]:
    """The body's chunks, as long as they keep coming at a useful pace."""
    chunks = request.stream().__aiter__()
    started, received = time.monotonic(), 0
    while True:
        with anyio.move_on_after(idle_timeout_s) as waiting:
            try:
                chunk = await chunks.__anext__()
            except StopAsyncIteration:
                return
        if waiting.cancelled_caught:
            raise UploadTimeout(f"the upload sent nothing for {idle_timeout_s:g} s")
        received += len(chunk)
        elapsed = time.monotonic() - started
        if elapsed > idle_timeout_s and received < min_bytes_per_s * elapsed:
            raise UploadTimeout(
                f"the upload averages {received / elapsed:.0f} bytes/s, under the "
                f"{min_bytes_per_s} the service waits for"
            )
        yield chunk


MAX_BOUNDARY = 70


def _boundary(content_type: str | None) -> bytes:
    mime, options = parse_options_header(content_type)
    if mime != b"multipart/form-data":
        raise UnsupportedContentType(
            f"expected multipart/form-data with a {FILE_FIELD!r} part, got {content_type!r}"
        )
    boundary = options.get(b"boundary")
    if not boundary:
        raise BadMultipart("multipart/form-data without a boundary")
    if len(boundary) > MAX_BOUNDARY:
        raise BadMultipart(f"a multipart boundary is at most {MAX_BOUNDARY} characters (RFC 2046)")
    return boundary


@dataclass
class _Parts:
    """python-multipart callbacks: collect the file part's bytes and the small text fields."""

    known: frozenset[str]  # the text fields allowed
    file_data: bytearray = field(default_factory=bytearray)
    file_size: int = 0
    filename: str | None = None
    fields: dict[str, str] = field(default_factory=dict)
    has_file: bool = False
    ended: bool = False
    _header_name: bytes = b""
    _header_value: bytes = b""
    _disposition: bytes = b""
    _name: str = ""
    _is_file: bool = False
    _value: bytearray = field(default_factory=bytearray)

    def callbacks(self) -> MultipartCallbacks:
        return {
            "on_part_begin": self._part_begin,
            "on_header_field": self._header_field,
            "on_header_value": self._header_value_data,
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._part_data,
            "on_part_end": self._part_end,
            "on_end": self._end,
        }

    def take_file_data(self) -> bytes:
        data = bytes(self.file_data)
        self.file_data.clear()
        return data

    def result(self, path: Path, sha256: str) -> Upload:
        if not self.ended:
            raise BadMultipart("the body ended before the closing multipart boundary")
        if not self.has_file:
            raise InvalidInput(f"no {FILE_FIELD!r} part in the form", code="missing_file")
        if self.file_size == 0:
            raise InvalidInput("the uploaded file is empty", code="empty_file")
        return Upload(path, self.filename, self.file_size, dict(self.fields), sha256)

    def _part_begin(self) -> None:
        self._disposition = b""
        self._value.clear()

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._header_name += data[start:end]

    def _header_value_data(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def _header_end(self) -> None:
        if self._header_name.lower() == b"content-disposition":
            self._disposition = self._header_value
        self._header_name = self._header_value = b""

    def _headers_finished(self) -> None:
        _, options = parse_options_header(self._disposition)
        if b"name" not in options:
            raise BadMultipart("a multipart part has no Content-Disposition name")
        self._name = options[b"name"].decode("utf-8", "replace")
        self._is_file = self._name == FILE_FIELD
        if self._is_file:
            if self.has_file:
                raise InvalidInput(f"more than one {FILE_FIELD!r} part", code="invalid_parameter")
            self.has_file = True
            if b"filename" in options:
                self.filename = options[b"filename"].decode("utf-8", "replace")
        elif self._name not in self.known:
            known = ", ".join(sorted({FILE_FIELD, *self.known}))
            raise InvalidInput(
                f"unknown form field {self._name!r} (known: {known})", code="invalid_parameter"
            )
        elif self._name in self.fields:
            raise InvalidInput(f"form field {self._name!r} given twice", code="invalid_parameter")

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._is_file:
            self.file_data += data[start:end]
            self.file_size += end - start
            return
        self._value += data[start:end]
        if len(self._value) > MAX_FIELD_BYTES:
            raise InvalidInput(
                f"form field {self._name!r} is longer than {MAX_FIELD_BYTES} bytes",
                code="invalid_parameter",
            )

    def _part_end(self) -> None:
        if self._is_file:
            return
        try:
            self.fields[self._name] = self._value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(
                f"form field {self._name!r} is not UTF-8", code="invalid_parameter"
            ) from exc

    def _end(self) -> None:
        self.ended = True
