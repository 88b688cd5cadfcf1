"""The preview page in headless Chromium: it plays a local clip, streams its frames, and the
Foley comes back onto its waveform and event timeline, with no console errors."""

from __future__ import annotations

import os
import shutil
from fractions import Fraction
from pathlib import Path

import av
import pytest
from playwright.sync_api import sync_playwright

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "sample.mp4"
# The Debian package's binary; CI installs it (.ci/run). No browser download is needed.
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _webm(path: Path) -> Path:
    """The sample clip as VP8 WebM: a codec every Chromium build plays."""
    with av.open(str(SAMPLE)) as src, av.open(str(path), "w") as dst:
        stream = dst.add_stream("libvpx", rate=30)
        stream.width, stream.height, stream.pix_fmt = 320, 180, "yuv420p"
        stream.options = {"deadline": "realtime", "cpu-used": "8", "b": "1M"}
        stream.codec_context.time_base = Fraction(1, 30)
        for i, frame in enumerate(src.decode(video=0)):
            frame = frame.reformat(width=320, height=180, format="yuv420p")
            frame.pts, frame.time_base = i, Fraction(1, 30)
            dst.mux(stream.encode(frame))
        dst.mux(stream.encode(None))
    return path


def test_the_page_plays_a_clip_with_live_foley(live_service: str, tmp_path: Path) -> None:
    if CHROMIUM is None:
        if os.environ.get("FOLEY_REQUIRE_BROWSER"):
            pytest.fail("FOLEY_REQUIRE_BROWSER is set but there is no chromium")
        pytest.skip("needs the chromium package (apt install chromium; .ci/run installs it)")
    clip = _webm(tmp_path / "clip.webm")
    problems: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            # CI containers often have a small /dev/shm, which crashes Chromium's renderer.
            args=["--autoplay-policy=no-user-gesture-required", "--disable-dev-shm-usage"],
        )
        page = browser.new_page()
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.on(
            "response",
            lambda r: problems.append(f"{r.status} {r.url}") if r.status >= 400 else None,
        )
        page.goto(f"{live_service}/preview?api_key=k1")
        page.set_input_files("#file", str(clip))
        page.click("#play")
        page.wait_for_function(
            "window.foleyPreview.ended || window.foleyPreview.error", timeout=30_000
        )
        state = page.evaluate("window.foleyPreview")
        onsets = page.locator("#timeline .onset").count()
        latency = page.text_content("#stat-latency")
        browser.close()
    assert state["error"] is None, state["error"]
    assert state["frames"] > 100 and state["chunks"] > 50
    assert onsets == state["onsets"] > 0, "contact events appear on the timeline"
    assert latency and "ms" in latency and "–" not in latency
    assert not problems, problems
