"""Memory stability: RSS over 1,000 tiny GRPO steps of the real training loop (`vlrl.train.run`).

    .venv/bin/python bench/memory_stability.py             # ~5 min on 2 CPU cores
    .venv/bin/python bench/memory_stability.py --trl 0     # vlrl only, ~3 min

Tiny settings so 1,000 steps fit in minutes: one 56x56 image prompt per step, G = 4, 8-token
completions, the full loop with its defaults (metrics.jsonl every step, sample tables every 10
steps, a checkpoint every 100 steps), one thread. RSS is read at the start of every step; a
least-squares line is fitted to the steps after `--warmup` and its slope reported in MB per 100
steps (target < 1). The TRL baseline runs in its own process (the same task,
reward and sizes through GRPOTrainer; RSS read at every step end; 300 steps by default, as TRL's
step is slower) so each slope is its stack's own.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402


def fit(steps: list[int], rss: list[float], warmup: int) -> dict:
    import numpy as np

    x = np.array([s for s in steps if s >= warmup], dtype=float)
    y = np.array([r for s, r in zip(steps, rss) if s >= warmup], dtype=float)
    if len(x) < 2:
        return {"slope_mb_per_100_steps": float("nan")}
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - (slope * x + intercept)
    # Standard error of the slope: is the trend distinguishable from noise?
    se = float(np.sqrt((resid**2).sum() / max(1, len(x) - 2) / ((x - x.mean()) ** 2).sum()))
    return {
        "slope_mb_per_100_steps": float(slope * 100),
        "slope_se_mb_per_100_steps": se * 100,
        "rss_at_warmup_mb": float(y[0]),
        "rss_end_mb": float(y[-1]),
        "rss_min_after_warmup_mb": float(y.min()),
        "rss_max_after_warmup_mb": float(y.max()),
    }


def run_vlrl(steps: int, size: int, group: int, tokens: int, save_every: int = 100, samples_every: int = 10) -> dict:
    import square_task

    from vlrl.config import AlgoConfig, Config, ModelConfig, RolloutConfig, TrainerConfig
    from vlrl.train import run

    samples: list[tuple[int, float, float]] = []
    inner = square_task.make_env
    t0 = time.perf_counter()

    def make_env(cfg, split):  # run_episodes calls it once per prompt: once per step here
        if split == "train":
            samples.append((len(samples), C.rss_mb(), time.perf_counter() - t0))
        return inner(cfg, split)

    square_task.make_env = make_env
    with tempfile.TemporaryDirectory() as out:
        cfg = Config(
            task=square_task.Config(size=size),
            model=ModelConfig(path=C.TINY),
            algo=AlgoConfig(group_size=group, loss_type="dapo"),
            rollout=RolloutConfig(max_new_tokens=tokens),
            trainer=TrainerConfig(steps=steps, prompts_per_step=1, lr=1e-5, output_dir=out, save_every=save_every,
                                  samples_every=samples_every, keep_checkpoints=2, progress=False, threads=1),
        )
        with contextlib.redirect_stdout(io.StringIO()):
            run(cfg, square_task)
    square_task.make_env = inner
    return {"steps": [s for s, _, _ in samples], "rss_mb": [r for _, r, _ in samples],
            "wall_s": time.perf_counter() - t0, "peak_rss_mb": C.peak_rss_mb()}


def run_trl(steps: int, size: int, group: int, tokens: int) -> dict:
    from transformers import TrainerCallback

    import trl_stack as T

    samples: list[float] = []

    class RSS(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            samples.append(C.rss_mb())

    t0 = time.perf_counter()
    tr = T.trainer(size, list(range(steps)), "dapo", max_steps=steps, callbacks=[RSS()], group=group,
                   max_completion_length=tokens, learning_rate=1e-5)
    tr.train()
    return {"steps": list(range(len(samples))), "rss_mb": samples, "wall_s": time.perf_counter() - t0,
            "peak_rss_mb": C.peak_rss_mb()}


def child(side: str, args) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", side, "--steps", str(args.trl if side == "trl" else args.steps),
           "--size", str(args.size), "--group", str(args.group), "--tokens", str(args.tokens),
           "--save-every", str(args.save_every), "--samples-every", str(args.samples_every)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode or not line:
        raise RuntimeError(f"{side} run failed:\n{p.stderr[-3000:]}")
    return json.loads(line[-1])


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=200, help="steps excluded from the fit")
    ap.add_argument("--size", type=int, default=56)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--trl", type=int, default=300, metavar="STEPS", help="TRL GRPOTrainer steps (0: skip the baseline)")
    ap.add_argument("--save-every", type=int, default=100, help="vlrl: checkpoint every N steps (0: only at the end)")
    ap.add_argument("--samples-every", type=int, default=10, help="vlrl: sample table every N steps (0: never)")
    ap.add_argument("--child", choices=["vlrl", "trl"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        if args.child == "vlrl":
            out = run_vlrl(args.steps, args.size, args.group, args.tokens, args.save_every, args.samples_every)
        else:
            out = run_trl(args.steps, args.size, args.group, args.tokens)
        print(json.dumps(out))
        return {}

    t_start = time.perf_counter()
    runs = {"vlrl": child("vlrl", args)}
    print(f"  vlrl: {len(runs['vlrl']['steps'])} steps in {runs['vlrl']['wall_s']:.0f}s", flush=True)
    if args.trl:
        runs["trl"] = child("trl", args)
        print(f"  TRL: {len(runs['trl']['steps'])} steps in {runs['trl']['wall_s']:.0f}s", flush=True)
    rows = []
    for side, r in runs.items():
        warm = min(args.warmup, len(r["steps"]) // 5)
        r["fit"] = fit(r["steps"], r["rss_mb"], warm)
        f = r["fit"]
        rows.append([side if side == "vlrl" else "TRL", len(r["steps"]), warm, round(f["rss_at_warmup_mb"], 1),
                     round(f["rss_end_mb"], 1), f"{f['slope_mb_per_100_steps']:+.3f} +- {f['slope_se_mb_per_100_steps']:.3f}",
                     round(r["peak_rss_mb"]), round(r["wall_s"] / len(r["steps"]), 3)])
        # keep the JSON small: every 10th sample
        r["steps"], r["rss_mb"] = r["steps"][::10], [round(x, 2) for x in r["rss_mb"][::10]]
    print()
    print(f"RSS over tiny GRPO steps ({args.size}x{args.size} image, G={args.group}, {args.tokens}-token completions, "
          "1 thread); slope fitted after warm-up")
    print(C.table(["stack", "steps", "warm-up", "RSS at warm-up MB", "RSS end MB", "slope MB/100 steps (+- 1 se)",
                   "peak RSS MB", "s/step"], rows))
    slope = runs["vlrl"]["fit"]["slope_mb_per_100_steps"]
    met = abs(slope) < 1.0
    print(f"target (vlrl |slope| < 1 MB per 100 steps): {'met' if met else 'MISSED'}")
    if "trl" in runs:
        print(f"slope ratio vlrl/TRL: {slope / runs['trl']['fit']['slope_mb_per_100_steps']:.2f}")
    path = C.write_result("memory_stability", {"args": vars(args), "runs": runs, "target_met": met,
                                               "wall_s": time.perf_counter() - t_start})
    print(f"wrote {path} ({time.perf_counter() - t_start:.0f}s)")
    return runs


if __name__ == "__main__":
    main()
