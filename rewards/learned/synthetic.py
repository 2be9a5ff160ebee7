"""Synthetic episodes (no simulator): a red square rises as progress goes 0 -> 1, for tests and smoke runs.

Same `SimEpisode` type as rewards.learned.sim_data, with kinds expert (steady progress, held at the end),
early_stop (progress freezes) and drop (progress rises, then falls back). The square's height encodes
progress, a blue bar the gripper command, so a tiny model can learn it in seconds.
"""

from __future__ import annotations

import numpy as np

from rewards.learned.sim_data import SimEpisode, frame_index_progress


def render(p: float, grip: float, size: int, rng: np.random.Generator) -> np.ndarray:
    img = np.full((size, size, 3), 200, dtype=np.uint8)
    img += rng.integers(0, 20, (size, size, 3), dtype=np.uint8)
    s = size // 6
    y = int((size - s - 2) * (1.0 - p))
    x = size // 2 - s // 2
    img[y : y + s, x : x + s] = (220, 30, 30)
    if grip > 0:
        img[:4, : size // 2] = (30, 30, 220)
    return img


KIND_IDS = {"expert": 0, "early_stop": 1, "drop": 2}


def synthetic_episode(seed: int, kind: str = "expert", T: int = 24, size: int = 84, hold: int = 4,
                      instruction: str = "lift the red cube") -> SimEpisode:
    if kind not in KIND_IDS:
        raise ValueError(f"unknown synthetic episode kind {kind!r}; expected one of {sorted(KIND_IDS)}")
    # A fixed number per kind: str hash() is salted per process, which made the data differ between runs.
    rng = np.random.default_rng([seed, KIND_IDS[kind]])
    t = np.arange(T + 1, dtype=np.float64)
    if kind == "expert":
        p = np.minimum(t / (T - hold), 1.0)
    elif kind == "early_stop":
        stop = int(rng.integers(T // 4, T // 2))
        p = np.minimum(t, stop) / (T - hold)
    elif kind == "drop":
        peak = int(rng.integers(T // 2, 3 * T // 4))
        p = np.where(t <= peak, t / (T - hold), np.maximum(peak / (T - hold) - (t - peak) * 0.1, 0.2))
    else:
        raise AssertionError(kind)
    success = p >= 1.0
    grip = np.where(p > 0.3, 1.0, -1.0)
    frames = np.stack([render(float(q), float(g), size, rng) for q, g in zip(p, grip)])
    obj = np.stack([np.zeros_like(p), np.zeros_like(p), 0.82 + 0.1 * p], 1).astype(np.float32)
    ep = SimEpisode(frames=frames, instruction=instruction, task="Synthetic", kind=kind, seed=seed, success=success,
                    gripper_cmd=grip[:-1].astype(np.float32), eef_pos=obj.copy(), obj_pos=obj,
                    finger=np.where(grip > 0, 0.02, 0.08).astype(np.float32))
    ep.progress = frame_index_progress(success) if ep.succeeded else p.astype(np.float32)
    return ep


def synthetic_episodes(seeds=range(6), kinds=("expert", "early_stop", "drop"), **kw) -> list[SimEpisode]:
    return [synthetic_episode(s, k, **kw) for s in seeds for k in kinds]
