"""Behaviour-cloning frames from the scripted expert, with DART-style noise injection.

Pure demos only show the expert's own states, so a cloned policy that drifts off them has never
seen how to recover. Here the simulator executes ``expert_action + N(0, noise)`` on the arm's
translation while every frame is labelled with the expert's *clean* action for the state it is in
(the expert's phase machine re-plans from wherever the noise pushed the arm). Frames are stored as
one ``.npz``; `FramesEnv` serves them to `vlrl/sft.py` through the ordinary env contract
(``reset(seed)`` -> observation with ``info["expert_action"]``).

    python -m tasks.robot_manipulation.demos --episodes 150 --noise 0.3 --image-size 112 --out runs/lift_demos
    # -> runs/lift_demos/frames.npz (+ action_stats.json from the clean expert actions)
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time

import numpy as np
from vlrl.episode import Observation, StepResult

from .action_tokenizer import ActionStats
from .config import Config
from .env import observation

def collect(cfg: Config, episodes: int, noise: float, seed: int = 0, progress: bool = True) -> dict:
    """Roll out the expert `episodes` times (robosuite seeds seed..seed+episodes-1) with translation noise.

    Returns arrays: images [N, H, W, 3] uint8, actions [N, 7] (clean expert labels), episode [N], step [N],
    plus per-episode success [E] and the instruction.
    """
    from robots.env import make_env
    from robots.experts import SPECS, PickPlaceExpert, expert_view

    from .env import robosuite_config

    rng = np.random.default_rng(seed)
    sim, expert = make_env(robosuite_config(cfg)), PickPlaceExpert(SPECS[cfg.env])
    images, actions, ep_idx, steps, success = [], [], [], [], []
    instruction = ""
    t0 = time.perf_counter()
    try:
        for e in range(episodes):
            obs = sim.reset(seed=seed + e)
            instruction = obs["instruction"]
            expert.reset()
            ok = False
            for t in range(cfg.max_steps):
                a = expert.act(expert_view(sim))
                images.append(obs["images"][cfg.camera])
                actions.append(a.astype(np.float32))
                ep_idx.append(e)
                steps.append(t)
                executed = a.copy()
                executed[:3] = np.clip(executed[:3] + rng.normal(0.0, noise, 3), -1, 1)
                obs, _, term, trunc, _ = sim.step(executed)
                if term:
                    ok = True
                    break
                if trunc:
                    break
            success.append(ok)
            if progress:
                print(f"demo {e + 1}/{episodes}: {'success' if ok else 'fail'} after {t + 1} steps, "
                      f"{len(images)} frames, {time.perf_counter() - t0:.0f}s", flush=True)
    finally:
        sim.close()
    return frames_dict(images, actions, ep_idx, steps, success, instruction)


def frames_dict(images, actions, episode, step, success, instruction: str) -> dict:
    """The recorded lists as the arrays of frames.npz: images [N, H, W, 3] uint8, actions [N, 7], episode [N],
    step [N], success [E], instruction."""
    return {"images": np.stack(images), "actions": np.stack(actions), "episode": np.asarray(episode),
            "step": np.asarray(step), "success": np.asarray(success), "instruction": np.asarray(instruction)}


@functools.lru_cache(maxsize=2)
def load_frames(path: str) -> dict:
    """Decompressed frames, loaded once per process (sft.py makes a fresh env every step)."""
    with np.load(path) as data:
        return {k: data[k] for k in ("images", "actions", "instruction")}


class FramesEnv:
    """Serves recorded frames as one-turn observations for behaviour cloning (no simulator).

    ``reset(seed)`` returns frame ``seed % N`` after a fixed permutation, so consecutive seeds draw
    frames spread over all demos.
    """

    def __init__(self, cfg: Config):
        from vlrl.config import resolve_path

        self.cfg = cfg
        data = load_frames(resolve_path(cfg.demo_path))
        self.images, self.actions = data["images"], data["actions"]
        self.instruction = str(data["instruction"])
        if self.images.shape[1:3] != (cfg.image_size, cfg.image_size):
            raise ValueError(f"invalid config value for 'task.image_size': {cfg.demo_path} holds "
                             f"{self.images.shape[2]}x{self.images.shape[1]} frames, the task renders {cfg.image_size}")
        self.order = np.random.default_rng(0).permutation(len(self.images))

    def reset(self, seed: int) -> Observation:
        i = int(self.order[seed % len(self.order)])
        return observation(self.cfg, self.images[i], self.instruction,
                           {"frame": i, "expert_action": [float(v) for v in self.actions[i]]})

    def step(self, response_text: str) -> StepResult:
        raise RuntimeError("FramesEnv serves recorded frames for behaviour cloning; it cannot be stepped "
                           "(RL and evaluation use the simulator: leave task.demo_path unset)")


def _collect_part(args) -> dict:
    cfg, episodes, noise, seed = args
    return collect(cfg, episodes, noise, seed)


def collect_parallel(cfg: Config, episodes: int, noise: float, seed: int = 0, workers: int = 1) -> dict:
    """`collect` split over `workers` processes (consecutive seed ranges), concatenated in seed order."""
    if workers <= 1:
        return collect(cfg, episodes, noise, seed)
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    sizes = [episodes // workers + (i < episodes % workers) for i in range(workers)]
    starts = [seed + sum(sizes[:i]) for i in range(workers)]
    with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
        parts = list(pool.map(_collect_part, [(cfg, n, noise, s) for n, s in zip(sizes, starts)]))
    offsets = [sum(sizes[:i]) for i in range(workers)]
    out = {k: np.concatenate([p[k] for p in parts]) for k in ("images", "actions", "step", "success")}
    out["episode"] = np.concatenate([p["episode"] + off for p, off in zip(parts, offsets)])
    out["instruction"] = parts[0]["instruction"]
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="record noisy-expert frames for behaviour cloning")
    p.add_argument("--env", default="Lift")
    p.add_argument("--episodes", type=int, default=150)
    p.add_argument("--noise", type=float, default=0.3, help="std of the translation noise (action units)")
    p.add_argument("--image-size", type=int, default=112)
    p.add_argument("--max-steps", type=int, default=120)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--camera", default="agentview", help="robosuite camera (e.g. robot0_eye_in_hand: the wrist view)")
    p.add_argument("--workers", type=int, default=1, help="processes collecting in parallel")
    p.add_argument("--out", required=True, help="output directory")
    a = p.parse_args(argv)
    cfg = Config(env=a.env, image_size=a.image_size, max_steps=a.max_steps, camera=a.camera)
    t0 = time.perf_counter()
    data = collect_parallel(cfg, a.episodes, a.noise, a.seed, a.workers)
    write_demos(a.out, data, "python -m tasks.robot_manipulation.demos " + " ".join(sys.argv[1:] if argv is None else argv),
                {"episodes": a.episodes, "noise": a.noise, "image_size": a.image_size, "camera": a.camera}, t0)


def write_demos(out: str, data: dict, command: str, meta: dict, t0: float) -> dict:
    """OUT/frames.npz (what FramesEnv serves), OUT/action_stats.json (q01/q99 of the clean expert actions: the
    policy's task.stats_path) and OUT/DEMOS.json (the command, counts, expert success rate, wall time)."""
    os.makedirs(out, exist_ok=True)
    np.savez_compressed(os.path.join(out, "frames.npz"), **data)
    ActionStats.from_actions(data["actions"]).save(out)
    meta = {"command": command, "frames": len(data["actions"]), **meta,
            "expert_success_rate": float(data["success"].mean()), "seconds": round(time.perf_counter() - t0, 1)}
    with open(os.path.join(out, "DEMOS.json"), "w") as f:
        json.dump(meta, f, indent=2)
    print(json.dumps(meta))
    return meta


if __name__ == "__main__":
    main()
