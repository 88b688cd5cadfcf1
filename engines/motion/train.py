"""Train the contact head on cached clip features (engines.motion.data), resumably.

    python -m engines.motion.train --data data/motion/sprites --out runs/motion/head.pt \
        --steps 20000 [--device cuda]

Each step takes a batch of windows, a fifth around a required contact and the rest anywhere
(mostly motion that makes no sound: what the head must learn to stay silent on),
cropped to CROP cells of the input (the head is fully convolutional, so crops train it as well
as whole pictures at a fraction of the cost). The checkpoint (weights, optimiser, step) is
written every `--save-every` steps and read back on start, so a run that stops continues.

Losses: the heat map by the penalty-reduced focal loss of CenterNet (contacts are rare and
their cells few), u and strength by L1 and material by cross-entropy where a contact is taught.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from engines.motion.data import load_dir
from engines.motion.features import ClipFeatures, clip_window
from engines.motion.model import ContactHead
from engines.motion.targets import COL, targets
from service.pipeline.motion.window import CHANNELS

log = logging.getLogger(__name__)

CROP = (32, 48)  # input blocks (h, w); even, so output cells stay aligned
POSITIVE_SHARE = 0.2


class Sampler:
    """Windows and their targets, drawn from clips held in memory."""

    def __init__(self, clips: list[ClipFeatures], rng: np.random.Generator) -> None:
        self.clips, self.rng = clips, rng
        self.positives = [
            (i, int(c[COL["interval"]]), c[COL["x"]], c[COL["y"]])
            for i, clip in enumerate(clips)
            for c in clip.contacts
            if c[COL["required"]]
        ]

    def draw(self) -> tuple[ClipFeatures, int, tuple[float, float] | None]:
        if self.positives and self.rng.random() < POSITIVE_SHARE:
            i, k, x, y = self.positives[self.rng.integers(len(self.positives))]
            return self.clips[i], k, (x, y)
        clip = self.clips[self.rng.integers(len(self.clips))]
        ks = np.flatnonzero(clip.valid)
        return clip, int(self.rng.choice(ks)), None

    def crop_origin(self, h: int, w: int, at: tuple[float, float] | None) -> tuple[int, int]:
        ch, cw = CROP
        if at is None:
            y0 = self.rng.integers(0, max(1, h - ch + 1))
            x0 = self.rng.integers(0, max(1, w - cw + 1))
        else:  # the contact somewhere inside, away from the crop's edge
            bx, by = at[0] / 4, at[1] / 4
            y0 = int(np.clip(by - self.rng.uniform(4, ch - 4), 0, max(0, h - ch)))
            x0 = int(np.clip(bx - self.rng.uniform(4, cw - 4), 0, max(0, w - cw)))
        return int(y0) // 2 * 2, int(x0) // 2 * 2

    def batch(self, size: int) -> dict[str, torch.Tensor]:
        xs, ts = [], []
        for _ in range(size):
            clip, k, at = self.draw()
            x = clip_window(clip, k)
            h, w = x.shape[1:]
            y0, x0 = self.crop_origin(h, w, at)
            ch, cw = CROP
            x = x[:, y0 : y0 + ch, x0 : x0 + cw]
            t = targets(clip, k, (h + 1) // 2, (w + 1) // 2)
            sl = (slice(y0 // 2, (y0 + ch) // 2), slice(x0 // 2, (x0 + cw) // 2))
            if self.rng.random() < 0.5:  # mirror: contacts have no left or right
                x = x[:, :, ::-1].copy()
                x[0::CHANNELS] *= -1  # flow x of every interval in the window
                flip = True
            else:
                flip = False
            xs.append(x)
            ts.append({k2: _crop(getattr(t, k2), sl, flip) for k2 in t.__dataclass_fields__})
        out = {"x": torch.from_numpy(np.stack(xs))}
        for key in ts[0]:
            out[key] = torch.from_numpy(np.stack([t[key] for t in ts]))
        return out


def _crop(a: np.ndarray, sl: tuple[slice, slice], flip: bool) -> np.ndarray:
    a = a[sl]
    return a[:, ::-1].copy() if flip else a.copy()


def focal(logit: torch.Tensor, heat: torch.Tensor, peak: torch.Tensor, mask: torch.Tensor):
    """CenterNet's penalty-reduced focal loss, summed and divided by the number of peaks."""
    p = torch.sigmoid(logit).clamp(1e-4, 1 - 1e-4)
    pos = peak.float() * torch.log(p) * (1 - p) ** 2
    neg = (1 - peak.float()) * (1 - heat) ** 4 * torch.log(1 - p) * p**2
    return -((pos + neg) * mask).sum() / peak.float().sum().clamp(min=1.0)


def losses(out: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    near = b["near"]
    heat = focal(out["logit"][:, 0], b["heat"], b["peak"], b["mask"])
    count = near.float().sum().clamp(min=1.0)
    u = (torch.abs(out["u"][:, 0] - b["u"]) * near).sum() / count
    strength = (torch.abs(out["strength"][:, 0] - b["strength"]) * near).sum() / count
    known = near & (b["material"] >= 0)
    if known.any():
        logits = out["material"].permute(0, 2, 3, 1)[known]
        material = F.cross_entropy(logits, b["material"][known])
    else:
        material = torch.zeros(())
    return {"heat": heat, "u": 4.0 * u, "strength": 0.5 * strength, "material": 0.2 * material}


def train(args: argparse.Namespace) -> None:
    torch.manual_seed(0)
    clips = [clip for folder in args.data for clip in load_dir(folder, args.limit)]
    required = sum(int(c.contacts[:, COL["required"]].sum()) for c in clips)
    log.info("%d clips, %d required contacts", len(clips), required)
    sampler = Sampler(clips, np.random.default_rng(args.seed))
    model = ContactHead(width=args.width).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    step = 0
    if args.out.exists():
        state = torch.load(args.out, map_location=args.device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step = state["step"]
        log.info("resumed at step %d", step)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: schedule(s, args.steps))
    for _ in range(step):
        sched.step()
    t0, running = time.time(), {}
    while step < args.steps:
        b = {k: v.to(args.device) for k, v in sampler.batch(args.batch).items()}
        parts = losses(model(b["x"]), b)
        loss = sum(parts.values())
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        sched.step()
        step += 1
        for k, v in parts.items():
            running[k] = 0.98 * running.get(k, v.item()) + 0.02 * v.item()
        if step % 100 == 0:
            log.info(
                "step %d %.1f s/100 %s",
                step,
                time.time() - t0,
                " ".join(f"{k} {v:.3f}" for k, v in running.items()),
            )
            t0 = time.time()
        if step % args.save_every == 0 or step == args.steps:
            save(model, opt, step, args.out)


def schedule(step: int, steps: int) -> float:
    """Warm up over 500 steps, then a cosine down to zero at `steps`."""
    warm = min(1.0, (step + 1) / 500)
    return float(warm * 0.5 * (1 + np.cos(np.pi * min(1.0, step / steps))))


def save(model: ContactHead, opt: torch.optim.Optimizer, step: int, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(
        {
            "model": model.state_dict(),
            "opt": opt.state_dict(),
            "step": step,
            "config": model.config,
        },
        tmp,
    )
    tmp.rename(path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, action="append", required=True)
    parser.add_argument("--out", type=Path, default=Path("runs/motion/head.pt"))
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save-every", type=int, default=500)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(args.threads)
    train(args)


if __name__ == "__main__":
    main()
