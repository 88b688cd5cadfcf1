"""End to end with the shipped model: real clips in, decodable audio out, hostile uploads refused.

These need `service.pipeline.engine` and the trained tier under `service/models/`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import av
import pytest
from fastapi.testclient import TestClient

from service.api.params import UPLOAD_NAME
from tests.api import clips
from tests.media import videos

pytestmark = pytest.mark.slow

CLIP_SECONDS, FPS = 2.0, 25
# One video frame, plus slack for codec framing (AAC frames are 1024 samples).
DURATION_TOLERANCE_S = 1 / FPS + 0.03


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clips") / "square.mp4"
    return videos.encode_clip(path, fps=FPS, frames=round(CLIP_SECONDS * FPS), size=(160, 120)).path


def decoded_audio(path: Path) -> tuple[int, float]:
    """-> (sample rate, seconds of decoded audio) of the first audio stream."""
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        samples = sum(frame.samples for frame in container.decode(stream))
        return stream.rate, samples / stream.rate


def video_frames(path: Path) -> int:
    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


@pytest.mark.parametrize(("fmt", "rate"), [("wav", 48000), ("flac", 16000), ("mp4", 44100)])
def test_real_clip_renders_to_the_requested_format_and_rate(
    real_client: TestClient, clip: Path, tmp_path: Path, fmt: str, rate: int
) -> None:
    response = real_client.post(
        "/v1/foley",
        params={"format": fmt, "sample_rate": rate},
        files={"file": ("square.mp4", clip.read_bytes(), "video/mp4")},
    )
    assert response.status_code == 200, response.text
    assert float(response.headers["x-foley-duration"]) == pytest.approx(CLIP_SECONDS, abs=0.05)
    assert "total;dur=" in response.headers["server-timing"]
    output = tmp_path / f"foley.{fmt}"
    output.write_bytes(response.content)
    sample_rate, seconds = decoded_audio(output)
    assert sample_rate == rate
    assert seconds == pytest.approx(CLIP_SECONDS, abs=DURATION_TOLERANCE_S)
    if fmt == "mp4":
        assert video_frames(output) == round(CLIP_SECONDS * FPS)


BadUpload = Callable[[Path], bytes]


def _audio_only(clip: Path) -> bytes:
    path = clip.with_name("tone.m4a")
    videos.write_audio_only(path)
    return path.read_bytes()


BAD_UPLOADS: dict[str, BadUpload] = {
    "empty_file": lambda clip: b"",
    "truncated_mp4": lambda clip: clips.truncated(clip.read_bytes()),
    "random_bytes": lambda clip: clips.random_bytes(),
    "text_as_mp4": lambda clip: clips.text_bytes(),
    "pdf_as_mp4": lambda clip: clips.pdf_bytes(),
    "zip_as_mp4": lambda clip: clips.zip_bytes(),
    "audio_only": _audio_only,
    # Playlists naming a *valid* video on the server's disk: a decoder that follows them would
    # render it and answer 200, i.e. read local files on a client's behalf.
    "hls_playlist_as_mp4": lambda clip: clips.hls_playlist(clip),
    "ffconcat_as_mp4": lambda clip: clips.ffconcat_playlist(clip),
    # Relative names pass FFmpeg's concat "safe" check; this one names the upload itself.
    "ffconcat_self_reference": lambda clip: clips.ffconcat_self_reference(UPLOAD_NAME),
}


@pytest.mark.parametrize("make", BAD_UPLOADS.values(), ids=BAD_UPLOADS.keys())
def test_bad_upload_gets_a_quick_4xx_json_error_and_the_server_lives(
    real_client: TestClient, clip: Path, make: BadUpload
) -> None:
    started = time.monotonic()
    response = real_client.post("/v1/foley", files={"file": ("clip.mp4", make(clip), "video/mp4")})
    elapsed = time.monotonic() - started
    assert 400 <= response.status_code < 500, response.text
    error = response.json()["error"]
    assert error["code"] and error["reason"]
    assert elapsed < 20, f"took {elapsed:.1f} s"  # a hang, not a benchmark
    assert real_client.get("/healthz").status_code == 200


def test_empty_body_gets_a_4xx_json_error(real_client: TestClient) -> None:
    response = real_client.post(
        "/v1/foley", content=b"", headers={"Content-Type": "multipart/form-data; boundary=x"}
    )
    assert 400 <= response.status_code < 500
    assert response.json()["error"]["code"]
    assert real_client.get("/healthz").status_code == 200
