"""Noisy-expert behaviour-cloning frames for one LIBERO task, seen exactly as the policy sees it.

    python -m tasks.libero.demos --suite libero_object --task-id 1 --episodes 100 --noise 0.3 \
        --camera agentview --image-size 112 --out runs/libero_object1_demos
    # -> OUT/frames.npz, OUT/action_stats.json, OUT/DEMOS.json (as tasks/robot_manipulation/demos.py)

Episode e starts from the train split's fresh placement of seed `--seed + e` (tasks/libero/env.py: never one of
the shipped init states that the official evaluation uses) after the protocol's no-op wait steps. The scripted
expert (robots/experts.py, SPECS["<suite>/<task id>"]) acts; the simulator executes its action plus N(0, noise) on
the translation while each frame is labelled with the clean expert action (DART, as for robosuite Lift). Frames come
from tasks.libero's own observation (render size, resize, flip, lower-cased instruction), so behaviour cloning on
them (vlrl/sft.py task=robot_manipulation task.demo_path=OUT/frames.npz: the same OpenVLA prompt and action tokens)
trains on what `vlrl/evaluate.py task=libero` shows the policy.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from tasks.robot_manipulation.demos import frames_dict, write_demos

from . import Config, make_env
from .env import max_steps


def expert_spec(cfg: Config):
    from robots.experts import SPECS

    key = f"{cfg.suite}/{cfg.task_ids[0]}"
    if key not in SPECS:
        have = sorted(k for k in SPECS if "/" in k)
        raise ValueError(f"no scripted expert for LIBERO task {key!r}; robots/experts.py SPECS has {have}")
    return SPECS[key]


def collect(cfg: Config, episodes: int, noise: float, seed: int = 0, progress: bool = True) -> dict:
    """Roll out the expert on `episodes` train-split placements (seeds seed..seed+episodes-1) of the single task
    in cfg.task_ids. Returns images [N, H, W, 3] uint8, actions [N, 7] (clean labels), episode [N], step [N],
    success [E] and the instruction, the arrays tasks/robot_manipulation/demos.py writes."""
    from robots.experts import PickPlaceExpert, expert_view

    if len(cfg.task_ids) != 1:
        raise ValueError(f"invalid config value for 'task.task_ids': {list(cfg.task_ids)}: demos are for one task")
    expert = PickPlaceExpert(expert_spec(cfg))
    rng = np.random.default_rng(seed)
    env = make_env(cfg, "train")
    images, actions, ep_idx, steps, success = [], [], [], [], []
    instruction, t0 = "", time.perf_counter()
    try:
        for e in range(episodes):
            obs = env.reset(seed + e)
            instruction = obs.info["instruction"]
            expert.reset()
            ok, t = False, 0
            for t in range(max_steps(cfg)):
                a = expert.act(expert_view(env._sim)).astype(np.float32)
                images.append(np.asarray(obs.images[0], dtype=np.uint8))
                actions.append(a)
                ep_idx.append(e)
                steps.append(t)
                executed = a.astype(np.float64)
                executed[:3] = np.clip(executed[:3] + rng.normal(0.0, noise, 3), -1, 1)
                res = env._act(executed)
                if res.done or res.truncated:
                    ok = bool(res.done)
                    break
                obs = res.observation
            success.append(ok)
            if progress:
                print(f"LIBERO demo {e + 1}/{episodes} (placement {seed + e}): {'success' if ok else 'fail'} after "
                      f"{t + 1} steps, {len(images)} frames, {time.perf_counter() - t0:.0f}s", flush=True)
    finally:
        env.close()
    return frames_dict(images, actions, ep_idx, steps, success, instruction)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description="record noisy-expert LIBERO frames for behaviour cloning")
    p.add_argument("--suite", default="libero_object")
    p.add_argument("--task-id", type=int, default=1)
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--noise", type=float, default=0.3, help="std of the translation noise (action units)")
    p.add_argument("--camera", default="agentview", help="agentview | robot0_eye_in_hand")
    p.add_argument("--render-size", type=int, default=256, help="LIBERO render resolution (the protocol's 256)")
    p.add_argument("--image-size", type=int, default=112, help="the policy's image (task.image_size)")
    p.add_argument("--flip", default="rot180", help="task.flip of the evaluation the policy will run under")
    p.add_argument("--max-steps", type=int, default=None, help="policy steps per episode; default the suite's limit")
    p.add_argument("--seed", type=int, default=0, help="first train-split placement")
    p.add_argument("--out", required=True, help="output directory")
    argv = sys.argv[1:] if argv is None else argv
    a = p.parse_args(argv)
    cfg = Config(suite=a.suite, task_ids=[a.task_id], camera=a.camera, render_size=a.render_size,
                 image_size=a.image_size, flip=a.flip, max_steps=a.max_steps)
    expert_spec(cfg)  # refused before any simulator is built
    t0 = time.perf_counter()
    data = collect(cfg, a.episodes, a.noise, a.seed)
    return write_demos(a.out, data, "python -m tasks.libero.demos " + " ".join(argv),
                       {"episodes": a.episodes, "noise": a.noise, "suite": a.suite, "task_id": a.task_id,
                        "camera": a.camera, "render_size": a.render_size, "image_size": a.image_size, "flip": a.flip,
                        "first_seed": a.seed, "split": "train (fresh placements)"}, t0)


if __name__ == "__main__":
    main()
