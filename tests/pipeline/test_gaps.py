"""A gap between two frames is that much audio, made and written a piece at a time: memory is
bounded by the piece, not by the gap (a two-frame file four minutes apart is four minutes of
track, and its render holds no more than a 30 s one's)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import av
import pytest

from service.pipeline.types import RenderOptions
from tests.media.videos import encode_clip

SHORT_S, LONG_S = 30.0, 240.0
# The long track alone, as float32 at 48 kHz, is 46 MB; its model frames at 30 fps, 200 MB.
LONG_TRACK_BYTES = LONG_S * 48000 * 4

pytestmark = pytest.mark.slow


def peak_of(engine, gap_s: float, tmp_path: Path) -> float:
    """Bytes at the peak (Python and numpy allocations) of rendering two frames `gap_s` apart,
    after checking the track lasts that long."""
    clip = encode_clip(
        tmp_path / f"gap{gap_s:g}.mkv", fps=30, frames=2, size=(160, 120), times_s=[0.0, gap_s]
    ).path
    out = tmp_path / "gap.wav"
    tracemalloc.start()
    try:
        engine.render(clip, out, RenderOptions(format="wav", loudness=None))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    with av.open(str(out)) as container:
        stream = container.streams.audio[0]
        seconds = sum(f.samples for f in container.decode(stream)) / stream.rate
    assert seconds == pytest.approx(gap_s, abs=0.2)
    return peak


@pytest.mark.parametrize("which", ["real_engine", "objects_engine"])
def test_a_long_gap_renders_in_bounded_memory(
    tmp_path: Path, which: str, request: pytest.FixtureRequest
) -> None:
    engine = request.getfixturevalue(which)
    short, long = peak_of(engine, SHORT_S, tmp_path), peak_of(engine, LONG_S, tmp_path)
    assert long < short + 4 * 1024**2, f"{short / 1e6:.1f} MB, then {long / 1e6:.1f} MB"
    assert long < LONG_TRACK_BYTES / 2
