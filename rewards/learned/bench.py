"""Reward-model cost per env step vs the env step itself (live robosuite loop with the scripted expert).

    python -m rewards.learned.bench --progress runs/rewards/progress/checkpoints/step_XXXXXXX \\
        --prm runs/rewards/prm/checkpoints/step_XXXXXXX --clip tiny-clip --steps 60

For each reward model the expert runs one episode; after every env step the model scores the growing
episode (`last_rewards`, the per-step entry point: the LRU cache means only the newest frame / pair is
computed). Reported: env step ms, reward ms per step with the cache, the same with the cache cleared
before every call (what a naive per-step call costs: the whole episode each time), and the
episode-end batch cost per step (one call on the finished episode).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def bench_batched(name, rm, episodes, instruction) -> dict:
    """Per-step calls with one query per env (N envs stepping together): ms per step per env."""
    from rewards.learned.base import Query  # noqa: PLC0415

    for c in ("cache", "image_cache"):
        if hasattr(rm, c):
            getattr(rm, c).clear()
    ts = []
    for t in range(1, min(len(e) for e in episodes)):
        t0 = time.perf_counter()
        rm.last_rewards([Query(e[: t + 1], instruction) for e in episodes])
        ts.append(time.perf_counter() - t0)
    out = {"envs": len(episodes), "per_step_all_envs_ms": 1000 * float(np.mean(ts)),
           "per_step_per_env_ms": 1000 * float(np.mean(ts)) / len(episodes)}
    print(f"[bench] {name} batched: " + json.dumps({k: round(v, 2) for k, v in out.items()}), flush=True)
    return out


def bench_model(name, rm, frames_live, env_ms, instruction, uncached: bool = True):
    out = {}
    # per step, with the cache
    rm_cache = getattr(rm, "cache", None)
    if rm_cache is not None:
        rm_cache.clear()
    for c in ("image_cache",):
        if hasattr(rm, c):
            getattr(rm, c).clear()
    from rewards.learned.base import Query  # noqa: PLC0415

    ts = []
    for t in range(1, len(frames_live)):
        t0 = time.perf_counter()
        rm.last_rewards([Query(frames_live[: t + 1], instruction)])
        ts.append(time.perf_counter() - t0)
    out["per_step_cached_ms"] = 1000 * float(np.mean(ts))
    # per step, cache cleared before every call (naive)
    ts = []
    for t in range(1, len(frames_live) if uncached else 1):
        for c in ("cache", "image_cache"):
            if hasattr(rm, c):
                getattr(rm, c).clear()
        t0 = time.perf_counter()
        rm.last_rewards([Query(frames_live[: t + 1], instruction)])
        ts.append(time.perf_counter() - t0)
    if ts:
        out["per_step_uncached_ms"] = 1000 * float(np.mean(ts))
    # episode end, one batched call
    for c in ("cache", "image_cache"):
        if hasattr(rm, c):
            getattr(rm, c).clear()
    t0 = time.perf_counter()
    rm([Query(frames_live, instruction)])
    out["episode_end_ms_per_step"] = 1000 * (time.perf_counter() - t0) / (len(frames_live) - 1)
    out["env_step_ms"] = env_ms
    out["cached_over_env"] = out["per_step_cached_ms"] / env_ms
    print(f"[bench] {name}: " + json.dumps({k: round(v, 2) for k, v in out.items()}), flush=True)
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", default="Lift")
    ap.add_argument("--image-size", type=int, default=84)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--seed", type=int, default=100)
    ap.add_argument("--progress", default=None, help="progress model checkpoint dir")
    ap.add_argument("--prm", default=None, help="PRM checkpoint dir")
    ap.add_argument("--clip", default="tiny-clip", help="open_clip model name ('' to skip)")
    ap.add_argument("--envs", type=int, default=1, help="also time per-step calls batched over this many envs' episodes")
    ap.add_argument("--skip-uncached", action="store_true", help="skip the (slow, O(T^2)) no-cache measurement")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    import torch  # noqa: PLC0415

    torch.set_num_threads(1)
    # Reward models first: importing torchvision (open_clip) after MuJoCo's EGL context exists segfaults here.
    models = {}
    if a.clip:
        from rewards.learned.clip_reward import ClipReward  # noqa: PLC0415

        models[f"clip:{a.clip}"] = ClipReward(a.clip)
    if a.progress:
        from rewards.learned.progress_model import ProgressReward  # noqa: PLC0415

        models["progress"] = ProgressReward.load(a.progress)
    if a.prm:
        from rewards.learned.prm import PRMReward  # noqa: PLC0415

        models["prm"] = PRMReward.load(a.prm)

    from robots.env import RobosuiteConfig, make_env  # noqa: PLC0415
    from robots.experts import SPECS, PickPlaceExpert, expert_view  # noqa: PLC0415

    env = make_env(RobosuiteConfig(task=a.task, cameras=("agentview",), image_size=a.image_size, max_steps=a.steps + 10))
    expert = PickPlaceExpert(SPECS[a.task])
    obs = env.reset(seed=a.seed)
    expert.reset()
    frames, step_s = [obs["images"]["agentview"]], []
    for _ in range(a.steps):
        act = expert.act(expert_view(env))
        t0 = time.perf_counter()
        obs, *_ = env.step(act)
        step_s.append(time.perf_counter() - t0)
        frames.append(obs["images"]["agentview"])
    more = []
    for k in range(1, a.envs):
        obs = env.reset(seed=a.seed + k)
        expert.reset()
        fr = [obs["images"]["agentview"]]
        for _ in range(a.steps):
            obs, *_ = env.step(expert.act(expert_view(env)))
            fr.append(obs["images"]["agentview"])
        more.append(fr)
    env.close()
    env_ms = 1000 * float(np.mean(step_s))
    print(f"[bench] env step ({a.task}, {a.image_size}px agentview): {env_ms:.1f} ms", flush=True)
    instr = env.instruction
    res = {"env_step_ms": env_ms, "steps": a.steps, "models": {}}
    for name, rm in models.items():
        res["models"][name] = bench_model(name, rm, frames, env_ms, instr, not a.skip_uncached)
        if more:
            res["models"][name]["batched"] = bench_batched(name, rm, [frames] + more, instr)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"args": vars(a), **res}, f, indent=1)
    return res


if __name__ == "__main__":
    main()
