"""Small real video files for the media tests, encoded with PyAV, plus hand-made malformed ones.

`encode_clip` draws a white 8x8 square moving 3 px per frame on a dark background, so a test can
check that decoded frames are the right frames in the right order (`square_x`).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

FORMATS = {".mp4": "mp4", ".mov": "mov", ".mkv": "matroska", ".webm": "webm", ".avi": "avi"}
ENCODER_OPTIONS = {
    "libx264": {"preset": "veryfast", "bframes": "2"},  # B-frames: pts out of decode order
    "libx265": {"preset": "ultrafast", "x265-params": "log-level=error"},
    "libvpx-vp9": {"deadline": "realtime", "cpu-used": "8"},
    "libvpx": {"deadline": "realtime", "cpu-used": "8"},
    "libsvtav1": {"preset": "12"},
}
PIX_FMTS = {"prores_ks": "yuv422p10le", "mjpeg": "yuvj420p"}
SQUARE, STEP, BACKGROUND = 8, 3, 40


@dataclass(frozen=True)
class Clip:
    path: Path
    pts_s: list[float]  # presentation times as stored in the file, in order
    end_s: float  # last pts + its duration as stored
    size: tuple[int, int]


def square_x(index: int, width: int) -> int:
    return (index * STEP) % (width - SQUARE)


def _image(index: int, width: int, height: int) -> np.ndarray:
    img = np.full((height, width, 3), BACKGROUND, np.uint8)
    x = square_x(index, width)
    img[8 : 8 + SQUARE, x : x + SQUARE] = 255
    return img


def encode_clip(
    path: Path,
    *,
    codec: str = "libx264",
    fps: Fraction | int = 30,
    frames: int = 30,
    size: tuple[int, int] = (64, 48),
    start_s: float = 0.0,
    times_s: Sequence[float] | None = None,
    audio: bool = False,
) -> Clip:
    """Encode a moving-square clip; `times_s` gives explicit (variable-rate) presentation times."""
    fps = Fraction(fps)
    width, height = size
    if path.suffix == ".avi":  # AVI is constant-rate: its time base is one frame
        time_base = 1 / fps
        times = [i / fps for i in range(frames)]
    elif times_s is None:
        time_base = Fraction(1, math.lcm(fps.numerator, 1000))
        times = [start_s + i / fps for i in range(frames)]
    else:
        time_base = Fraction(1, 90000)
        times = list(times_s)
    with av.open(str(path), "w", format=FORMATS[path.suffix]) as out:
        stream = out.add_stream(codec, rate=fps, options=ENCODER_OPTIONS.get(codec, {}))
        stream.width, stream.height = width, height
        stream.pix_fmt = PIX_FMTS.get(codec, "yuv420p")
        stream.codec_context.time_base = time_base
        acodec = "libopus" if path.suffix == ".webm" else "aac"
        astream = out.add_stream(acodec, rate=48000, layout="mono") if audio else None
        for i, t in enumerate(times):
            frame = av.VideoFrame.from_ndarray(_image(i, width, height), format="rgb24")
            frame = frame.reformat(format=stream.pix_fmt)
            frame.pts, frame.time_base = round(Fraction(t) / time_base), time_base
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
        if astream is not None:
            _write_tone(out, astream, start_s, times[-1] + 1 / fps - times[0])
    return _read_back(path, size, fps)


def _write_tone(
    out: av.container.OutputContainer, stream: av.AudioStream, start_s: float, seconds: float
) -> None:
    n = round(seconds * 48000)
    tone = (0.3 * np.sin(2 * np.pi * 440 * np.arange(n) / 48000)).astype(np.float32)
    for k in range(0, n, 1024):
        frame = av.AudioFrame.from_ndarray(tone[None, k : k + 1024], format="fltp", layout="mono")
        frame.sample_rate, frame.pts = 48000, round(start_s * 48000) + k
        out.mux(stream.encode(frame))
    out.mux(stream.encode(None))


def _read_back(path: Path, size: tuple[int, int], fps: Fraction) -> Clip:
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        packets = [
            (p.pts, p.duration) for p in container.demux(stream) if p.size and p.pts is not None
        ]
    packets.sort()
    tb = stream.time_base
    pts = [float(p * tb) for p, _ in packets]
    last, duration = packets[-1]
    end_s = float(last * tb + (duration * tb if duration else 1 / fps))
    return Clip(path, pts, end_s, size)


def packet_bytes(path: Path, kind: str = "video") -> list[bytes]:
    with av.open(str(path)) as container:
        stream = getattr(container.streams, kind)[0]
        return [bytes(p) for p in container.demux(stream) if p.size]


# Malformed and hostile files ----------------------------------------------------------------


def write_audio_only(path: Path) -> None:
    with av.open(str(path), "w") as out:
        stream = out.add_stream("aac", rate=48000, layout="mono")
        _write_tone(out, stream, 0.0, 0.5)


def write_without_frames(path: Path) -> None:
    """An AVI with a declared MPEG-4 video stream and not a single frame."""
    with av.open(str(path), "w", format="avi") as out:
        stream = out.add_stream("mpeg4", rate=30)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        out.start_encoding()
        out.mux(stream.encode(None))


def write_mp4_without_tracks(path: Path) -> None:
    """ftyp + moov holding only an mvhd: a well-formed MP4 with no streams at all."""
    ftyp = _box(b"ftyp", b"isom" + struct.pack(">I", 512) + b"isomiso2mp41")
    mvhd = _box(
        b"mvhd",
        struct.pack(">I5I", 0, 0, 0, 1000, 0, 0x00010000) + bytes(76) + struct.pack(">I", 2),
    )
    path.write_bytes(ftyp + _box(b"moov", mvhd))


def _box(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", 8 + len(payload)) + kind + payload


def patch_mkv_duration(path: Path, seconds: float) -> None:
    """Rewrite the Segment Info Duration (EBML id 0x4489, 8-byte float, in ms)."""
    data = bytearray(path.read_bytes())
    at = data.find(b"\x44\x89\x88")
    assert at > 0, "no 8-byte Duration element"
    struct.pack_into(">d", data, at + 3, seconds * 1000)
    path.write_bytes(bytes(data))


def patch_avi_frame_size(data: bytearray, width: int, height: int) -> None:
    """Main header (avih) and stream format (strf BITMAPINFOHEADER) width and height."""
    at = data.find(b"avih") + 8
    struct.pack_into("<II", data, at + 32, width, height)
    at = data.find(b"strf") + 8
    struct.pack_into("<ii", data, at + 4, width, height)


def write_huge_mjpeg_avi(path: Path) -> None:
    """An MJPEG AVI whose headers declare 100000x100000 (JPEG SOF: 65535x65535, its maximum)."""
    source = encode_clip(path.with_suffix(".src.avi"), codec="mjpeg", fps=25, frames=3).path
    data = bytearray(source.read_bytes())
    patch_avi_frame_size(data, 100000, 100000)
    at = data.find(b"\xff\xc0")
    while at >= 0:  # SOF0: length(2) precision(1) height(2) width(2)
        struct.pack_into(">HH", data, at + 5, 65535, 65535)
        at = data.find(b"\xff\xc0", at + 2)
    path.write_bytes(bytes(data))


def write_mpeg4_avi_declaring(path: Path, width: int, height: int) -> None:
    """An MPEG-4 part 2 AVI whose VOL header (13-bit width and height) declares another size."""
    source = encode_clip(path.with_suffix(".src.avi"), codec="mpeg4", fps=25, frames=3).path
    bits = np.unpackbits(np.frombuffer(source.read_bytes(), np.uint8))
    old, new = _vol_size_bits(64, 48), _vol_size_bits(width, height)
    windows = np.lib.stride_tricks.sliding_window_view(bits, len(old))
    hits = np.flatnonzero((windows == old).all(axis=1))
    assert len(hits) >= 1, "VOL header not found"
    for at in hits:
        bits[at : at + len(new)] = new
    data = bytearray(np.packbits(bits).tobytes())
    patch_avi_frame_size(data, width, height)
    path.write_bytes(bytes(data))


def _vol_size_bits(width: int, height: int) -> np.ndarray:
    # video_object_layer_width(13) marker(1) video_object_layer_height(13) marker(1)
    fields = [(width, 13), (1, 1), (height, 13), (1, 1)]
    return np.array([(v >> (n - 1 - i)) & 1 for v, n in fields for i in range(n)], np.uint8)


def write_h264_declaring(path: Path, width: int, height: int) -> None:
    """An MP4 of three 64x48 H.264 4:4:4 10-bit frames whose SPS declares `width` x `height`
    (multiples of 16): 1.5 KB that a decoder opening it would allocate full-size frames for."""
    source = path.with_suffix(".src.mp4")
    with av.open(str(source), "w") as out:
        stream = out.add_stream("libx264", rate=25, options={"preset": "ultrafast"})
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv444p10le"
        for i in range(3):
            frame = av.VideoFrame.from_ndarray(_image(i, 64, 48), format="rgb24")
            frame = frame.reformat(format="yuv444p10le")
            frame.pts = i
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    with av.open(str(source)) as src, av.open(str(path), "w") as out:
        template = src.streams.video[0]
        avcc = template.codec_context.extradata  # 6 bytes, SPS length, SPS, PPS...
        (n,) = struct.unpack(">H", avcc[6:8])
        sps = _sps_with_size(avcc[8 : 8 + n], width, height)
        stream = out.add_stream_from_template(template, opaque=True)
        stream.codec_context.extradata = (
            avcc[:6] + struct.pack(">H", len(sps)) + sps + avcc[8 + n :]
        )
        stream.codec_context.width, stream.codec_context.height = width, height
        for packet in src.demux(template):
            if packet.size:
                packet.stream = stream
                out.mux(packet)


def _sps_with_size(sps: bytes, width: int, height: int) -> bytes:
    """An H.264 SPS NAL (High profiles, frame coding, no scaling matrices, picture order count
    type 0 or 2) with another picture size; the fields after it are kept bit for bit."""
    rbsp = sps[1:].replace(b"\x00\x00\x03", b"\x00\x00")
    bits = "".join(f"{b:08b}" for b in rbsp)
    at = 24  # profile_idc, constraint flags, level_idc

    def ue() -> int:  # one Exp-Golomb code
        nonlocal at
        zeros = bits.index("1", at) - at
        value = int(bits[at + zeros : at + 2 * zeros + 1], 2) - 1
        at += 2 * zeros + 1
        return value

    ue()  # seq_parameter_set_id
    if rbsp[0] in (100, 110, 122, 244):
        at += ue() == 3  # chroma_format_idc; separate_colour_plane_flag
        ue(), ue()  # bit_depth_luma_minus8, bit_depth_chroma_minus8
        assert bits[at + 1] == "0", "scaling matrices"
        at += 2  # qpprime_y_zero_transform_bypass_flag, seq_scaling_matrix_present_flag
    ue()  # log2_max_frame_num_minus4
    poc_type = ue()
    assert poc_type in (0, 2), "pic_order_cnt_type"
    if poc_type == 0:
        ue()  # log2_max_pic_order_cnt_lsb_minus4
    ue()  # max_num_ref_frames
    at += 1  # gaps_in_frame_num_value_allowed_flag
    head = bits[:at]
    ue(), ue()  # pic_width_in_mbs_minus1, pic_height_in_map_units_minus1

    def code(value: int) -> str:
        return f"{value + 1:b}".rjust(2 * (value + 1).bit_length() - 1, "0")

    out = head + code(width // 16 - 1) + code(height // 16 - 1) + bits[at:].rstrip("0")
    out += "0" * (-len(out) % 8)  # the stop bit is kept; pad to a byte
    escaped = bytearray()
    for byte in int(out, 2).to_bytes(len(out) // 8, "big"):
        if escaped[-2:] == b"\x00\x00" and byte <= 3:  # emulation prevention
            escaped.append(3)
        escaped.append(byte)
    return sps[:1] + bytes(escaped)


def write_resolution_switch_mkv(path: Path, sizes: Sequence[tuple[int, int]]) -> None:
    """H.264 in Matroska whose frame size changes mid-stream (a new SPS per segment)."""
    raw = b""
    for k, size in enumerate(sizes):
        part = path.with_suffix(f".{k}.h264")
        with av.open(str(part), "w", format="h264") as out:
            stream = out.add_stream("libx264", rate=25, options={"preset": "ultrafast"})
            stream.width, stream.height, stream.pix_fmt = *size, "yuv420p"
            for i in range(10):
                frame = av.VideoFrame.from_ndarray(_image(i, *size), format="rgb24")
                frame.pts = i
                out.mux(stream.encode(frame.reformat(format="yuv420p")))
            out.mux(stream.encode(None))
        raw += part.read_bytes()
    joined = path.with_suffix(".h264")
    joined.write_bytes(raw)
    with av.open(str(joined), format="h264") as src, av.open(str(path), "w") as out:
        stream = out.add_stream_from_template(src.streams.video[0])
        for i, packet in enumerate(p for p in src.demux() if p.size):
            packet.stream = stream
            packet.pts = packet.dts = i
            packet.time_base = Fraction(1, 25)
            out.mux(packet)


def set_mkv_frame_times(path: Path, times_ms: Sequence[int]) -> None:
    """Rewrite the time of each block of a one-stream Matroska file, in storage order: any order
    and repeats, which muxers refuse to write but files in the wild carry (VFR remuxes, screen
    recorders)."""
    data = bytearray(path.read_bytes())
    blocks: list[tuple[int, int]] = []  # (offset of the block's int16 time, its cluster's time)

    def vint(at: int, *, marker: bool) -> tuple[int, int]:
        length = 9 - data[at].bit_length()
        value = int.from_bytes(data[at : at + length], "big")
        return (value if marker else value & ((1 << 7 * length) - 1)), at + length

    def walk(start: int, end: int) -> None:
        cluster_ms, at = 0, start
        while at < end:
            element, at = vint(at, marker=True)
            size, body = vint(at, marker=False)
            if element in (0x18538067, 0x1F43B675):  # Segment, Cluster
                walk(body, body + size)
            elif element == 0xE7:  # the cluster's Timestamp
                cluster_ms = int.from_bytes(data[body : body + size], "big")
            elif element == 0xA3:  # SimpleBlock: track number (vint), int16 time, flags
                blocks.append((vint(body, marker=False)[1], cluster_ms))
            at = body + size

    walk(0, len(data))
    assert len(blocks) == len(times_ms), f"{len(blocks)} blocks, {len(times_ms)} times"
    for (at, cluster_ms), t in zip(blocks, times_ms, strict=True):
        struct.pack_into(">h", data, at, t - cluster_ms)
    path.write_bytes(bytes(data))
