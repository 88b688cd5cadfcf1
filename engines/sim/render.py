"""Render object poses with Bullet's CPU rasteriser (ER_TINY_RENDERER) into RGB frames.

`SceneRenderer` owns a visual-only copy of the scene in its own `p.DIRECT` client, separate from
the physics world, so rendering can never disturb the simulation. One renderer per thread.

Shadows: Bullet's shadow map covers a region tied to the light distance, darkens half the floor
outside it and shows acne rings when the light is moved away, so by default each object gets a
blob shadow instead (a dark disc under it that fades with height). It still tells a viewer, and
the model, whether an object touches the floor. `shadows=True` adds Bullet's shadow map.

Measured on this project's 2-core dev machine, blob shadows: ~1.9 ms per 128x72 frame, ~45 ms at
640x360, ~0.17 s at 1280x720 (cost grows with pixels; Bullet's shadow map doubles it).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from types import TracebackType

import numpy as np
import pybullet as p

from engines.sim.camera import CameraSpec
from engines.sim.materials import material
from engines.sim.scene import ObjectSpec, SceneSpec
from engines.sim.textures import TEXTURE_REPEAT_M, floor_texture, write_png

FLOOR_HALF_M = 30.0  # far enough that the floor meets the horizon
NEAR_M, FAR_M = 0.02, 60.0
AMBIENT, DIFFUSE, SPECULAR = 0.55, 0.45, 0.3
BLOB_DARKNESS, BLOB_FADE_M = 0.5, 0.3  # darkest at contact; e-folding height of the fade


class SceneRenderer:
    """Renders `spec`'s floor and objects at given poses, seen by its camera at time t."""

    def __init__(self, spec: SceneSpec, width: int, height: int, *, shadows: bool = False) -> None:
        if width < 2 or height < 2:
            raise ValueError(f"render size must be at least 2x2, got {width}x{height}")
        self.spec, self.width, self.height, self.shadows = spec, width, height, shadows
        self._client = p.connect(p.DIRECT)
        self._add_floor()
        self._bodies = [self._add_object(obj) for obj in spec.objects]
        self._blobs = [self._add_blob(i, obj) for i, obj in enumerate(spec.objects)]
        self._projection = p.computeProjectionMatrixFOV(
            spec.camera.fov_deg, width / height, NEAR_M, FAR_M, physicsClientId=self._client
        )

    def __enter__(self) -> SceneRenderer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._client >= 0:
            p.disconnect(self._client)
            self._client = -1

    def project(self, positions: np.ndarray, t: float) -> np.ndarray:
        """Where the points (O, 3) appear in the frame at time t: (O, 2) normalised device
        coordinates, x right and y up, [-1, 1] across the frame; NaN behind the camera."""
        return project_points(
            self.spec.camera, self.width / self.height, positions, t, self._client
        )

    def up_axis(self, t: float) -> np.ndarray:
        """The camera's up direction in the world at time t, (3,): a point moved along it by
        its distance r projects r * focal / depth higher, its apparent size."""
        view = np.asarray(_view_matrix(self.spec.camera, t, self._client)).reshape(4, 4).T
        return view[1, :3]

    def render(self, positions: np.ndarray, orientations: np.ndarray, t: float) -> np.ndarray:
        """Objects at `positions` (O, 3) and `orientations` (O, 4 xyzw), camera at time t ->
        (height, width, 3) uint8 RGB."""
        for body, pos, orn in zip(self._bodies, positions, orientations, strict=True):
            p.resetBasePositionAndOrientation(
                body, pos.tolist(), orn.tolist(), physicsClientId=self._client
            )
        for (blob, lift), obj, pos in zip(self._blobs, self.spec.objects, positions, strict=True):
            height = max(0.0, float(pos[2]) - min(obj.half_extents))
            shade = 1.0 - BLOB_DARKNESS * float(np.exp(-height / BLOB_FADE_M))
            p.resetBasePositionAndOrientation(
                blob,
                [float(pos[0]), float(pos[1]), lift],
                [0, 0, 0, 1],
                physicsClientId=self._client,
            )
            p.changeVisualShape(
                blob,
                -1,
                rgbaColor=[*(np.asarray(self.spec.surface_colour) * shade), 1.0],
                physicsClientId=self._client,
            )
        _, _, rgba, _, _ = p.getCameraImage(
            self.width,
            self.height,
            _view_matrix(self.spec.camera, t, self._client),
            self._projection,
            renderer=p.ER_TINY_RENDERER,
            shadow=int(self.shadows),
            lightDirection=list(self.spec.light_direction),
            lightAmbientCoeff=AMBIENT,
            lightDiffuseCoeff=DIFFUSE,
            lightSpecularCoeff=SPECULAR,
            flags=p.ER_NO_SEGMENTATION_MASK,
            physicsClientId=self._client,
        )
        return np.asarray(rgba, dtype=np.uint8).reshape(self.height, self.width, 4)[..., :3].copy()

    def _add_floor(self) -> None:
        s, r = FLOOR_HALF_M, 2 * FLOOR_HALF_M / TEXTURE_REPEAT_M
        visual = p.createVisualShape(
            p.GEOM_MESH,
            vertices=[[-s, -s, 0], [s, -s, 0], [s, s, 0], [-s, s, 0]],
            indices=[0, 1, 2, 0, 2, 3],
            uvs=[[0, 0], [r, 0], [r, r], [0, r]],
            normals=[[0, 0, 1]] * 4,
            physicsClientId=self._client,
        )
        floor = p.createMultiBody(0, -1, visual, physicsClientId=self._client)
        texture = floor_texture(self.spec.surface, self.spec.surface_colour, self.spec.texture_seed)
        with tempfile.TemporaryDirectory(prefix="foley-tex-") as tmp:
            path = Path(tmp) / "floor.png"
            write_png(path, texture)
            tex_id = p.loadTexture(str(path), physicsClientId=self._client)
        p.changeVisualShape(
            floor, -1, textureUniqueId=tex_id, rgbaColor=[1, 1, 1, 1], physicsClientId=self._client
        )

    def _add_object(self, obj: ObjectSpec) -> int:
        r, _, hz = obj.half_extents
        spec_c = [material(obj.material).specular] * 3
        kw = {
            "rgbaColor": [*obj.colour, 1.0],
            "specularColor": spec_c,
            "physicsClientId": self._client,
        }
        if obj.shape == "sphere":
            visual = p.createVisualShape(p.GEOM_SPHERE, radius=r, **kw)
        elif obj.shape == "box":
            visual = p.createVisualShape(p.GEOM_BOX, halfExtents=obj.half_extents, **kw)
        elif obj.shape == "cylinder":
            visual = p.createVisualShape(p.GEOM_CYLINDER, radius=r, length=2 * hz, **kw)
        else:  # capsule: length is the cylinder part
            visual = p.createVisualShape(p.GEOM_CAPSULE, radius=r, length=2 * (hz - r), **kw)
        return p.createMultiBody(
            0,
            -1,
            visual,
            basePosition=obj.position,
            baseOrientation=obj.orientation,
            physicsClientId=self._client,
        )

    def _add_blob(self, index: int, obj: ObjectSpec) -> tuple[int, float]:
        """A flat disc for the object's blob shadow, and its height (staggered per object so
        overlapping discs do not z-fight)."""
        radius = 0.4 * obj.size_m
        visual = p.createVisualShape(
            p.GEOM_CYLINDER,
            radius=radius,
            length=1e-4,
            rgbaColor=[*self.spec.surface_colour, 1.0],
            physicsClientId=self._client,
        )
        return p.createMultiBody(0, -1, visual, physicsClientId=self._client), 5e-4 + 2e-4 * index


def project_points(
    camera: CameraSpec, aspect: float, points: np.ndarray, t: float, client: int
) -> np.ndarray:
    """`points` (O, 3) in the world -> (O, 2) normalised device coordinates of the camera at
    time t, through the same matrices the rasteriser uses; NaN for points behind the camera."""
    view = np.asarray(_view_matrix(camera, t, client)).reshape(4, 4).T
    projection = (
        np.asarray(
            p.computeProjectionMatrixFOV(
                camera.fov_deg, aspect, NEAR_M, FAR_M, physicsClientId=client
            )
        )
        .reshape(4, 4)
        .T
    )
    clip = np.c_[points, np.ones(len(points))] @ (projection @ view).T
    w = clip[:, 3:4]
    return np.where(w > NEAR_M, clip[:, :2] / np.where(w > NEAR_M, w, 1.0), np.nan)


def _view_matrix(camera: CameraSpec, t: float, client: int) -> list[float]:
    target, distance, yaw, pitch = camera.at(t)
    return p.computeViewMatrixFromYawPitchRoll(
        list(target), distance, yaw, pitch, 0.0, 2, physicsClientId=client
    )
