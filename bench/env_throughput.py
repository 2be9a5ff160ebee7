"""Env throughput: steps/s of one env and of N vectorized envs (with / without cameras), build times.

    .venv/bin/python bench/env_throughput.py --out bench/env_throughput.json            # robosuite Lift
    .venv/bin/python bench/env_throughput.py --libero --ns 1 2 --out bench/libero_throughput.json

Every number comes from the same run; "ratio" = vec steps/s divided by (N x the single-env steps/s
measured in-process in the same round), so 1.0 would be perfect scaling. Three modes per N: `workers`
(one worker process per env, the default VecEnv), `inline` (VecEnvConfig.inline_last: the caller steps
the last env itself, N processes instead of N + 1) and `free` (N independent processes stepping their
own env with no lockstep and no pipes: this machine's ceiling, which no vectorizer can beat). On a
machine with C cores, expect the ratio to fall once N > C. Random actions; auto-reset on.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import multiprocessing as mp
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


def _free_run(cfg, steps: int, barrier, out) -> None:
    """One process stepping its own env with no lockstep: build, warm up, wait for the others, time `steps`."""
    env = make_env(cfg)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(5):
        env.step(rng.uniform(-1, 1, 7))
    barrier.wait()
    t0 = time.perf_counter()
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(rng.uniform(-1, 1, 7))
        if term or trunc:
            env.reset()
    out.put(time.perf_counter() - t0)


def bench_free(cfg, n: int, steps: int) -> dict:
    """The machine's ceiling for this env: n processes each stepping their own env, no lockstep, no pipes.
    Aggregate steps/s = n * steps / (slowest process's time), i.e. what a perfect vectorizer could reach."""
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(n + 1), ctx.Queue()
    procs = [ctx.Process(target=_free_run, args=(cfg, steps, barrier, out)) for _ in range(n)]
    for p in procs:
        p.start()
    barrier.wait(timeout=600)  # every env built and warmed up: all start stepping together
    times = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    return {"n": n, "steps_each": steps, "env_steps_per_s": n * steps / max(times), "slowest_s": max(times),
            "fastest_s": min(times)}


def bench_vec(cfg, n: int, steps: int, worker_threads: int = 1, inline: bool = False) -> dict:
    t0 = time.perf_counter()
    venv = VecEnv([functools.partial(make_env, cfg)] * n,
                  VecEnvConfig(seed=0, step_timeout_s=120, worker_threads=worker_threads, inline_last=inline))
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
    p.add_argument("--repeats", type=int, default=3, help="interleaved rounds without cameras (medians reported)")
    p.add_argument("--cam-repeats", type=int, default=1, help="interleaved rounds with cameras")
    p.add_argument("--no-cameras-only", action="store_true")
    p.add_argument("--worker-threads", type=int, default=1, help="OpenMP/BLAS threads per worker (0 = library default)")
    p.add_argument("--out", default="bench/env_throughput.json")
    args = p.parse_args(argv)

    cpus = os.cpu_count() or 1
    rows, report = [], {"machine": {"cpus": cpus, "platform": platform.platform(),
                                    "mujoco_gl": os.environ.get("MUJOCO_GL")}, "args": vars(args), "results": []}
    # Modes per N: "workers" (one worker process per env), "inline" (the last env stepped by the caller,
    # VecEnvConfig.inline_last), "free" (N independent processes, no lockstep: the machine's ceiling).
    for cameras in ((False,) if args.no_cameras_only else (False, True)):
        cfg = _env_cfg(args, cameras)
        steps = args.cam_steps if cameras else args.steps
        rounds = []
        for _ in range(args.cam_repeats if cameras else args.repeats):
            # Each round measures single and every mode back to back, so a ratio compares neighbours in time.
            single = bench_single(cfg, steps)
            rnd = {"single": single, "modes": []}
            for n in args.ns:
                k = max(steps // n, 10)
                modes = {"workers": bench_vec(cfg, n, k, args.worker_threads),
                         "inline": bench_vec(cfg, n, k, args.worker_threads, inline=True)}
                if n <= cpus:
                    modes["free"] = bench_free(cfg, n, k)
                for mode, v in modes.items():
                    v.update(mode=mode, n=n, ratio_vs_n_x_single=v["env_steps_per_s"] / (n * single["steps_per_s"]))
                    rnd["modes"].append(v)
            rounds.append(rnd)
        med = lambda xs: float(np.median(xs))  # noqa: E731
        entry = {"cameras": cameras, "env": dataclasses.asdict(cfg), "rounds": rounds, "median": []}
        rows.append((cameras, "single", 1, med([r["single"]["steps_per_s"] for r in rounds]), 1.0, [1.0]))
        for n in args.ns:
            for mode in ("workers", "inline", "free"):
                got = [v for r in rounds for v in r["modes"] if v["n"] == n and v["mode"] == mode]
                if not got:
                    continue
                ratios = [v["ratio_vs_n_x_single"] for v in got]
                m = {"n": n, "mode": mode, "env_steps_per_s": med([v["env_steps_per_s"] for v in got]),
                     "ratio_vs_n_x_single": med(ratios), "ratios": ratios}
                entry["median"].append(m)
                rows.append((cameras, mode, n, m["env_steps_per_s"], m["ratio_vs_n_x_single"], ratios))
        report["results"].append(entry)

    name = f"LIBERO {args.suite} task 0" if args.libero else f"robosuite {args.task}"
    print(f"{name}, {args.image_size}px cameras (agentview + wrist) where on, {cpus} CPUs; "
          f"medians over interleaved rounds (ratio = steps/s / (N x single steps/s of the same round))")
    print(f"{'cameras':>8} {'mode':>8} {'N':>3} {'env steps/s':>12} {'ratio':>6}  per-round ratios")
    for cams, mode, n, sps, ratio, ratios in rows:
        print(f"{str(cams):>8} {mode:>8} {n:>3} {sps:12.1f} {ratio:6.2f}  {' '.join(f'{r:.2f}' for r in ratios)}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2, default=str))
    return report


if __name__ == "__main__":
    main()
