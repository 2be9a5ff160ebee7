"""Episode recorder: images, actions, proprio, simulator states, language, success -> HDF5.

One file holds many episodes, one group each ("episode_000000", ...):
  images/<camera> uint8 [T, H, W, 3]   observation before each action
  actions float32 [T, 7]   proprio float32 [T, 8]   states float64 [T, S] (MuJoCo state, if known)
  rewards float32 [T]      source uint8 [T] (0 policy, 1 human, 2 hold)   intervention bool [T]
  attrs: language, success, end_reason, num_steps, meta (JSON), events (JSON list)
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

SOURCES = {"policy": 0, "human": 1, "hold": 2}


@dataclass
class Episode:
    """An episode being recorded (kept in memory until it ends)."""

    language: str = ""
    """Instruction of the task."""
    meta: dict = field(default_factory=dict)
    """Anything else worth keeping (task, seed, init state index, ...)."""
    steps: list = field(default_factory=list)
    """One dict per step: obs images/proprio, action, reward, state, source, intervention."""
    events: list = field(default_factory=list)
    """Timestamped events: pause, takeover, label, watchdog, estop, mark ..."""
    success: bool | None = None
    """Outcome (None until known)."""
    end_reason: str = ""
    """Why it ended: success, failure, timeout, reset, disconnect, estop, ..."""

    def add_step(self, obs: dict, action, reward: float = 0.0, state=None, source: str = "policy",
                 intervention: bool = False, **extra: Any) -> None:
        self.steps.append({
            "images": {k: np.asarray(v, dtype=np.uint8) for k, v in obs.get("images", {}).items()},
            "proprio": np.asarray(obs.get("proprio", np.zeros(0)), dtype=np.float32),
            "action": np.asarray(action, dtype=np.float32),
            "reward": float(reward),
            "state": None if state is None else np.asarray(state, dtype=np.float64),
            "source": SOURCES[source],
            "intervention": bool(intervention or source == "human"),
            **extra,
        })

    def event(self, kind: str, **data: Any) -> None:
        self.events.append({"t": time.time(), "step": len(self.steps), "kind": kind, **data})

    def end(self, reason: str, success: bool | None = None) -> "Episode":
        self.end_reason = reason
        if success is not None:
            self.success = success
        return self


def _stack(steps: list, key: str, dtype) -> np.ndarray:
    vals = [s[key] for s in steps]
    return np.stack(vals).astype(dtype) if vals else np.zeros((0,), dtype=dtype)


class HDF5Recorder:
    """Append finished episodes to an HDF5 file (opened per write, so a crash never corrupts older ones)."""

    def __init__(self, path: str | Path, compression: str | None = "gzip") -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.compression = compression

    def write(self, ep: Episode) -> str:
        import h5py  # noqa: PLC0415  (only needed when recording)

        with h5py.File(self.path, "a") as f:
            name = f"episode_{len([k for k in f.keys() if k.startswith('episode_')]):06d}"
            g = f.create_group(name)
            steps = ep.steps
            cams = sorted(steps[0]["images"]) if steps else []
            for cam in cams:
                g.create_dataset(f"images/{cam}", data=np.stack([s["images"][cam] for s in steps]),
                                 compression=self.compression)
            g.create_dataset("actions", data=_stack(steps, "action", np.float32))
            g.create_dataset("proprio", data=_stack(steps, "proprio", np.float32))
            g.create_dataset("rewards", data=np.array([s["reward"] for s in steps], dtype=np.float32))
            g.create_dataset("source", data=np.array([s["source"] for s in steps], dtype=np.uint8))
            g.create_dataset("intervention", data=np.array([s["intervention"] for s in steps], dtype=bool))
            if steps and all(s["state"] is not None for s in steps):
                g.create_dataset("states", data=_stack(steps, "state", np.float64))
            g.attrs.update(language=ep.language, success=bool(ep.success), end_reason=ep.end_reason,
                           num_steps=len(steps), meta=json.dumps(ep.meta, default=str),
                           events=json.dumps(ep.events, default=str))
        return name


def read_episodes(path: str | Path) -> list[dict]:
    """Load every episode of an HDF5 file into plain dicts of arrays (for replay and tests)."""
    import h5py  # noqa: PLC0415

    out = []
    with h5py.File(path, "r") as f:
        for name in sorted(k for k in f.keys() if k.startswith("episode_")):
            g = f[name]
            ep = {k: g[k][()] for k in ("actions", "proprio", "rewards", "source", "intervention")}
            ep["states"] = g["states"][()] if "states" in g else None
            ep["images"] = {cam: g[f"images/{cam}"][()] for cam in g["images"]} if "images" in g else {}
            ep.update({k: g.attrs[k] for k in ("language", "success", "end_reason", "num_steps")})
            ep["meta"], ep["events"] = json.loads(g.attrs["meta"]), json.loads(g.attrs["events"])
            ep["name"] = name
            out.append(ep)
    return out
