"""The contacts tier's stream (service.pipeline.contacts): attacks on their sample, the same track
however the clip is chunked, native frame times, and a shot cut that voices nothing."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from service.config import Settings
from service.media.decode import DecodeLimits, open_video
from service.media.loudness import LiveLevel
from service.pipeline.backends.base import Backend, create_backend
from service.pipeline.contacts import strength
from service.pipeline.contacts.render import (
    CONTACT_DAMPING,
    DAMP_S,
    Event,
    EventRenderer,
    ModalVoices,
)
from service.pipeline.contacts.synth import ContactSynth
from service.pipeline.contacts.tier import ContactTier, load_contact_tier
from service.pipeline.contacts.tracking import Track
from service.pipeline.runner import ContactRunner, gather
from service.pipeline.streaming import StageTimer
from service.preview import protocol as p
from service.preview.worker import AudioOut, EndOut, PreviewWorker

SHIPPED = Path(__file__).resolve().parents[2] / "service" / "models"
SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "sample.mp4"


@pytest.fixture(scope="module")
def tier() -> ContactTier:
    return load_contact_tier(SHIPPED, "objects")


@pytest.fixture(scope="module")
def backend(tier: ContactTier) -> Backend:
    return create_backend("cpu", tier, threads=1)


def test_shipped_graphs_match_their_config(tier: ContactTier) -> None:
    for stage in tier.stages:
        session = ort.InferenceSession(str(tier.path / stage.file))
        inputs = {i.name: i.shape for i in session.get_inputs()}
        outputs = {o.name: o.shape for o in session.get_outputs()}
        assert set(inputs) == set(stage.inputs) and set(outputs) == set(stage.outputs)
        for name, shape in stage.inputs.items():
            assert [d for d in inputs[name] if isinstance(d, int)] == [
                d for d in shape if isinstance(d, int)
            ]
    assert len(tier.materials) == tier.localiser.outputs["materials"][-1]


def _decode(path: Path, tier: ContactTier) -> tuple[np.ndarray, np.ndarray]:
    pts, rgb = [], []
    limits = DecodeLimits.from_settings(Settings())
    with open_video(
        path, width=tier.width, height=tier.height, limits=limits, letterbox=True
    ) as stream:
        for batch in stream:
            pts.append(batch.pts_s.copy())
            rgb.append(batch.rgb.copy())
    return np.concatenate(pts), np.concatenate(rgb)


def _run(tier, backend, pts, rgb, pushes: list[int], duration_s: float):
    synth = ContactSynth(tier, backend)
    chunks, start = [], 0
    for n in pushes:
        chunks += synth.push(pts[start : start + n], rgb[start : start + n])
        start += n
    chunks += synth.push(pts[start:], rgb[start:])
    chunks += list(synth.finish(duration_s))
    return np.concatenate(chunks), synth


@pytest.mark.parametrize("material", [0, 2, 5])
def test_an_event_attacks_on_its_sample(tier: ContactTier, material: int) -> None:
    rate = tier.sample_rate
    for when in (0.1, 0.25 + 0.3 / rate, 0.4 + 0.7 / rate):
        renderer = EventRenderer(ModalVoices(tier.renderer, rate))
        renderer.add(Event(when, 1.0, material))
        audio = renderer.take(rate)
        loud = np.flatnonzero(np.abs(audio) >= 0.1 * np.abs(audio).max())
        assert np.all(audio[: int(np.ceil(when * rate))] == 0)  # nothing before the event
        assert 0 <= loud[0] / rate - when <= 1e-3


def test_the_renderer_is_the_same_in_any_chunking(tier: ContactTier) -> None:
    events = [Event(0.05, 0.5, 1, source=4), Event(0.051, 2.0, 3), Event(0.3, 1.0, 6, source=4)]
    whole = EventRenderer(ModalVoices(tier.renderer, tier.sample_rate))
    for e in events:
        whole.add(e)
    reference = whole.take(24000)
    parts = EventRenderer(ModalVoices(tier.renderer, tier.sample_rate))
    out = [parts.take(1000)]
    parts.add(events[0])
    out.append(parts.take(1))
    parts.add(events[1])
    out.append(parts.take(5000))
    parts.add(events[2])
    out.append(parts.take(24000 - 6001))
    np.testing.assert_array_equal(np.concatenate(out), reference)
    with pytest.raises(ValueError, match="already taken"):
        parts.add(Event(0.1, 1.0, 0))


def test_a_source_touching_down_again_damps_its_own_ring_only(tier: ContactTier) -> None:
    """A metal object rings for seconds; struck again, what it still carries drops by
    CONTACT_DAMPING, and another object's ring goes on untouched."""
    rate, metal = tier.sample_rate, 1

    def ring(second_source: int) -> np.ndarray:
        renderer = EventRenderer(ModalVoices(tier.renderer, rate))
        renderer.add(Event(0.1, 1.0, metal, source=3))
        renderer.add(Event(0.3, 1.0, metal, source=second_source))
        return renderer.take(rate).astype(np.float64)

    first_alone = EventRenderer(ModalVoices(tier.renderer, rate))
    first_alone.add(Event(0.1, 1.0, metal, source=3))
    first = first_alone.take(rate).astype(np.float64)
    before = slice(int(0.2 * rate), int(0.3 * rate))
    after = slice(int(0.3 * rate) + int(DAMP_S * rate), rate)
    other, same = ring(7), ring(3)
    np.testing.assert_array_equal(same[before], other[before])
    # What the second strike adds is the same; the difference is the first ring, damped.
    np.testing.assert_allclose(
        (other - same)[after], (1 - CONTACT_DAMPING) * first[after], atol=1e-6
    )


def test_a_harder_hit_is_louder(tier: ContactTier) -> None:
    peaks = []
    for impulse in (0.25, 1.0, 4.0):
        renderer = EventRenderer(ModalVoices(tier.renderer, tier.sample_rate))
        renderer.add(Event(0.01, impulse, 0))
        peaks.append(np.abs(renderer.take(4800)).max())
    assert peaks[0] < peaks[1] < peaks[2]


def test_a_smaller_object_rings_higher_and_shorter(tier: ContactTier) -> None:
    """The voice moves to the event's size as the simulator's modes do: half the size, twice
    the pitch, and a ring that dies sooner; an event of no known size keeps the voice's own."""
    rate, glass = tier.sample_rate, 2
    own = tier.renderer.voice_size_m

    def voiced(size_m: float | None) -> np.ndarray:
        renderer = EventRenderer(ModalVoices(tier.renderer, rate))
        renderer.add(Event(0.0, 1.0, glass, size_m=size_m))
        return renderer.take(rate).astype(np.float64)

    def pitch(audio: np.ndarray) -> float:
        spectrum = np.abs(np.fft.rfft(audio[int(0.01 * rate) :]))
        return float(np.argmax(spectrum) * rate / (2 * (len(spectrum) - 1)))

    def ring_s(audio: np.ndarray) -> float:
        envelope = np.abs(audio)
        return float(np.flatnonzero(envelope >= 1e-3 * envelope.max())[-1] / rate)

    same, small = voiced(own), voiced(own / 2)
    np.testing.assert_array_equal(voiced(None), same)
    assert pitch(small) == pytest.approx(2 * pitch(same), rel=0.02)
    assert ring_s(small) < 0.85 * ring_s(same)


def test_chunked_equals_whole_clip_on_real_footage(tier: ContactTier, backend: Backend) -> None:
    pts, rgb = _decode(SAMPLE, tier)
    duration = float(pts[-1] - pts[0]) + 1 / 30
    whole, synth = _run(tier, backend, pts, rgb, [], duration)
    assert len(whole) == tier.num_samples(duration)
    assert synth.fired, "the sample's bouncing objects fire events"
    live, live_synth = _run(tier, backend, pts, rgb, [1] * 40 + [7, 3, 50], duration)
    np.testing.assert_allclose(live, whole, atol=1e-6)
    assert live_synth.event_times_s == pytest.approx(synth.event_times_s, abs=1e-9)


def test_events_carry_the_size_the_localiser_reads(tier, backend, tmp_path) -> None:
    """An event sounds at its object's size as the localiser reads it (from the floor around
    the object): within a factor of 1.6 here, on drops of a 4.4, a 5.1 and a 13.2 cm object,
    where one fixed size would be 2x off for some."""
    from engines.eval.scenes import scene_clip
    from engines.sim import scene_from_seed

    for seed in (26, 27, 28):
        clip = scene_clip(
            seed, "30", tmp_path, holdout=False, duration_s=2.0, size=(320, 180), kind="drop"
        )
        pts, rgb = _decode(clip.video, tier)
        _, synth = _run(tier, backend, pts, rgb, [], clip.duration_s)
        (thing,) = scene_from_seed(seed, kind="drop").objects
        assert synth.fired
        for fired in synth.fired:
            assert abs(np.log(fired.event.size_m / thing.size_m)) < np.log(1.6)


def test_native_frame_times_reach_the_tracks(tier, backend, tmp_path) -> None:
    from engines.eval.scenes import scene_clip

    clip = scene_clip(
        26, "vfr", tmp_path, holdout=False, duration_s=2.0, size=(320, 180), kind="drop"
    )
    pts, rgb = _decode(clip.video, tier)
    assert np.ptp(np.diff(pts)) > 1e-3, "a variable-frame-rate clip"
    synth = ContactSynth(tier, backend)
    synth.push(pts, rgb)
    (track,) = [t for t in synth.tracker.tracks if t.seen >= 10]
    np.testing.assert_allclose(track.times_s, (pts - pts[0])[-len(track.times_s) :], atol=1e-9)


def test_a_shot_cut_voices_nothing(tier, backend, tmp_path) -> None:
    from engines.eval.scenes import control_clip

    clip = control_clip("cut", 3, "30", tmp_path, holdout=False, duration_s=3.0, size=(320, 180))
    pts, rgb = _decode(clip.video, tier)
    _, synth = _run(tier, backend, pts, rgb, [], 3.0)
    assert clip.cut_s is not None
    assert all(abs(t - clip.cut_s) > 0.05 for t in synth.event_times_s), synth.event_times_s


def test_trimmed_tracks_predict_as_before() -> None:
    track = Track(0)
    for k in range(50):
        track.observe(k / 30, np.array([k * 2.0, 10.0]), 3.0, np.ones(7) / 7, 0.1)
    before = track.predict(50 / 30)
    track.trim(10)
    assert len(track.times_s) == 10 and track.seen == 50
    np.testing.assert_allclose(track.predict(50 / 30), before)


def test_live_preview_gives_the_offline_track(tier: ContactTier, backend: Backend) -> None:
    """Frames sent one by one to the preview worker give the track and onsets a whole-clip
    render gives (at the tier's rate: no output resampling)."""
    pts, rgb = _decode(SAMPLE, tier)
    pts, rgb = pts[:90], rgb[:90]
    interval = float(pts[1] - pts[0])
    whole, synth = _run(tier, backend, pts, rgb, [], float(pts[-1] - pts[0]) + interval)
    config = p.SessionConfig(
        type="config", width=tier.width, height=tier.height, sample_rate=tier.sample_rate
    )
    worker = PreviewWorker(tier, backend, max_sessions=2, queue_frames=128, batch_window_s=0.0)
    outputs: list = []
    done = threading.Event()

    def deliver(item) -> None:
        outputs.append(item)
        if isinstance(item, EndOut):
            done.set()

    try:
        session = worker.open(config, deliver)
        for k, (t, frame) in enumerate(zip(pts, rgb, strict=True)):
            worker.submit(session, p.parse_frame(p.pack_frame(k, float(t), frame.tobytes())), 0.0)
        worker.end(session)
        assert done.wait(30)
    finally:
        worker.stop()
    audio = [o for o in outputs if isinstance(o, AudioOut)]
    live = np.concatenate([o.samples for o in audio])
    level = LiveLevel(tier.sample_rate, tier.live_gain_db)
    at_live_level = np.concatenate([level.push(whole), level.flush()])
    np.testing.assert_allclose(live, at_live_level, atol=1e-6 * 10 ** (tier.live_gain_db / 20))
    onsets = [n.sample for o in audio for n in o.onsets]
    assert all(o.start <= n.sample < o.start + len(o.samples) for o in audio for n in o.onsets)
    assert {n.marker.material for o in audio for n in o.onsets} <= set(tier.materials)
    expected = [int(np.ceil(t * tier.sample_rate - 1e-9)) for t in synth.event_times_s]
    assert onsets == sorted(expected) and onsets


def test_a_larger_velocity_jump_is_a_larger_impulse(tier: ContactTier) -> None:
    times = np.arange(20) / 30
    estimates = []
    for bounce in (2.0, 8.0):
        y = np.where(np.arange(20) < 10, 3.0 * np.arange(20), 30.0 - bounce * (np.arange(20) - 10))
        pixels = np.stack([np.full(20, 50.0), y], axis=1)
        cues = strength.features(times, pixels, np.full(20, 4.0), 9, tier.head_config, tier.height)
        estimates.append(tier.strength.impulse(cues, 0, len(tier.materials)))
    assert estimates[0] < estimates[1]


def test_two_live_sessions_share_the_localiser_and_keep_their_tracks(
    tier: ContactTier, backend: Backend
) -> None:
    """Two streams pushed together (one localiser call) give what each gives alone."""
    pts, rgb = _decode(SAMPLE, tier)
    pts, rgb = pts[:60], rgb[:60]
    alone, _ = _run(tier, backend, pts, rgb, [1] * 59, 2.0)
    runner = ContactRunner(tier, backend, StageTimer())
    a, b = runner.open(), runner.open()
    out_a, out_b = [], []
    for k in range(60):
        # b sees the clip mirrored: other objects, other tracks
        chunk_a, chunk_b = gather(
            runner.push(
                [a, b],
                [(pts[k : k + 1], rgb[k : k + 1]), (pts[k : k + 1], rgb[k : k + 1, :, ::-1])],
            ),
            2,
        )
        out_a.append(chunk_a.audio)
        out_b.append(chunk_b.audio)
    out_a += [c.audio for c in gather(runner.finish([a], [2.0]), 1)]
    np.testing.assert_allclose(np.concatenate(out_a), alone, atol=1e-6)
