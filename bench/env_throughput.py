"""Env throughput: steps/s of one env and of N vectorized envs (with / without cameras), build times.

    .venv/bin/python bench/env_throughput.py --out bench/env_throughput.json            # robosuite Lift
    .venv/bin/python bench/env_throughput.py --libero --ns 1 2 --out bench/libero_throughput.json

Every number comes from the same run; "ratio" = vec steps/s divided by (N x the single-env steps/s
measured in-process just before), so 1.0 would be perfect scaling. On a machine with C cores, expect
the ratio to fall once N > C. Random actions; auto-reset on.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from robots.env import RobosuiteConfig, make_env  # noqa: E402
from robots.vec_env import VecEnv, VecEnvConfig  # noqa: E402


def _env_cfg(args, cameras: bool):
    cams = ("agentview", "robot0_eye_in_hand") if cameras else ()
    if args.libero:
        from robots.libero_env import LiberoConfig  # noqa: PLC0415

        return LiberoConfig(suite=args.suite, task_id=0, cameras=cams, image_size=args.image_size, hard_reset=False,
                            max_steps=args.episode_len)
    return RobosuiteConfig(task=args.task, cameras=cams, image_size=args.image_size, max_steps=args.episode_len)


def bench_single(cfg, steps: int) -> dict:
    t0 = time.perf_counter()
    env = make_env(cfg)
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    env.reset(seed=0)
    reset = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    for _ in range(5):  # warm-up (first renders allocate buffers)
        env.step(rng.uniform(-1, 1, 7))
    t0 = time.perf_counter()
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(rng.uniform(-1, 1, 7))
        if term or trunc:
            env.reset()
    dt = time.perf_counter() - t0
    env.close()
    return {"build_s": build, "reset_s": reset, "steps": steps, "steps_per_s": steps / dt}


def bench_vec(cfg, n: int, steps: int, worker_threads: int = 1) -> dict:
    t0 = time.perf_counter()
    venv = VecEnv([functools.partial(make_env, cfg)] * n,
                  VecEnvConfig(seed=0, step_timeout_s=120, worker_threads=worker_threads))
    venv.reset()
    build = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    for _ in range(3):
        venv.step(rng.uniform(-1, 1, (n, 7)))
    t0 = time.perf_counter()
    for _ in range(steps):
        venv.step(rng.uniform(-1, 1, (n, 7)))
    dt = time.perf_counter() - t0
    venv.close()
    return {"n": n, "build_and_reset_s": build, "batch_steps": steps, "env_steps_per_s": n * steps / dt}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="Lift")
    p.add_argument("--libero", action="store_true", help="benchmark a LIBERO task instead of robosuite")
    p.add_argument("--suite", default="libero_spatial")
    p.add_argument("--ns", nargs="+", type=int, default=[1, 2, 4])
    p.add_argument("--image-size", type=int, default=128)
    p.add_argument("--episode-len", type=int, default=200)
    p.add_argument("--steps", type=int, default=300, help="steps per measurement without cameras")
    p.add_argument("--cam-steps", type=int, default=60, help="steps per measurement with cameras")
    p.add_argument("--worker-threads", type=int, default=1, help="OpenMP/BLAS threads per worker (0 = library default)")
    p.add_argument("--out", default="bench/env_throughput.json")
    args = p.parse_args(argv)

    rows, report = [], {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                                    "mujoco_gl": os.environ.get("MUJOCO_GL")}, "args": vars(args), "results": []}
    for cameras in (False, True):
        cfg = _env_cfg(args, cameras)
        steps = args.cam_steps if cameras else args.steps
        single = bench_single(cfg, steps)
        entry = {"cameras": cameras, "env": dataclasses.asdict(cfg), "single": single, "vec": []}
        rows.append((cameras, "single", 1, single["steps_per_s"], 1.0, single["build_s"]))
        for n in args.ns:
            v = bench_vec(cfg, n, max(steps // n, 10), args.worker_threads)
            v["ratio_vs_n_x_single"] = v["env_steps_per_s"] / (n * single["steps_per_s"])
            entry["vec"].append(v)
            rows.append((cameras, "vec", n, v["env_steps_per_s"], v["ratio_vs_n_x_single"], v["build_and_reset_s"]))
        report["results"].append(entry)

    name = f"LIBERO {args.suite} task 0" if args.libero else f"robosuite {args.task}"
    print(f"{name}, {args.image_size}px cameras (agentview + wrist) where on, {os.cpu_count()} CPUs")
    print(f"{'cameras':>8} {'mode':>6} {'N':>3} {'env steps/s':>12} {'ratio':>6} {'build s':>8}")
    for cams, mode, n, sps, ratio, build in rows:
        print(f"{str(cams):>8} {mode:>6} {n:>3} {sps:12.1f} {ratio:6.2f} {build:8.1f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2, default=str))
    return report


if __name__ == "__main__":
    main()
