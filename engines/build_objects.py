"""Rebuild the `objects` tier from scratch: localiser, contact head, impulse estimate, threshold.

    python -m engines.build_objects     # service/models/objects

Every step caches what it makes, so a stopped build continues from its last finished step:

1. localiser data: LOCALISER_CLIPS simulated clips at their own frame rates (data/localiser/);
2. the localiser: LOCALISER_ROUNDS (steps, learning rate), each a one-cycle schedule starting
   from the last round's weights (runs/objects/localiser_<i>/, checkpointed every 500 steps),
   then its size branch alone on the first SIZE_ROUND clips (runs/objects/localiser_size/);
3. the localiser exported (engines.export.contacts), so the next steps run the tier's own graph;
4. the localiser's real tracks on its training clips and on UNSEEN_CLIPS clips of later seeds,
   labelled from the simulation (engines.tracks.observed, data/tracks/observed/);
5. the contact head on simulated tracks with detector noise plus those real tracks
   (engines.tracks.train, data/tracks/rounds/), exported with the localiser;
6. the impulse estimate (engines.tracks.strength), the firing threshold chosen on the whole
   path on validation clips (engines.eval.contact_threshold), the live gain
   (engines.eval.loudness) and each stage's GPU precision (engines.eval.precision), all
   written into config.json.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import torch

from engines.eval import contact_threshold, loudness, precision
from engines.export.contacts import OBJECTS, export
from engines.tracks import observed, strength
from engines.tracks import train as head_train
from engines.train import localiser

log = logging.getLogger(__name__)
LOCALISER_CLIPS = 720
LOCALISER_ROUNDS = ((2000, 2e-3), (6000, 1e-3))
SIZE_ROUND = ("--clips", "400", "--steps", "3000", "--lr", "3e-3", "--batch", "24", "--size-only")
UNSEEN_CLIPS = 480  # real tracks on seeds the localiser never trained on
HEAD = (
    "--minutes",
    "12",
    "--observed",
    str(LOCALISER_CLIPS),
    "--unseen",
    str(UNSEEN_CLIPS),
    "--observed-weight",
    "3",
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("runs/objects"))
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    started = time.perf_counter()
    clips = ("--clips", str(LOCALISER_CLIPS), "--threads", str(args.threads))
    init: Path | None = None
    for i, (steps, lr) in enumerate(LOCALISER_ROUNDS):
        out = args.work / f"localiser_{i}"
        more = () if init is None else ("--init", str(init))
        localiser.main([*clips, "--steps", str(steps), "--lr", str(lr), "--out", str(out), *more])
        init = out / "weights.pt"
        torch.save({"model": torch.load(out / "checkpoint.pt")["model"]}, init)
        log.info("localiser round %d: %.0f s", i, time.perf_counter() - started)
    assert init is not None
    out = args.work / "localiser_size"
    threads = ("--threads", str(args.threads))
    localiser.main([*SIZE_ROUND, *threads, "--out", str(out), "--init", str(init)])
    init = out / "weights.pt"
    torch.save({"model": torch.load(out / "checkpoint.pt")["model"]}, init)
    weights = OBJECTS / "localiser.pt"
    weights.write_bytes(init.read_bytes())
    head = OBJECTS / "contact_head.pt"
    export(weights, head, OBJECTS)  # with the shipped head: step 4 reads only the localiser
    observed.build(LOCALISER_CLIPS)
    observed.build(UNSEEN_CLIPS, first=LOCALISER_CLIPS)
    log.info("observed tracks: %.0f s", time.perf_counter() - started)
    trained = args.work / "contact_head.pt"
    if not trained.exists():
        head_train.main([str(trained), *HEAD])
    head.write_bytes(trained.read_bytes())
    head.with_suffix(".json").write_bytes(trained.with_suffix(".json").read_bytes())
    export(weights, head, OBJECTS)
    strength.main(["--clips", str(LOCALISER_CLIPS), "--write"])
    contact_threshold.main(["--clips", "28", "--controls", "8", "--write"])
    loudness.main(["--models", str(OBJECTS.parent), "--tiers", "objects", "--write"])
    precision.main(["--models", str(OBJECTS.parent), "--tiers", "objects", "--write"])
    log.info("total: %.0f s", time.perf_counter() - started)


if __name__ == "__main__":
    main()
