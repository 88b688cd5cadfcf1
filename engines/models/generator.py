"""Cross-modal generator: visual features at video rate -> log-mel frames at acoustic rate.

Contract:  features [B, T, D] float32
           -> mel   [B, T * R, n_mels] float32 (natural log of mel power, floor log_floor)
              onset [B, T * R] float32 in [0, 1] (probability that a contact sound starts in
                    that acoustic frame)
R = mels_per_frame. Output frame t*R + r depends on features [t - left_context, t + lookahead]:
by default one video frame of lookahead, because a bounce is only visible once the object has
moved away again.

The mel is the sum, in power, of two parts:
- a continuous part (rolling, sliding), regressed directly, then averaged in power over the last
  CONTINUOUS_SMOOTH_S: sustained sounds only, no attacks of their own (unsmoothed, the part
  learned to answer uncertainty near contacts with short bursts, which a listener hears as extra
  onsets);
- contact sounds: discrete events, each emitting, per mel band, a mixture of exponential decays
  (the modal picture: each band rings down at its own rate) whose level and mixture are predicted
  at the event's frame.
Regressing impacts directly would blur them: with L1 on log-mel, a model unsure of the exact frame
hedges with a quiet smear. Firing discrete events keeps every onset sharp.

Where events fire is decided at video rate, where the evidence is: a head gives the probability
that a contact happens during video frame t, another where inside the frame (one of R acoustic
frames, from the motion before and after). The onset output is their product, so it is still the
probability per acoustic frame. An event fires where the frame probability rises past `trigger`,
at the most likely acoustic frame inside it. During training the ground-truth contact frames fire
the events (teacher forcing), so level and timbre learn from correctly placed events while the
two heads learn where to fire.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from engines.models.layers import CausalConv1d, ConvNeXtBlock

# T60 (s) of the decay bank: from a click to a ringing metal plate.
DECAY_T60_S = (0.01, 0.03, 0.08, 0.2, 0.5, 1.2)
TEMPLATE_S = 1.0
CONTINUOUS_SMOOTH_S = 0.1


class Generator(nn.Module):
    def __init__(
        self,
        *,
        feature_dim: int,
        n_mels: int,
        mels_per_frame: int,
        frame_rate: float,
        dim: int = 128,
        dilations: tuple[int, ...] = (1, 2, 4, 8),
        mel_dim: int = 96,
        mel_blocks: int = 2,
        expand: float = 3.0,
        log_floor: float = 1e-5,
        lookahead: int = 1,
    ) -> None:
        super().__init__()
        # Taps t - 1 .. t + lookahead.
        self.inp = CausalConv1d(feature_dim, dim, 2 + lookahead, lookahead=lookahead)
        self.blocks = nn.ModuleList(
            ConvNeXtBlock(dim, round(dim * expand), kernel=3, dilation=d) for d in dilations
        )
        self.up = nn.Linear(dim, mel_dim * mels_per_frame)
        self.mel_blocks = nn.ModuleList(
            ConvNeXtBlock(mel_dim, round(mel_dim * expand), kernel=5) for _ in range(mel_blocks)
        )
        self.continuous = nn.Conv1d(mel_dim, n_mels, 1)
        self.onset = nn.Conv1d(dim, 1, 1)  # at video rate
        self.offset = nn.Conv1d(dim, mels_per_frame, 1)  # where in the video frame
        self.event_level = nn.Conv1d(mel_dim, n_mels, 1)
        self.event_decay = nn.Conv1d(mel_dim, n_mels * len(DECAY_T60_S), 1)
        self.r, self.mel_dim, self.n_mels = mels_per_frame, mel_dim, n_mels
        self.log_floor = log_floor
        taps = round(TEMPLATE_S * frame_rate)
        rates = torch.tensor([math.log(1e6) / (t60 * frame_rate) for t60 in DECAY_T60_S])
        kernel = torch.exp(-rates[:, None] * torch.arange(taps - 1, -1, -1.0)[None])  # (R, taps)
        self.register_buffer("decay_kernel", kernel.repeat(n_mels, 1)[:, None], persistent=False)
        smooth = round(CONTINUOUS_SMOOTH_S * frame_rate)
        self.register_buffer(
            "smooth_kernel", torch.full((n_mels, 1, smooth), 1.0 / smooth), persistent=False
        )
        self.register_buffer("trigger", torch.tensor(0.5))
        nn.init.constant_(self.continuous.bias, math.log(log_floor))
        nn.init.constant_(self.onset.bias, -4.0)

    @property
    def template_frames(self) -> int:
        return self.decay_kernel.shape[-1]

    @property
    def left_context(self) -> int:
        """In video frames."""
        video = self.inp.left_context + sum(b.left_context for b in self.blocks)
        acoustic = (
            sum(b.left_context for b in self.mel_blocks)
            + max(self.template_frames, self.smooth_kernel.shape[-1])
            - 1
        )
        # + 1: an event fires on a rise of the onset probability over the previous frame's.
        return video + 1 + -(-acoustic // self.r)

    @property
    def right_context(self) -> int:
        return self.inp.right_context

    def heads(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """features [B, T, D] -> (acoustic-rate trunk [B, mel_dim, T*R], onset logit [B, T],
        offset logits [B, R, T])."""
        return self.decode(self.trunk(features))

    def trunk(self, features: torch.Tensor) -> torch.Tensor:
        """features [B, T, D] -> video-rate trunk [B, dim, T] (what the heads read)."""
        x = self.inp(features.transpose(1, 2))
        for block in self.blocks:
            x = block(x)
        return x

    def decode(
        self, x: torch.Tensor, state: dict[str, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Video-rate trunk [B, dim, T] -> the outputs of `heads`. With a streaming `state`
        (see `step`), the acoustic-rate blocks continue from it and update it in place."""
        b, _, t = x.shape
        onset_logit = self.onset(x).squeeze(1)
        offset_logit = self.offset(x)
        x = F.gelu(self.up(x.transpose(1, 2))).reshape(b, t * self.r, self.mel_dim).transpose(1, 2)
        for i, block in enumerate(self.mel_blocks):
            if state is None:
                x = block(x)
            else:
                x, state[f"mel{i}"] = block.step(x, state[f"mel{i}"])
        return x, onset_logit, offset_logit

    def fire(
        self, onset_logit: torch.Tensor, offset_logit: torch.Tensor, trigger: float | None = None
    ) -> torch.Tensor:
        """[B, T], [B, R, T] -> events [B, T*R] in {0, 1}: one per rise of the frame probability
        past `trigger` (default: the calibrated one), on the most likely acoustic frame of that
        video frame."""
        above_before = onset_logit.new_zeros(onset_logit.shape[0], 1)
        return self._fire(onset_logit, offset_logit, above_before, trigger)[0]

    def _fire(
        self,
        onset_logit: torch.Tensor,
        offset_logit: torch.Tensor,
        above_before: torch.Tensor,
        trigger: float | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`fire` after a frame whose probability was (1) or was not (0) above the trigger
        [B, 1]; also returns that flag for the last frame."""
        b, t = onset_logit.shape
        threshold = self.trigger if trigger is None else trigger
        above = (torch.sigmoid(onset_logit) >= threshold).float()
        rising = above * (1.0 - torch.cat([above_before, above[:, : t - 1]], dim=1))
        best = (offset_logit >= offset_logit.max(dim=1, keepdim=True).values).float()
        events = (rising[:, None, :] * best).transpose(1, 2).reshape(b, t * self.r)
        return events, above[:, t - 1 :]

    def forward(
        self, features: torch.Tensor, events: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`events` [B, M] in {0, 1}: the frames where contact sounds start (training); None
        fires them from the onset heads (inference)."""
        x, onset_logit, offset_logit = self.heads(features)
        return self.render(x, onset_logit, offset_logit, events)

    def render(
        self,
        x: torch.Tensor,
        onset_logit: torch.Tensor,
        offset_logit: torch.Tensor,
        events: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        state = self._render_state(x.shape[0])
        mel, onset, _ = self._render(x, onset_logit, offset_logit, events, state)
        return mel, onset

    def _render(
        self,
        x: torch.Tensor,
        onset_logit: torch.Tensor,
        offset_logit: torch.Tensor,
        events: torch.Tensor | None,
        state: dict[str, torch.Tensor],
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """`render` after the history in `state` (updated in place): whether the last frame was
        above the trigger, the last emissions (the decay templates still ringing) and the last
        continuous power (the smoothing window). Also returns the events."""
        b, _, m = x.shape
        where = torch.softmax(offset_logit, dim=1) * torch.sigmoid(onset_logit)[:, None, :]
        onset = where.transpose(1, 2).reshape(b, m)
        if events is None:
            events, state["above"] = self._fire(onset_logit, offset_logit, state["above"])
        level = torch.exp(torch.clamp(self.event_level(x), max=8.0))
        mix = torch.softmax(self.event_decay(x).reshape(b, self.n_mels, -1, m), dim=2)
        emission = (events[:, None, None, :] * level[:, :, None, :] * mix).reshape(b, -1, m)
        emission = torch.cat([state["emission"], emission], dim=-1)
        state["emission"] = emission[..., m:]
        ringing = F.conv1d(emission, self.decay_kernel, groups=emission.shape[1])
        power = ringing.reshape(b, self.n_mels, -1, m).sum(dim=2)
        continuous = torch.exp(torch.clamp(self.continuous(x), max=8.0))
        continuous = torch.cat([state["continuous"], continuous], dim=-1)
        state["continuous"] = continuous[..., m:]
        continuous = F.conv1d(continuous, self.smooth_kernel, groups=self.n_mels)
        power = power + continuous
        mel = torch.log(power + self.log_floor)
        return mel.transpose(1, 2), onset, events

    # --- streaming ---------------------------------------------------------------------------

    def initial_state(self, batch: int = 1) -> dict[str, torch.Tensor]:
        """The state `step` starts from: all zeros (what `forward`'s padding stands for), except
        that the first `right_context` features must be written into the end of "history" (see
        `step`)."""
        zeros = self.decay_kernel.new_zeros
        feature_dim = self.inp.in_channels
        state = {"history": zeros(batch, self.inp.span, feature_dim)}
        for i, block in enumerate(self.blocks):
            state[f"trunk{i}"] = zeros(batch, block.dwconv.in_channels, block.dwconv.span)
        for i, block in enumerate(self.mel_blocks):
            state[f"mel{i}"] = zeros(batch, block.dwconv.in_channels, block.dwconv.span)
        return state | self._render_state(batch)

    def _render_state(self, batch: int) -> dict[str, torch.Tensor]:
        zeros = self.decay_kernel.new_zeros
        return {
            "above": zeros(batch, 1),
            "emission": zeros(batch, self.decay_kernel.shape[0], self.template_frames - 1),
            "continuous": zeros(batch, self.n_mels, self.smooth_kernel.shape[-1] - 1),
        }

    def step(
        self, features: torch.Tensor, state: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Streaming `forward`: features [B, T, D] -> (mel [B, T*R, n_mels], onset [B, T*R],
        events [B, T*R] (1 where a contact sound fires), next state). The output lags the input
        by `right_context` frames: a stream starts with its first `right_context` features in
        the end of state["history"] (the last inputs seen) instead of passing them here, and
        ends with `right_context` frames of zero features, the padding `forward` puts after a
        clip."""
        state = dict(state)
        x, history = self.inp.step(features.transpose(1, 2), state["history"].transpose(1, 2))
        state["history"] = history.transpose(1, 2)
        for i, block in enumerate(self.blocks):
            x, state[f"trunk{i}"] = block.step(x, state[f"trunk{i}"])
        x, onset_logit, offset_logit = self.decode(x, state)
        mel, onset, events = self._render(x, onset_logit, offset_logit, None, state)
        return mel, onset, events, state
