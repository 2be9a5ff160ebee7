"""Graded artifacts of generated video, applied to a scene's clip ("fake" = the real clip's scene, altered).

Kinds (`KINDS`), each at level 1 (subtle) .. 5 (blatant), the level recorded per clip:
* ``flicker``: per-frame brightness and colour gain jitter (std 4% * level);
* ``boiling``: texture boiling: blocky noise re-drawn every frame inside the objects (amplitude 7 * level);
* ``ghosting``: interpolation ghosting: each frame blended with the one before (weight 0.11 * level);
* ``morph``: one object's colour drifts and its drawn size swells over the clip (physics unchanged);
* ``vanish``: one object fades out from a random frame (alpha down to 1 - level / 5; level 5: gone);
* ``physics``: a physics violation from a random frame: reversed gravity (0.35 * level g), a sudden
  speed change (x 1 + 0.6 * level) or one object losing its collisions (sinks through the floor),
  the latter starting earlier at higher levels.
`fake_clip(scene, kind, level, rng, ...)` renders the altered clip; pure post-processing kinds work on
the real clip's frames (`flicker`, `ghosting`, and `boiling` with its masks).
"""

from __future__ import annotations

import numpy as np

from tasks.video_authenticity.scenes import Physics, Rendered, Scene, simulate

KINDS = ("flicker", "boiling", "ghosting", "morph", "vanish", "physics")
LEVELS = (1, 2, 3, 4, 5)


def flicker(frames: np.ndarray, level: int, rng: np.random.Generator) -> np.ndarray:
    """frames [T, H, W, 3] uint8 -> same, each frame times a random gain (per channel, shared part)."""
    t = frames.shape[0]
    gain = 1 + 0.04 * level * (rng.standard_normal((t, 1, 1, 1)) + 0.3 * rng.standard_normal((t, 1, 1, 3)))
    return np.clip(frames * gain, 0, 255).astype(np.uint8)


def boiling(frames: np.ndarray, masks: np.ndarray, level: int, rng: np.random.Generator, block: int = 4) -> np.ndarray:
    """frames [T, H, W, 3], masks [T, n, H, W] bool -> frames with fresh blocky noise on objects each frame."""
    t, h, w, _ = frames.shape
    coarse = rng.standard_normal((t, -(-h // block), -(-w // block), 3)) * 7 * level
    noise = coarse.repeat(block, 1).repeat(block, 2)[:, :h, :w]
    on = masks.any(1)[..., None] if masks.size else np.zeros((t, h, w, 1), bool)
    return np.clip(frames + noise * on, 0, 255).astype(np.uint8)


def ghosting(frames: np.ndarray, level: int) -> np.ndarray:
    """frames [T, H, W, 3] -> frame t blended with frame t-1 (weight 0.11 * level): double images."""
    a = 0.11 * level
    out = frames.astype(np.float32)
    out[1:] = (1 - a) * out[1:] + a * frames[:-1]
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def _ramp(t: int, start: int, length: int) -> np.ndarray:
    """[t] 0 before `start`, rising linearly to 1 over `length` frames."""
    return np.clip((np.arange(t) - start + 1) / max(length, 1), 0, 1)


def fake_clip(scene: Scene, kind: str, level: int, rng: np.random.Generator, real: Rendered | None = None,
              frames: int = 16, fps: float = 8.0, size: int = 64) -> tuple[np.ndarray, dict]:
    """The `kind` artifact at `level` on `scene`: (frames [T, H, W, 3] uint8, info dict recorded with it).

    `real` (the scene's real clip, with masks for `boiling`) is reused by the post-processing kinds."""
    if kind not in KINDS:
        raise ValueError(f"unknown artifact kind {kind!r} (one of {KINDS})")
    if level not in LEVELS:
        raise ValueError(f"artifact level must be one of {LEVELS}, got {level!r}")
    n = len(scene.bodies)
    if kind in ("flicker", "ghosting", "boiling"):
        if real is None or (kind == "boiling" and not real.masks.any()):
            real = simulate(scene, frames, fps, size, with_masks=kind == "boiling")
        if kind == "flicker":
            return flicker(real.frames, level, rng), {}
        if kind == "ghosting":
            return ghosting(real.frames, level), {}
        return boiling(real.frames, real.masks, level, rng), {}
    if kind in ("morph", "vanish"):
        body = int(rng.integers(n))
        base = np.array(scene.bodies[body].rgba)
        start = int(rng.integers(1, frames // 2))
        ramp = _ramp(frames, start, frames - start if kind == "morph" else 2)
        if kind == "morph":
            target = np.append(rng.uniform(0.1, 1.0, 3), 1.0)
            colour = base + (target - base) * (0.2 * level) * ramp[:, None]
            scale = 1 + 0.15 * level * ramp
        else:
            colour = np.tile(base, (frames, 1))
            colour[:, 3] = 1 - (level / 5) * ramp
            scale = np.ones(frames)
        recolor = {"body": body, "rgba": colour, "scale": scale}
        return simulate(scene, frames, fps, size, recolor=recolor).frames, {"body": body, "start": start}
    mode = ("antigravity", "speed", "interpenetrate")[int(rng.integers(3))]
    if mode == "interpenetrate":
        start = max(1, int(round(frames * (1 - level / 6))) - int(rng.integers(0, 2)))
        edit = Physics(mode, start, body=int(rng.integers(n)))
    else:
        start = int(rng.integers(2, frames // 2 + 1))
        edit = Physics(mode, start, 0.35 * level if mode == "antigravity" else 1 + 0.6 * level)
    return simulate(scene, frames, fps, size, physics=edit).frames, {"mode": mode, "start": start}
