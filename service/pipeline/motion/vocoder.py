"""The `motion` tier's voicing: each fired contact through its vocoder (engines.motion.vocoder).

Event (material, impulse) -> conditioning [1, M + 1]: the material one-hot and the log of
the impulse, clipped to the tier's range
-> vocoder.onnx -> the bank's amplitudes and decay rates per mode, the burst's level and the
   contact's duration
-> service.pipeline.contacts.render.ring at the tier's mode frequencies, scaled by
   impulse ** impulse_exponent (the excitation)
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from service.pipeline.contacts.render import Event, Modes, ring
from service.pipeline.motion.tier import VocoderSettings

Run = Callable[[np.ndarray], dict[str, np.ndarray]]


class NeuralVoices:
    """`run(conditioning)` is the vocoder stage (a backend's run of "vocoder")."""

    def __init__(self, settings: VocoderSettings, sample_rate: int, run: Run) -> None:
        self.settings, self.sample_rate, self.run = settings, sample_rate, run
        self.gain = settings.gain
        self.freqs = np.asarray(settings.freqs_hz, np.float64)

    def condition(self, event: Event) -> np.ndarray:
        materials = len(self.settings.materials)
        out = np.zeros((1, materials + 1), np.float32)
        out[0, event.material] = 1.0
        out[0, materials] = np.clip(
            math.log(max(event.impulse, 1e-9)), *self.settings.log_impulse_range
        )
        return out

    def voice(self, event: Event, offset_s: float, rng: np.random.Generator) -> np.ndarray:
        out = self.run(self.condition(event))
        modes = Modes(
            self.freqs,
            out["decays"][0].astype(np.float64),
            out["amps"][0].astype(np.float64),
            float(out["click"][0]),
            float(out["click_s"][0]),
        )
        level = max(event.impulse, 0.0) ** self.settings.impulse_exponent
        samples: np.ndarray = level * ring(
            modes, offset_s, self.sample_rate, self.settings.max_ring_s, rng
        )
        return samples
