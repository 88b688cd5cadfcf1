"""The `motion` tier's vocoder: a contact's conditioning -> the modal bank that voices it, in the
manner of DDSP (a network sets a synthesiser's parameters; the synthesiser makes the samples).

    conditioning [B, M + 1]   the material (one-hot, the tier's material order) and the log of
                              the impulse (N s)
    -> amps [B, K]            each mode's amplitude for a unit excitation
       decays [B, K]          its decay rate (1/s)
       click [B]              the level of the contact's noise burst
       click_s [B]            the contact's duration (s): the burst's length and dullness

The generator's excitation is a unit impulse at the event's exact (sub-sample) time, scaled by
impulse ** IMPULSE_EXPONENT (engines.audio.modal); the bank is linear in it, so the samples are
its response in closed form, every mode starting at phase zero on the event's time and the burst
at full level there:

    sum_k amps_k exp(-decays_k t) sin(2 pi FREQS_HZ_k t)
    + click * lowpass_{0.5 / click_s}(noise * exp(-t / max(click_s, CLICK_FLOOR_S)))

The attack lands on its sample by construction, whatever the network learned. The bank's modes
are fixed, log-spaced (MODES from LOW_HZ to HIGH_HZ): a network learns amplitudes and decay rates
well from spectral losses, frequencies badly. `synthesize` is the torch twin of the service's
numpy synthesiser (service.pipeline.contacts.render.ring), for training through it.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import torch
from torch import nn

from service.pipeline.contacts.render import CLICK_FLOOR_S

OUTPUTS = ("amps", "decays", "click", "click_s")  # VoiceNet's, in order: vocoder.onnx's names
MODES = 40
LOW_HZ, HIGH_HZ = 60.0, 16_000.0
LOG_IMPULSE_RANGE = (-6.0, 3.0)  # the conditioning's log impulse is clipped to this
DECAY_RANGE = (3.0, 3000.0)  # 1/s
CLICK_RANGE_S = (2e-5, 5e-3)
LOG_DECAYS = (math.log(DECAY_RANGE[0]), math.log(DECAY_RANGE[1]))
LOG_CLICK_S = (math.log(CLICK_RANGE_S[0]), math.log(CLICK_RANGE_S[1]))


def mode_freqs() -> np.ndarray:
    return np.geomspace(LOW_HZ, HIGH_HZ, MODES)


class VoiceNet(nn.Module):
    """An MLP from the conditioning to the bank's parameters; teacher and student differ in size."""

    def __init__(self, materials: int, *, hidden: int, layers: int) -> None:
        super().__init__()
        self.materials = materials
        self.size = {"hidden": hidden, "layers": layers}
        dims = [materials + 1] + [hidden] * layers
        body: list[nn.Module] = []
        for a, b in itertools.pairwise(dims):
            body += [nn.Linear(a, b), nn.SiLU()]
        self.body = nn.Sequential(*body)
        self.out = nn.Linear(dims[-1], 2 * MODES + 2)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, condition: torch.Tensor) -> tuple[torch.Tensor, ...]:
        o = self.out(self.body(condition))
        amps = torch.exp(torch.clamp(o[:, :MODES] - 4.0, max=3.0))
        # Clamped before exp: a clamp after it passes inf * 0 = NaN back where exp overflowed.
        decays = torch.exp(torch.clamp(math.log(60.0) + o[:, MODES : 2 * MODES], *LOG_DECAYS))
        click = torch.exp(torch.clamp(o[:, 2 * MODES] - 1.0, max=3.0))
        click_s = torch.exp(torch.clamp(math.log(3e-4) + o[:, 2 * MODES + 1], *LOG_CLICK_S))
        return amps, decays, click, click_s


def condition(material: torch.Tensor, impulse: torch.Tensor, materials: int) -> torch.Tensor:
    """[B] material indices and impulses (N s) -> the conditioning [B, materials + 1]."""
    one_hot = nn.functional.one_hot(material.long(), materials).float()
    log_impulse = torch.log(impulse.clamp(min=1e-9)).clamp(*LOG_IMPULSE_RANGE)
    return torch.cat([one_hot, log_impulse[:, None].float()], dim=1)


def synthesize(
    params: tuple[torch.Tensor, ...], noise: torch.Tensor, sample_rate: int
) -> torch.Tensor:
    """The bank's samples [B, N] for a unit excitation at sample 0; `noise` [B, N] is the burst's
    white noise."""
    amps, decays, click, click_s = params
    n = noise.shape[1]
    t = torch.arange(n, dtype=torch.float32) / sample_rate
    freqs = torch.as_tensor(mode_freqs(), dtype=torch.float32)
    sines = torch.sin(2 * math.pi * freqs[:, None] * t[None])  # [K, N]
    envelope = torch.exp(-decays[:, :, None] * t[None, None])  # [B, K, N]
    modes = torch.einsum("ek,ekn->en", amps, envelope * sines)
    decay = click_s.clamp(min=CLICK_FLOOR_S)
    # The burst is cut after 8 time constants (+ 2 samples), as the numpy synthesiser cuts it.
    index = torch.arange(n, dtype=torch.float32)[None]
    within = index < torch.floor(8 * decay * sample_rate)[:, None] + 2
    burst = noise * torch.exp(-t[None] / decay[:, None]) * within
    cutoff = torch.clamp(0.5 / click_s, max=0.45 * sample_rate)
    alpha = 1.0 - torch.exp(-2 * math.pi * cutoff / sample_rate)
    burst = _one_pole(burst, alpha) * within
    return modes + (click / torch.sqrt(alpha))[:, None] * burst


def _one_pole(x: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """y[n] = y[n - 1] + alpha (x[n] - y[n - 1]) per row, by FFT (differentiable in alpha)."""
    n = x.shape[1]
    size = 2 * n
    w = torch.fft.rfftfreq(size) * 2 * math.pi
    z = torch.exp(-1j * w)[None]
    a = alpha[:, None].to(torch.complex64)
    response = a / (1 - (1 - a) * z)
    return torch.fft.irfft(torch.fft.rfft(x, size) * response, size)[:, :n]


def save_voice(net: VoiceNet, path: Path) -> None:
    """The weights and size alone: what a tier is exported from."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(weights(net), path)


def weights(net: VoiceNet) -> dict:
    return {"net": net.state_dict(), "materials": net.materials, "size": net.size}


def load_voice(path: Path) -> VoiceNet:
    saved = torch.load(path, weights_only=True)
    net = VoiceNet(saved["materials"], **saved["size"])
    net.load_state_dict(saved["net"])
    return net.eval()
