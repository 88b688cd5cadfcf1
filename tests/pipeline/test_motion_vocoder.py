"""The `motion` tier's vocoder: the shipped one places every attack on its sample, its level
follows the impulse, and the synthesiser it was trained through is the one the service runs."""

from __future__ import annotations

import numpy as np
import pytest

from service.config import Settings
from service.pipeline.backends.onnxruntime import OnnxRuntimeBackend
from service.pipeline.contacts.render import Event, EventRenderer, Modes, ring
from service.pipeline.motion.tier import MotionTier
from service.pipeline.motion.vocoder import NeuralVoices
from service.pipeline.tier import load_tier

RATE = 48000


@pytest.fixture(scope="module")
def tier() -> MotionTier:
    tier = load_tier(Settings().models_dir, "motion")
    assert isinstance(tier, MotionTier)
    return tier


@pytest.fixture(scope="module")
def voices(tier) -> NeuralVoices:
    backend = OnnxRuntimeBackend(tier, threads=1)
    return NeuralVoices(
        tier.voice, tier.sample_rate, lambda c: backend.run("vocoder", {"condition": c})
    )


def render(voices: NeuralVoices, events: list[Event], seconds: float) -> np.ndarray:
    renderer = EventRenderer(voices)
    for event in events:
        renderer.add(event)
    return renderer.take(round(seconds * voices.sample_rate))


def onset(audio: np.ndarray, rate: int) -> float:
    """The first sample above a thousandth of the peak, in seconds."""
    loud = np.abs(audio) > 1e-3 * np.abs(audio).max()
    return float(np.argmax(loud)) / rate


@pytest.mark.parametrize("impulse", [0.02, 0.3, 3.0])
def test_every_attack_lands_within_a_millisecond_of_its_event(tier, voices, impulse):
    for material in range(len(tier.materials)):
        time_s = 0.1 + 0.0123456 * material
        audio = render(voices, [Event(time_s, impulse, material)], 0.4)
        assert abs(onset(audio, tier.sample_rate) - time_s) < 1e-3, tier.materials[material]
        # and its energy is there at once, not smeared in over the next milliseconds
        start = round(time_s * tier.sample_rate)
        first_ms = np.abs(audio[start : start + 48]).max()
        assert first_ms > 0.1 * np.abs(audio).max(), tier.materials[material]


def test_level_rises_with_the_impulse_for_every_material(tier, voices):
    impulses = np.geomspace(0.01, 5.0, 8)
    for material in range(len(tier.materials)):
        peaks = [np.abs(render(voices, [Event(0.0, p, material)], 0.2)).max() for p in impulses]
        assert np.all(np.diff(peaks) > 0), (tier.materials[material], peaks)


def test_materials_sound_different(tier, voices):
    """Each material has its own spectrum, and the ringing ones (metal, glass, ceramic) are
    far from the dull ones (wood, plastic, rubber)."""
    spectra = {}
    for material, name in enumerate(tier.materials):
        audio = render(voices, [Event(0.0, 0.3, material)], 0.3)
        spectrum = np.log(np.abs(np.fft.rfft(audio)) + 1e-6)
        spectra[name] = spectrum - spectrum.mean()

    def apart(a: str, b: str) -> float:
        return float(np.abs(spectra[a] - spectra[b]).mean())

    names = list(spectra)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert apart(a, b) > 0.1, (a, b)
    for a in ("metal", "glass", "ceramic"):
        for b in ("wood", "plastic", "rubber"):
            assert apart(a, b) > 0.5, (a, b)


class _Noise:
    """A generator whose normal draws are given."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values

    def standard_normal(self, n: int) -> np.ndarray:
        return self.values[:n]


@pytest.mark.parametrize("click_s", [5e-5, 4e-4, 3e-3])
def test_training_synthesiser_equals_the_services(click_s):
    """engines.motion.vocoder.synthesize (trained through) and ring (served) make one sound."""
    import torch

    from engines.motion.vocoder import mode_freqs, synthesize

    rng = np.random.default_rng(0)
    k = len(mode_freqs())
    amps = rng.uniform(0.0, 0.2, k)
    decays = np.exp(rng.uniform(np.log(20.0), np.log(400.0), k))
    n = 12000
    noise = rng.standard_normal(n)
    params = tuple(
        torch.tensor(x, dtype=torch.float32) for x in (amps[None], decays[None], [0.3], [click_s])
    )
    trained = synthesize(params, torch.tensor(noise[None], dtype=torch.float32), RATE)[0].numpy()
    modes = Modes(mode_freqs(), decays, amps, 0.3, click_s)
    served = ring(modes, 0.0, RATE, n / RATE, _Noise(noise))[:n]
    np.testing.assert_allclose(trained, served, atol=2e-3 * np.abs(served).max())


def test_the_shipped_graph_is_the_shipped_weights(tier):
    """vocoder.onnx was exported from vocoder.pt (engines.motion.export): the same numbers."""
    import torch

    from engines.motion.vocoder import OUTPUTS, condition, load_voice

    net = load_voice(tier.path / "vocoder.pt")
    backend = OnnxRuntimeBackend(tier, threads=1)
    materials = torch.arange(len(tier.materials)).repeat(3)
    impulses = torch.tensor([0.01, 0.5, 8.0]).repeat_interleave(len(tier.materials))
    cond = condition(materials, impulses, len(tier.materials))
    with torch.no_grad():
        expected = net(cond)
    got = backend.run("vocoder", {"condition": cond.numpy()})
    for name, want in zip(OUTPUTS, expected, strict=True):
        np.testing.assert_allclose(got[name], want.numpy(), rtol=1e-4, atol=1e-7)
