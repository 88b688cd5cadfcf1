"""Train the visual localiser (engines.models.localiser) on simulated frames with exact targets.

    python -m engines.train.localiser [--clips 160] [--steps 4000] [--out runs/localiser]

Data: scenes of the training distribution filmed at a random native frame rate (24-60 fps),
rendered at twice the model size and scaled to it the way the decoder scales a video. Targets
come from the simulator: each object's centre projected into the frame (exact, sub-pixel), its
apparent radius (its bounding radius projected at its depth), its material and its size in
metres. Frames are cached per clip under data/localiser/, the model under --out (both resumable: a
stopped run continues). Prints the localisation error on held-out scenes at the end. `--init`
continues from saved weights (service/models/objects/localiser.pt) with a fresh schedule;
`--size-only` then trains the size branch alone, the trunk and the other outputs fixed;
`--evaluate WEIGHTS` prints the errors of saved weights on fresh and held-out clips.
"""

from __future__ import annotations

import argparse
import logging
import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from engines.models.localiser import (
    HEAT,
    LOG_RADIUS,
    LOG_SIZE,
    MATERIAL,
    OFFSET_X,
    OFFSET_Y,
    STRIDE,
    Localiser,
    peaks,
)
from engines.sim import SceneSpec, scene_from_seed
from engines.sim.materials import OBJECT_MATERIALS
from engines.sim.physics import PHYSICS_HZ, run_physics
from engines.sim.render import SceneRenderer
from engines.sim.simulate import pose_at
from service.media.frames import FrameScaler, rgb_as_decoded

log = logging.getLogger(__name__)

WIDTH, HEIGHT = 192, 108
RENDER_SCALE = 1.5
CLIP_S = 2.5
RATES = (24, 25, 30, 48, 50, 60)
HOLDOUT_SEED = 2_000_000
FRESH_SEED = 1_500_000  # the training distribution, seeds never trained on


@dataclass(frozen=True)
class FrameTargets:
    """Per frame of a clip: xy (N, O, 2) model pixels from the top-left (NaN when the centre
    is behind the camera), radius (N, O) model pixels, material (O,) index into
    OBJECT_MATERIALS, size (O,) metres (largest extent)."""

    xy: np.ndarray
    radius: np.ndarray
    material: np.ndarray
    size: np.ndarray


def film_clip(seed: int, holdout: bool = False) -> tuple[np.ndarray, FrameTargets]:
    """The frames (N, HEIGHT, WIDTH, 3) uint8 of the scene of `seed` and their targets."""
    rng = np.random.default_rng([seed, 41])
    fps = Fraction(int(rng.choice(RATES)))
    spec = scene_from_seed(seed, holdout=holdout)
    trace = run_physics(spec, CLIP_S, PHYSICS_HZ)
    times = [Fraction(k) / fps for k in range(math.ceil(CLIP_S * fps))]
    w, h = round(WIDTH * RENDER_SCALE), round(HEIGHT * RENDER_SCALE)
    scaler = FrameScaler(WIDTH, HEIGHT)
    radii = np.array([0.5 * o.size_m for o in spec.objects])
    frames, xy, radius = [], [], []
    with SceneRenderer(spec, w, h) as renderer:
        for t in times:
            positions, orientations = pose_at(trace, t)
            frames.append(
                rgb_as_decoded(renderer.render(positions, orientations, float(t)), scaler)
            )
            up = renderer.up_axis(float(t))
            centre = renderer.project(positions, float(t))
            rim = renderer.project(positions + radii[:, None] * up, float(t))
            xy.append(_pixels(centre))
            radius.append(np.linalg.norm(_pixels(rim) - _pixels(centre), axis=-1))
    material = np.array([OBJECT_MATERIALS.index(o.material) for o in spec.objects])
    return np.stack(frames), FrameTargets(np.stack(xy), np.stack(radius), material, sizes(spec))


def sizes(spec: SceneSpec) -> np.ndarray:
    return np.array([o.size_m for o in spec.objects])


def _pixels(ndc: np.ndarray) -> np.ndarray:
    """Normalised device coordinates (x right, y up) -> model pixels from the top-left."""
    return np.stack([(ndc[:, 0] + 1) / 2 * WIDTH, (1 - ndc[:, 1]) / 2 * HEIGHT], axis=-1)


def cached_clip(root: Path, seed: int, holdout: bool) -> tuple[np.ndarray, FrameTargets]:
    path = root / f"{'holdout' if holdout else 'train'}_{seed}.npz"
    if not path.exists():
        frames, t = film_clip(seed, holdout)
        tmp = path.with_suffix(".tmp.npz")
        np.savez(tmp, frames=frames, xy=t.xy, radius=t.radius, material=t.material)
        tmp.rename(path)
    # The sizes are the scene's, not the filming's: read from its spec, cheap and exact.
    size = sizes(scene_from_seed(seed, holdout=holdout))
    with np.load(path) as z:
        return z["frames"], FrameTargets(z["xy"], z["radius"], z["material"], size)


def targets(t: FrameTargets, k: int, materials: int) -> dict[str, torch.Tensor]:
    """Frame k's target maps at stride STRIDE: the Gaussian centre map, and at each centre's
    cell its offset, log radius, log size and material (mask 1 there)."""
    h, w = HEIGHT // STRIDE, WIDTH // STRIDE
    heat = torch.zeros(h, w)
    regress = torch.zeros(4, h, w)
    material = torch.full((h, w), -1, dtype=torch.long)
    rows = torch.arange(h, dtype=torch.float32)[:, None]
    cols = torch.arange(w, dtype=torch.float32)[None, :]
    for o in range(t.xy.shape[1]):
        x, y = (float(v) / STRIDE for v in t.xy[k, o])
        if not (math.isfinite(x) and 0 <= x < w and 0 <= y < h):
            continue
        sigma = max(0.6, float(t.radius[k, o]) / STRIDE / 2)
        blob = torch.exp(-((cols - x + 0.5) ** 2 + (rows - y + 0.5) ** 2) / (2 * sigma**2))
        heat = torch.maximum(heat, blob)
        j, i = int(x), int(y)
        heat[i, j] = 1.0
        radius = math.log(max(float(t.radius[k, o]), 0.3))
        regress[:, i, j] = torch.tensor([x - j, y - i, radius, math.log(float(t.size[o]))])
        material[i, j] = int(t.material[o])
    return {"heat": heat, "regress": regress, "material": material}


def loss_fn(maps: torch.Tensor, target: dict[str, torch.Tensor]) -> torch.Tensor:
    """CenterNet's focal loss on the centre map, L1 on offsets, log radius and log size at the
    centres, cross-entropy on the material there."""
    heat = torch.sigmoid(maps[:, HEAT]).clamp(1e-4, 1 - 1e-4)
    gt = target["heat"]
    centre = gt >= 1.0
    pos = -((1 - heat) ** 2) * torch.log(heat) * centre
    neg = -((1 - gt) ** 4) * heat**2 * torch.log(1 - heat) * ~centre
    n = centre.sum().clamp(min=1)
    focal = (pos.sum() + neg.sum()) / n
    regress = maps[:, [OFFSET_X, OFFSET_Y, LOG_RADIUS, maps.shape[1] + LOG_SIZE]]
    l1 = (F.l1_loss(regress, target["regress"], reduction="none").sum(1) * centre).sum() / n
    logits = maps[:, MATERIAL:LOG_SIZE].permute(0, 2, 3, 1)
    ce = F.cross_entropy(logits[centre], target["material"][centre]) if centre.any() else 0.0
    return focal + l1 + 0.5 * ce


def batches(clips: list[tuple[np.ndarray, FrameTargets]], size: int, rng: np.random.Generator):
    materials = len(OBJECT_MATERIALS)
    while True:
        cur, prev, maps = [], [], []
        for _ in range(size):
            frames, t = clips[int(rng.integers(len(clips)))]
            k = int(rng.integers(len(frames)))
            pair = frames[k], frames[max(k - 1, 0)]
            if rng.random() < 0.5:  # a mirrored scene is as likely as the scene
                pair = tuple(f[:, ::-1] for f in pair)
                mirrored = np.stack([WIDTH - t.xy[..., 0], t.xy[..., 1]], axis=-1)
                t = FrameTargets(mirrored, t.radius, t.material, t.size)
            cur.append(pair[0])
            prev.append(pair[1])
            maps.append(targets(t, k, materials))
        yield (
            _tensor(np.stack(cur)),
            _tensor(np.stack(prev)),
            {key: torch.stack([m[key] for m in maps]) for key in maps[0]},
        )


def _tensor(rgb: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(rgb).permute(0, 3, 1, 2).float() / 255.0


def evaluate(model: Localiser, clips: list[tuple[np.ndarray, FrameTargets]]) -> str:
    """Detection at score >= 0.3 within 2 px of an in-frame centre; error of the detected ones,
    in position and in size (the share within 15 % of the true size)."""
    errors, size_errors, found, total, false = [], [], 0, 0, 0
    model.eval()
    with torch.no_grad():
        for frames, t in clips:
            x = _tensor(frames)
            prev = torch.cat([x[:1], x[:-1]])
            out = peaks(model(x, prev))
            for k in range(len(frames)):
                keep = out.score[k] >= 0.3
                det = out.xy[k][keep].numpy()
                used = np.zeros(len(det), bool)
                for o in range(t.xy.shape[1]):
                    xy = t.xy[k, o]
                    if not (np.isfinite(xy).all() and 0 <= xy[0] < WIDTH and 0 <= xy[1] < HEIGHT):
                        continue
                    total += 1
                    if len(det):
                        d = np.linalg.norm(det - xy, axis=1)
                        j = int(np.argmin(d))
                        if d[j] <= 2.0 and not used[j]:
                            used[j] = True
                            found += 1
                            errors.append(d[j])
                            size = float(out.size[k][keep][j])
                            size_errors.append(abs(math.log(size / float(t.size[o]))))
                false += int((~used).sum())
    model.train()
    e, s = np.asarray(errors), np.asarray(size_errors)
    return (
        f"objects {total}: found {found / max(total, 1):.1%}, false {false}, error median "
        f"{np.median(e):.3f} px, p90 {np.percentile(e, 90):.3f} px; size within 15 % "
        f"{np.mean(s < math.log(1.15)):.1%}, median error {math.exp(np.median(s)) - 1:.1%}"
        if len(e)
        else f"objects {total}: none found"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=160)
    parser.add_argument("--eval-clips", type=int, default=12)
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--batch", type=int, default=24)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--data", type=Path, default=Path("data/localiser"))
    parser.add_argument("--out", type=Path, default=Path("runs/localiser"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--init", type=Path, default=None, help="start from these weights (a fresh schedule)"
    )
    parser.add_argument(
        "--size-only",
        action="store_true",
        help="train the size branch alone (the trunk and its outputs fixed, as in --init)",
    )
    parser.add_argument(
        "--evaluate",
        type=Path,
        default=None,
        help="only print these weights' errors on --eval-clips fresh and held-out clips",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(args.threads)
    args.data.mkdir(parents=True, exist_ok=True)
    if args.evaluate is not None:
        model = Localiser(materials=len(OBJECT_MATERIALS))
        model.load_state_dict(torch.load(args.evaluate, weights_only=True)["model"])
        fresh = [cached_clip(args.data, FRESH_SEED + s, False) for s in range(args.eval_clips)]
        held = [cached_clip(args.data, HOLDOUT_SEED + s, True) for s in range(args.eval_clips)]
        print("fresh:   ", evaluate(model, fresh))
        print("held-out:", evaluate(model, held))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    train = [cached_clip(args.data, s, False) for s in range(args.clips)]
    if args.steps == 0:
        return  # the data only
    held = [cached_clip(args.data, HOLDOUT_SEED + s, True) for s in range(args.eval_clips)]
    log.info("data: %d clips, %d frames", len(train), sum(len(f) for f, _ in train))
    model = Localiser(materials=len(OBJECT_MATERIALS))
    trained = model.size.parameters() if args.size_only else model.parameters()
    if args.size_only:
        model.requires_grad_(False)
        model.size.requires_grad_(True)
    opt = torch.optim.AdamW(trained, lr=args.lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, args.lr, total_steps=args.steps)
    ckpt = args.out / "checkpoint.pt"
    step = 0
    if args.init is not None and not ckpt.exists():
        # Weights saved before the size branch existed start it from scratch.
        missing, unexpected = model.load_state_dict(torch.load(args.init)["model"], strict=False)
        if unexpected or any(not name.startswith("size.") for name in missing):
            raise ValueError(f"{args.init}: missing {missing}, unexpected {unexpected}")
    if ckpt.exists():
        state = torch.load(ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        step = state["step"]
    data = batches(train, args.batch, np.random.default_rng(step))
    while step < args.steps:
        cur, prev, target = next(data)
        loss = loss_fn(model(cur, prev), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        step += 1
        if step % 100 == 0:
            log.info("step %d loss %.3f", step, loss.item())
        if step % 500 == 0 or step == args.steps:
            state = {"model": model.state_dict(), "opt": opt.state_dict()}
            torch.save(state | {"sched": sched.state_dict(), "step": step}, ckpt)
    print("held-out:", evaluate(model, held))
    print("train:   ", evaluate(model, train[: args.eval_clips]))


if __name__ == "__main__":
    main()
