"""Physically consistent clips: MuJoCo scenes of falling, rolling and colliding objects, rendered offscreen.

A scene (drawn from its seed by `sample_scene`) holds 2-4 free bodies (sphere, box, cylinder) with
random colours, start heights and velocities above a checkered floor, a camera that orbits slowly
(random start azimuth, elevation, distance and orbit speed) and a directional light with random
direction and strength. `simulate` steps the physics and renders `frames` frames at `fps`.

A `Physics` edit makes a clip violate physics from a frame on (the generator's "physics" artifacts):
gravity reversed, a sudden speed change, or one body losing its collisions (it sinks through the
floor and other bodies). With no edit the clip is the "real" one.

MUJOCO_GL is chosen by robots/gl.py before mujoco is first imported (EGL, else osmesa).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field

import numpy as np

from robots.gl import configure_gl, gl_context_made

SHAPES = ("sphere", "box", "cylinder")
TIMESTEP = 0.004  # seconds per physics step


@dataclass(frozen=True)
class Body:
    shape: str
    size: float  # radius / half-extent, metres
    rgba: tuple[float, float, float, float]
    pos: tuple[float, float, float]
    vel: tuple[float, float, float]  # linear velocity, m/s
    spin: tuple[float, float, float]  # angular velocity, rad/s


@dataclass(frozen=True)
class Scene:
    seed: int
    bodies: tuple[Body, ...]
    azimuth: float  # camera start azimuth, degrees
    orbit: float  # camera azimuth change over the clip, degrees
    elevation: float  # degrees (negative: looking down)
    distance: float  # metres from the look-at point
    light_dir: tuple[float, float, float]
    light: float  # diffuse strength
    floor_rgb: tuple[tuple[float, float, float], tuple[float, float, float]]


@dataclass(frozen=True)
class Physics:
    """A physics violation from frame `start` on: kind "antigravity" (gravity +strength * 9.81 upwards),
    "speed" (every body's velocity times `strength`) or "interpenetrate" (body `body` stops colliding)."""

    kind: str
    start: int
    strength: float = 1.0
    body: int = 0


def sample_scene(seed: int) -> Scene:
    """The scene of `seed` (deterministic)."""
    rng = np.random.default_rng([seed, 7])
    bodies = []
    n = int(rng.integers(2, 5))
    angles = rng.permutation(n) * (2 * math.pi / n) + rng.uniform(0, 2 * math.pi)
    for i in range(n):
        size = float(rng.uniform(0.12, 0.25))
        radius = float(rng.uniform(0.3, 0.9))
        x, y = radius * math.cos(angles[i]), radius * math.sin(angles[i])
        toward = -np.array([x, y]) / max(radius, 1e-6) * rng.uniform(0.0, 1.8)  # roll toward the centre: collisions
        rgb = rng.uniform(0.1, 1.0, 3)
        bodies.append(Body(shape=SHAPES[int(rng.integers(len(SHAPES)))], size=size,
                           rgba=(*map(float, rgb), 1.0),
                           pos=(x, y, size + float(rng.uniform(0.0, 1.2))),
                           vel=(float(toward[0]), float(toward[1]), float(rng.uniform(-0.5, 1.5))),
                           spin=tuple(float(v) for v in rng.normal(0, 2.0, 3))))
    light = rng.normal(0, 1, 3)
    light[2] = -abs(light[2]) - 0.8
    return Scene(seed=seed, bodies=tuple(bodies), azimuth=float(rng.uniform(0, 360)),
                 orbit=float(rng.uniform(-40, 40)), elevation=float(rng.uniform(-45, -15)),
                 distance=float(rng.uniform(2.6, 3.6)), light_dir=tuple(float(v) for v in light / np.linalg.norm(light)),
                 light=float(rng.uniform(0.4, 0.9)),
                 floor_rgb=(tuple(float(v) for v in rng.uniform(0.3, 0.8, 3)), tuple(float(v) for v in rng.uniform(0.1, 0.5, 3))))


def scene_xml(scene: Scene, width: int, height: int) -> str:
    """The MJCF: checkered floor, one light, one free body per object (geoms named b<i>)."""
    (r1, g1, b1), (r2, g2, b2) = scene.floor_rgb
    lx, ly, lz = scene.light_dir
    bodies = []
    for i, b in enumerate(scene.bodies):
        size = {"sphere": f"{b.size}", "box": f"{b.size} {b.size} {b.size}", "cylinder": f"{b.size} {b.size}"}[b.shape]
        rgba = " ".join(f"{v:.3f}" for v in b.rgba)
        bodies.append(f'<body name="b{i}" pos="{b.pos[0]} {b.pos[1]} {b.pos[2]}"><freejoint/>'
                      f'<geom name="b{i}" type="{b.shape}" size="{size}" rgba="{rgba}" density="500"/></body>')
    return f"""<mujoco>
  <option timestep="{TIMESTEP}"/>
  <visual><global offwidth="{width}" offheight="{height}"/><quality offsamples="0" shadowsize="1024"/>
    <headlight ambient=".3 .3 .3" diffuse=".2 .2 .2" specular="0 0 0"/></visual>
  <asset><texture name="grid" type="2d" builtin="checker" rgb1="{r1} {g1} {b1}" rgb2="{r2} {g2} {b2}" width="64" height="64"/>
    <material name="floor" texture="grid" texrepeat="4 4"/></asset>
  <worldbody>
    <light directional="true" pos="0 0 4" dir="{lx} {ly} {lz}" diffuse="{scene.light} {scene.light} {scene.light}"
           castshadow="true"/>
    <geom name="floor" type="plane" size="4 4 .1" material="floor"/>{''.join(bodies)}
  </worldbody>
</mujoco>"""


def _mujoco():
    chosen = configure_gl()
    import mujoco  # noqa: PLC0415  (after configure_gl: mujoco reads MUJOCO_GL at import)

    gl = sys.modules.get("mujoco.rendering.classic.gl_context")
    if getattr(gl, "_MUJOCO_GL", chosen) != chosen:
        raise RuntimeError(f"mujoco was imported with MUJOCO_GL={gl._MUJOCO_GL!r}, not {chosen!r}: set MUJOCO_GL")
    return mujoco


@dataclass
class Rendered:
    frames: np.ndarray  # [T, H, W, 3] uint8
    masks: np.ndarray  # [T, n_bodies, H, W] bool: each body's visible pixels
    positions: np.ndarray = field(default=None)  # [T, n_bodies, 3] body centres (metres)


def simulate(scene: Scene, frames: int = 16, fps: float = 8.0, size: int = 64, physics: Physics | None = None,
             recolor: dict | None = None, with_masks: bool = False) -> Rendered:
    """Step `scene` and render `frames` frames of `size` x `size` at `fps`.

    `recolor` ({"body": i, "rgba": [T, 4], "scale": [T]}) changes body i's colour and drawn size per
    frame (the "morph" / "vanish" artifacts: the physics is untouched, only what is drawn changes)."""
    mujoco = _mujoco()
    model = mujoco.MjModel.from_xml_string(scene_xml(scene, size, size))
    data = mujoco.MjData(model)
    for i, b in enumerate(scene.bodies):
        adr = model.jnt_dofadr[i]
        data.qvel[adr : adr + 3] = b.vel
        data.qvel[adr + 3 : adr + 6] = b.spin
    steps = max(1, round(1.0 / (fps * TIMESTEP)))
    cam = mujoco.MjvCamera()
    cam.lookat[:] = (0.0, 0.0, 0.25)
    cam.distance, cam.elevation = scene.distance, scene.elevation
    geoms = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, f"b{i}") for i in range(len(scene.bodies))]
    base_size = model.geom_size.copy()
    out = np.zeros((frames, size, size, 3), np.uint8)
    masks = np.zeros((frames, len(geoms), size, size), bool)
    positions = np.zeros((frames, len(geoms), 3))
    renderer = mujoco.Renderer(model, size, size)
    gl_context_made()  # its first context registers eglTerminate: live robot envs must close before it
    try:
        for t in range(frames):
            if physics is not None and t == physics.start:
                _violate(model, data, physics, geoms)
            if t:
                mujoco.mj_step(model, data, nstep=steps)
            else:
                mujoco.mj_forward(model, data)
            if recolor is not None:
                g = geoms[recolor["body"]]
                model.geom_rgba[g] = recolor["rgba"][t]
                model.geom_size[g] = base_size[g] * recolor["scale"][t]
            cam.azimuth = scene.azimuth + scene.orbit * t / max(frames - 1, 1)
            renderer.update_scene(data, camera=cam)
            out[t] = renderer.render()
            if with_masks:
                _masks(mujoco, renderer, data, cam, geoms, masks[t])
            positions[t] = data.xpos[1 : 1 + len(geoms)]
            if recolor is not None:
                model.geom_size[geoms[recolor["body"]]] = base_size[geoms[recolor["body"]]]  # collisions keep the true size
    finally:
        renderer.close()
    return Rendered(out, masks, positions)


def _masks(mujoco, renderer, data, cam, geoms: list[int], out: np.ndarray) -> None:
    """out [n_bodies, H, W] bool, in place: each body's visible pixels (segmentation pass)."""
    renderer.enable_segmentation_rendering()
    renderer.update_scene(data, camera=cam)
    seg = renderer.render()
    renderer.disable_segmentation_rendering()
    is_geom = seg[..., 1] == int(mujoco.mjtObj.mjOBJ_GEOM)
    for k, g in enumerate(geoms):
        out[k] = is_geom & (seg[..., 0] == g)


def _violate(model, data, physics: Physics, geoms: list[int]) -> None:
    if physics.kind == "antigravity":
        model.opt.gravity[:] = (0.0, 0.0, 9.81 * physics.strength)
    elif physics.kind == "speed":
        data.qvel[:] *= physics.strength
    elif physics.kind == "interpenetrate":
        g = geoms[physics.body % len(geoms)]
        model.geom_contype[g] = 0
        model.geom_conaffinity[g] = 0
    else:
        raise ValueError(f"unknown physics violation {physics.kind!r}")
