"""Set one track's edit list in a finished MP4/MOV, so AAC priming is skipped whatever the start.

An AAC encoder's first packet holds `priming` samples (1024 for FFmpeg's) before the first real
one. FFmpeg's mov muxer skips them with an edit list (media_time = 1024) only when the track's
first timestamp is negative, i.e. when the track starts at 0. A track that starts at 1.5 s gets an
empty edit of 1.5 s minus 1024 samples and media_time 0: players play the priming first and the
whole track is 21 ms early (measured with FFmpeg 8.1 / PyAV 18). This module rewrites that
track's `edts` box after muxing:

    [empty edit of `start_s`] + [media edit: media_time = priming, duration = the real samples]

and its `tkhd` (and if needed `mvhd`) duration. The muxer writes `moov` last (no faststart), so the
box can grow without moving any sample data.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import BinaryIO


@dataclass(frozen=True)
class _Box:
    kind: bytes
    start: int  # offset of the box header within the buffer
    header: int  # 8, or 16 with a 64-bit size
    end: int

    @property
    def payload(self) -> int:
        return self.start + self.header


def _children(data: bytes | bytearray, start: int, end: int) -> list[_Box]:
    boxes = []
    while start + 8 <= end:
        size, kind = struct.unpack_from(">I4s", data, start)
        header = 8
        if size == 1:
            (size,) = struct.unpack_from(">Q", data, start + 8)
            header = 16
        elif size == 0:
            size = end - start
        if size < header or start + size > end:
            raise ValueError(f"malformed {kind!r} box at {start}")
        boxes.append(_Box(kind, start, header, start + size))
        start += size
    return boxes


def _child(data: bytes | bytearray, parent: _Box, kind: bytes) -> _Box | None:
    return next((b for b in _children(data, parent.payload, parent.end) if b.kind == kind), None)


def _box(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I4s", 8 + len(payload), kind) + payload


def _timescale(data: bytearray, box: _Box) -> int:
    """Timescale of an mvhd or mdhd box."""
    version = data[box.payload]
    return int(struct.unpack_from(">I", data, box.payload + (20 if version == 1 else 12))[0])


def _set_duration(
    data: bytearray, box: _Box, offset_v0: int, offset_v1: int, duration: int
) -> None:
    if data[box.payload] == 1:
        struct.pack_into(">Q", data, box.payload + offset_v1, duration)
    else:
        struct.pack_into(">I", data, box.payload + offset_v0, min(duration, 0xFFFFFFFF))


def _duration(data: bytearray, box: _Box, offset_v0: int, offset_v1: int) -> int:
    if data[box.payload] == 1:
        return int(struct.unpack_from(">Q", data, box.payload + offset_v1)[0])
    return int(struct.unpack_from(">I", data, box.payload + offset_v0)[0])


def set_track_edit(
    path: Path, track_index: int, *, start_s: Fraction, media_time: int, media_duration: int
) -> None:
    """Present track `track_index` (its order in moov) from `start_s`, skipping `media_time`
    (in the track's timescale) and playing `media_duration` of it."""
    with open(path, "r+b") as f:
        top = _top_level_boxes(f)
        moov = next(b for b in top if b.kind == b"moov")
        if moov is not top[-1] or moov.header != 8:
            raise ValueError("expected a 32-bit moov box at the end of the file")
        f.seek(moov.start)
        data = bytearray(f.read(moov.end - moov.start))
        data = _rewrite_moov(data, track_index, start_s, media_time, media_duration)
        f.seek(moov.start)
        f.write(data)
        f.truncate()


def _top_level_boxes(f: BinaryIO) -> list[_Box]:
    boxes, offset = [], 0
    while header := f.read(16):
        size, kind = struct.unpack_from(">I4s", header)
        length = 8
        if size == 1:
            (size,) = struct.unpack_from(">Q", header, 8)
            length = 16
        elif size == 0:
            size = f.seek(0, 2) - offset
        boxes.append(_Box(kind, offset, length, offset + size))
        offset = f.seek(offset + size)
    return boxes


def _rewrite_moov(
    data: bytearray, track_index: int, start_s: Fraction, media_time: int, media_duration: int
) -> bytearray:
    moov = _Box(b"moov", 0, 8, len(data))
    mvhd = _child(data, moov, b"mvhd")
    trak = [b for b in _children(data, moov.payload, moov.end) if b.kind == b"trak"][track_index]
    tkhd, mdia = _child(data, trak, b"tkhd"), _child(data, trak, b"mdia")
    assert mvhd and tkhd and mdia, "incomplete moov"
    assert trak.header == 8, "64-bit trak box"
    mdhd = _child(data, mdia, b"mdhd")
    assert mdhd, "no mdhd"
    movie_scale, media_scale = _timescale(data, mvhd), _timescale(data, mdhd)

    empty = round(start_s * movie_scale)
    playing = round(Fraction(media_duration, media_scale) * movie_scale)
    entries = ([(empty, -1)] if empty > 0 else []) + [(playing, media_time)]
    version = 1 if max(empty, playing, media_time) >= 2**31 else 0
    fmt = ">Qqhh" if version else ">Iihh"
    elst = struct.pack(">B3xI", version, len(entries)) + b"".join(
        struct.pack(fmt, duration, time, 1, 0) for duration, time in entries
    )
    edts = _box(b"edts", _box(b"elst", elst))

    old = _child(data, trak, b"edts")
    at, cut = (old.start, old.end) if old else (tkhd.end, tkhd.end)
    # tkhd duration (movie timescale): offset 20 in version 0, 28 in version 1.
    _set_duration(data, tkhd, 20, 28, empty + playing)
    if _duration(data, mvhd, 16, 24) < empty + playing:
        _set_duration(data, mvhd, 16, 24, empty + playing)
    grow = len(edts) - (cut - at)
    for box in (moov, trak):  # the boxes that contain the edit list, both 32-bit sized
        struct.pack_into(">I", data, box.start, box.end - box.start + grow)
    return data[:at] + edts + data[cut:]
