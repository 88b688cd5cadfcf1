"""The preview page in headless Chromium: it plays a local clip, streams its frames, and the
Foley comes back onto its waveform and event timeline, with no console errors."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import pytest
from playwright.sync_api import sync_playwright

from tests.browser import CHROMIUM_ARGS, chromium_or_skip, watched_page

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "sample.mp4"


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
    chromium = chromium_or_skip()
    clip = _webm(tmp_path / "clip.webm")
    problems: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = watched_page(browser, problems)
        page.on(
            "response",
            lambda r: problems.append(f"{r.status} {r.url}") if r.status >= 400 else None,
        )
        page.goto(f"{live_service}/preview#api_key=k1")
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
    assert onsets > 0 and state["onsets"] > 0, "contact events appear on the timeline"
    assert latency and "ms" in latency and "–" not in latency
    assert not problems, problems


def test_the_page_pauses_seeks_mixes_and_exports(live_service: str, tmp_path: Path) -> None:
    chromium = chromium_or_skip()
    clip = _webm(tmp_path / "clip.webm")
    problems: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = watched_page(browser, problems, accept_downloads=True)
        page.goto(f"{live_service}/preview#api_key=k1")
        assert page.is_visible("#empty"), "the empty state says what to do"
        page.set_input_files("#file", str(clip))
        assert page.is_hidden("#empty")
        # The offline analysis gives the export's level (and its markers) before play.
        page.wait_for_function("window.foleyPreview.gain_db !== null", timeout=30_000)
        page.click("#play")
        page.wait_for_function("window.foleyPreview.chunks > 20", timeout=30_000)
        page.click("#play")  # pause
        paused = page.evaluate("window.foleyPreview")
        assert not paused["playing"] and paused["streams"] == 1
        assert paused["playing_gain_db"] == pytest.approx(paused["gain_db"])
        page.wait_for_timeout(400)
        assert page.evaluate("window.foleyPreview.frames") == paused["frames"], "paused: no frames"
        timecode = page.text_content("#timecode")
        # Seek to 3 s and play on: a new stream starts there.
        page.eval_on_selector(
            "#seek", "(e) => { e.value = '3'; e.dispatchEvent(new Event('change')); }"
        )
        page.click("#play")
        page.wait_for_function(
            "window.foleyPreview.ended || window.foleyPreview.error", timeout=30_000
        )
        after = page.evaluate("window.foleyPreview")
        assert after["streams"] == 2 and 2.9 <= after["t0"] <= 3.2
        assert after["chunks"] > paused["chunks"]
        # The mix, and a marker that jumps there.
        page.fill("#level-original", "0.25")
        page.dispatch_event("#level-original", "input")
        page.fill("#level-foley", "1.5")
        page.dispatch_event("#level-foley", "input")
        assert page.evaluate("window.foleyPreview.levels") == {"original": 0.25, "foley": 1.5}
        markers = page.locator("#timeline .onset")
        assert markers.count() > 0
        markers.first.click()
        page.wait_for_function("document.getElementById('video').seeking === false")
        # Export through the queue and download the result.
        page.click("#export")
        page.wait_for_selector("#download:not([hidden])", timeout=60_000)
        with page.expect_download() as download:
            page.click("#download")
        saved = tmp_path / download.value.suggested_filename
        download.value.save_as(saved)
        browser.close()
    assert timecode and timecode.count(":") == 3 and timecode != "00:00:00:00"
    assert saved.name == "clip.foley.wav"
    with av.open(str(saved)) as container:
        assert container.streams.audio[0].rate == 48000
    assert after["error"] is None, after["error"]
    assert not problems, problems
