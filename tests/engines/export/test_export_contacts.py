"""The objects tier's graphs compute what the torch models compute, and the export states their
contract (service.pipeline.contacts.tier reads it back)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import torch

from engines.export.contacts import OBJECTS, export
from engines.models.localiser import Localiser, peaks
from engines.sim.materials import OBJECT_MATERIALS
from engines.tracks.head import load_head
from service.pipeline.contacts.tier import load_contact_tier


def test_exported_graphs_match_the_torch_models(tmp_path) -> None:
    out = export(OBJECTS / "localiser.pt", OBJECTS / "contact_head.pt", tmp_path / "objects")
    tier = load_contact_tier(tmp_path, "objects", strength=False)
    assert tier.materials == OBJECT_MATERIALS
    localiser = Localiser(materials=len(OBJECT_MATERIALS))
    localiser.load_state_dict(torch.load(OBJECTS / "localiser.pt", weights_only=True)["model"])
    localiser.eval()
    rng = np.random.default_rng(0)
    frames = rng.random((3, 3, tier.height, tier.width), dtype=np.float32)
    previous = np.roll(frames, 1, axis=-1)
    with torch.no_grad():
        expected = peaks(localiser(torch.from_numpy(frames), torch.from_numpy(previous)), 6)
    got = ort.InferenceSession(str(out / "localiser.onnx")).run(
        None, {"frames": frames, "previous": previous}
    )
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(g, e.numpy(), atol=1e-4)
    head = load_head(OBJECTS / "contact_head.pt")
    features = rng.normal(size=(16, head.config.features)).astype(np.float32)
    with torch.no_grad():
        logit, u = head(torch.from_numpy(features))
    probability, u_onnx = ort.InferenceSession(str(out / "head.onnx")).run(
        None, {"features": features}
    )
    np.testing.assert_allclose(probability, torch.sigmoid(logit).numpy(), atol=1e-5)
    np.testing.assert_allclose(u_onnx, u.numpy(), atol=1e-5)
