from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from service.media.audio_out import AudioWriter


def read_audio(path: Path) -> tuple[np.ndarray, int, int, str]:
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        frames = list(container.decode(stream))
        layout, codec = stream.layout.nb_channels, stream.codec_context.name
    samples = np.concatenate([f.to_ndarray().reshape(-1) for f in frames])
    return samples, frames[0].sample_rate, layout, codec


@pytest.mark.parametrize("out_rate", [48000, 44100, 24000, 16000])
@pytest.mark.parametrize("fmt", ["wav", "flac"])
def test_length_rate_and_alignment(tmp_path: Path, fmt: str, out_rate: int) -> None:
    n_in = 48000 + 24000 + 17
    signal = np.zeros(n_in, np.float32)
    signal[24000] = 0.9  # an impulse at 0.5 s must stay at 0.5 s
    path = tmp_path / f"track.{fmt}"
    rng = np.random.default_rng(0)
    with AudioWriter(path, fmt, in_rate=48000, out_rate=out_rate) as writer:
        start = 0
        while start < n_in:  # uneven chunks, as the synthesizer's windows come
            size = int(rng.integers(1, 9000))
            writer.write(signal[start : start + size])
            start += size
    samples, rate, channels, codec = read_audio(path)
    assert (rate, channels) == (out_rate, 1)
    assert codec == {"wav": "pcm_s16le", "flac": "flac"}[fmt]
    assert samples.dtype == np.int16
    assert len(samples) == round(n_in * out_rate / 48000)
    assert abs(int(np.argmax(np.abs(samples))) - out_rate // 2) <= 1


def test_level_and_clipping(tmp_path: Path) -> None:
    tone = 0.5 * np.sin(2 * np.pi * 440 * np.arange(4800) / 48000).astype(np.float32)
    loud = np.full(100, 3.0, np.float32)  # out of range: clipped, not wrapped around
    with AudioWriter(tmp_path / "t.wav", "wav") as writer:
        writer.write(tone)
        writer.write(loud)
    samples, *_ = read_audio(tmp_path / "t.wav")
    np.testing.assert_allclose(samples[:4800] / 32768, tone, atol=1e-4)
    assert samples[4800:].min() >= 32766


def test_nothing_written_gives_an_empty_track(tmp_path: Path) -> None:
    with AudioWriter(tmp_path / "t.wav", "wav"):
        pass
    with av.open(str(tmp_path / "t.wav")) as container:
        assert sum(f.samples for f in container.decode(audio=0)) == 0


def test_rejects_stereo_and_unknown_formats(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="format"):
        AudioWriter(tmp_path / "t.mp3", "mp3")  # type: ignore[arg-type]
    with AudioWriter(tmp_path / "t.wav", "wav") as writer, pytest.raises(ValueError, match="mono"):
        writer.write(np.zeros((2, 10), np.float32))
