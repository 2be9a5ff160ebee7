"""LIBERO evaluation protocol as published by OpenVLA / VLA-RL.

For each task of a suite: the package's fixed init states in order (trial k uses init state k), 10 no-op
warm-up steps (zero deltas, gripper open = -1) that do not count, then at most the suite's step limit
(spatial 220, object 280, goal 300, libero_10 520, libero_90 400); success = the env's success predicate.
Reports per-task and per-suite success rates as JSON and can save MP4s of rollouts.

Policy interface: policy(obs_batch) -> actions [N, 7], where obs_batch is the batched observation of the
N parallel envs of one task (robots.vec_env.stack_obs); rows of envs not running a trial are ignored.

    python -m robots.libero_eval --suites libero_spatial --trials 2 --tasks 0 1 --policy random --out report.json
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from robots.env import make_env
from robots.libero_env import SUITE_MAX_STEPS, LiberoConfig, list_tasks
from robots.vec_env import VecEnv, VecEnvConfig

Policy = Callable[[dict], np.ndarray]
NOOP_ACTION = np.array([0, 0, 0, 0, 0, 0, -1.0])  # OpenVLA's warm-up action: stay, gripper open


@dataclass
class LiberoEvalConfig:
    """What to evaluate and how."""

    suites: tuple[str, ...] = ("libero_spatial",)
    """Suites to evaluate."""
    task_ids: tuple[int, ...] | None = None
    """Tasks per suite (None = all)."""
    num_trials: int = 50
    """Trials per task; trial k starts from fixed init state k."""
    num_warmup_steps: int = 10
    """No-op steps after each reset (objects settle); not counted in the step limit."""
    max_steps: dict = field(default_factory=dict)
    """Per-suite step limit overrides (default SUITE_MAX_STEPS)."""
    num_envs: int = 1
    """Parallel env workers per task."""
    image_size: int = 256
    """Camera resolution (OpenVLA renders 256x256)."""
    cameras: tuple[str, ...] = ("agentview", "robot0_eye_in_hand")
    """Cameras given to the policy."""
    flip: str = "vertical"
    """Image orientation (rot180 reproduces what OpenVLA's LIBERO checkpoints were trained on)."""
    seed: int = 7
    """Seed passed to every reset (OpenVLA's default); the init state fixes the scene."""
    video_dir: str | None = None
    """Folder for MP4s of rollouts (None = no videos)."""
    videos_per_task: int = 1
    """How many trials per task to save as video (the first ones)."""
    step_timeout_s: float = 60.0
    """A worker silent this long is restarted and its trial counted as failed."""


def random_policy(seed: int = 0) -> Policy:
    """Uniform random actions in [-1, 1] (a floor for success rates)."""
    rng = np.random.default_rng(seed)
    return lambda obs: rng.uniform(-1, 1, size=(len(obs["instruction"]), 7))


def _run_chunk(venv: VecEnv, policy: Policy, trials: list[int], cfg: LiberoEvalConfig, max_steps: int,
               video: set[int]) -> list[dict]:
    n = venv.num_envs
    active = [i < len(trials) for i in range(n)]
    init = [trials[i] if active[i] else trials[0] for i in range(n)]  # idle envs still need a state
    obs = venv.reset(seeds=[cfg.seed] * n, init_states=init)
    results = [{"init_state": trials[i], "success": False, "steps": 0, "worker_failed": False} for i in range(len(trials))]
    frames: dict[int, list] = {i: [] for i in range(len(trials)) if trials[i] in video}
    cam = cfg.cameras[0]
    for t in range(cfg.num_warmup_steps + max_steps):
        if not any(active):
            break
        if t < cfg.num_warmup_steps:
            actions = np.tile(NOOP_ACTION, (n, 1))
        else:
            actions = np.asarray(policy(obs), dtype=np.float64).reshape(n, 7)
        obs, _, term, trunc, infos = venv.step(actions, active=active)
        for i in range(len(trials)):
            if not active[i]:
                continue
            if i in frames:
                frames[i].append(obs["images"][cam][i])
            r = results[i]
            r["steps"] = max(t + 1 - cfg.num_warmup_steps, 0)
            if infos[i].get("worker_failed"):
                r["worker_failed"], active[i] = True, False
            elif term[i] or infos[i].get("success"):
                r["success"], active[i] = True, False
            elif trunc[i] or t + 1 >= cfg.num_warmup_steps + max_steps:
                active[i] = False
    for i, fr in frames.items():
        results[i]["frames"] = fr
    return results


def evaluate_task(policy: Policy, suite: str, task_id: int, cfg: LiberoEvalConfig) -> dict:
    """Run cfg.num_trials trials of one task; returns the task's report entry."""
    from robots.video import write_mp4  # noqa: PLC0415

    max_steps = cfg.max_steps.get(suite, SUITE_MAX_STEPS[suite])
    name, language = list_tasks(suite)[task_id]
    env_cfg = LiberoConfig(suite=suite, task_id=task_id, cameras=cfg.cameras, image_size=cfg.image_size,
                           flip=cfg.flip, max_steps=max_steps + cfg.num_warmup_steps + 1)
    n = max(1, min(cfg.num_envs, cfg.num_trials))
    vcfg = VecEnvConfig(seed=cfg.seed, step_timeout_s=cfg.step_timeout_s, auto_reset=False)
    video = set(range(cfg.videos_per_task)) if cfg.video_dir else set()
    trials: list[dict] = []
    t0 = time.perf_counter()
    with VecEnv([functools.partial(make_env, env_cfg)] * n, vcfg) as venv:
        for start in range(0, cfg.num_trials, n):
            chunk = list(range(start, min(start + n, cfg.num_trials)))
            trials += _run_chunk(venv, policy, chunk, cfg, max_steps, video)
    for tr in trials:
        fr = tr.pop("frames", None)
        if fr:
            tag = "success" if tr["success"] else "failure"
            path = Path(cfg.video_dir) / suite / f"task{task_id:02d}_trial{tr['init_state']:02d}_{tag}.mp4"
            tr["video"] = str(write_mp4(path, fr))
    successes = sum(t["success"] for t in trials)
    return {"task_id": task_id, "name": name, "instruction": language, "trials": len(trials),
            "successes": successes, "success_rate": successes / max(len(trials), 1),
            "worker_failures": sum(t["worker_failed"] for t in trials), "max_steps": max_steps,
            "elapsed_s": time.perf_counter() - t0, "episodes": trials}


def evaluate(policy: Policy, cfg: LiberoEvalConfig, out_json: str | None = None) -> dict:
    """Evaluate every configured suite/task; returns (and optionally writes) the JSON report."""
    report: dict = {"protocol": "openvla-libero", "config": asdict(cfg), "suites": {}}
    t0 = time.perf_counter()
    for suite in cfg.suites:
        ids = cfg.task_ids if cfg.task_ids is not None else range(len(list_tasks(suite)))
        tasks = [evaluate_task(policy, suite, int(i), cfg) for i in ids]
        total = sum(t["trials"] for t in tasks)
        report["suites"][suite] = {
            "success_rate": sum(t["successes"] for t in tasks) / max(total, 1),
            "trials": total, "tasks": tasks,
        }
    report["elapsed_s"] = time.perf_counter() - t0
    if out_json:
        Path(out_json).parent.mkdir(parents=True, exist_ok=True)
        Path(out_json).write_text(json.dumps(report, indent=2))
    return report


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--suites", nargs="+", default=["libero_spatial"])
    p.add_argument("--tasks", nargs="*", type=int, default=None)
    p.add_argument("--trials", type=int, default=50)
    p.add_argument("--num-envs", type=int, default=1)
    p.add_argument("--image-size", type=int, default=256)
    p.add_argument("--policy", choices=["random", "noop"], default="random")
    p.add_argument("--video-dir", default=None)
    p.add_argument("--out", default="libero_eval.json")
    a = p.parse_args(argv)
    cfg = LiberoEvalConfig(suites=tuple(a.suites), task_ids=tuple(a.tasks) if a.tasks else None, num_trials=a.trials,
                           num_envs=a.num_envs, image_size=a.image_size, video_dir=a.video_dir)
    policy = random_policy() if a.policy == "random" else (lambda obs: np.tile(NOOP_ACTION, (len(obs["instruction"]), 1)))
    report = evaluate(policy, cfg, a.out)
    for suite, r in report["suites"].items():
        print(f"{suite}: success {r['success_rate']:.3f} over {r['trials']} trials")
    return report


if __name__ == "__main__":
    main()
