"""Measured VLA-RL on a real robosuite task: evaluate the start -> RL for a time budget -> evaluate.

    python -m tasks.robot_manipulation.experiment --out runs/lift_ppo  --eval 50 [Hydra overrides...]
    python -m tasks.robot_manipulation.experiment --task libero --out runs/libero_rl --eval 50 \
        task.suite=libero_object task.task_ids=[1] [Hydra overrides...]   # LIBERO: official trials, train placements
    python -m tasks.robot_manipulation.experiment --method sft --out runs/lift_bc --eval 50 trainer=sft_tiny \
        task.demo_path=DEMOS/frames.npz [Hydra overrides...]      # the supervised control: BC (vlrl/sft.py) instead

Both evaluations are greedy, on the same held-out initial states (the eval split's robosuite seeds,
disjoint from training), so the paired difference per init state measures what RL changed. With `--task libero`
the evaluations are the official protocol's trials (the shipped init states in order) and RL trains on the train
split's fresh placements (tasks/libero/env.py); the summary also holds both reports' per-task tables. Writes
`summary.json`: success rates with binomial standard errors, the paired gain and its standard
error, the final step, seed, wall times and the overrides.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from vlrl import checkpoint
from vlrl.config import compose, validate
from vlrl.evaluate import evaluate
from vlrl.stats import binomial_stderr, paired_gain
from vlrl.train import run


def _successes(episodes) -> list[float]:
    return [float(any(t.rewards.get("success", 0.0) for t in ep.turns)) for ep in episodes]


def _eval(overrides: list[str], n: int) -> tuple[dict, list[float]]:
    size = [f"task.eval_episodes={n}"] if "task=robot_manipulation" in overrides else []  # the robot eval split's size
    cfg, task = validate(compose(overrides + [f"eval.num_examples={n}"] + size))
    # progress: robot evaluations take tens of minutes; in the run's log, a line per tenth of the states
    report, episodes = evaluate(cfg, task, progress=True)
    return report, _successes(episodes)


def _eval_once(path: Path, overrides: list[str], n: int) -> tuple[dict, list[float], float]:
    """`_eval` -> (report, successes, wall seconds), saved to `path`. Rerunning the same command reads it back instead
    of evaluating again, so a stopped run (resumed with trainer.resume=auto) keeps its 'before'. Keyed by the
    overrides that change an evaluation (not trainer.* / algo.*): another run's file is refused, never reused."""
    key = {"overrides": [o for o in overrides if not o.startswith(("trainer.", "algo.", "algo="))], "n": n}
    if path.exists():
        saved = json.loads(path.read_text())
        if saved["key"] != key:
            raise ValueError(f"{path} holds the evaluation of another run ({saved['key']}, not {key}): use a new --out")
        return saved["report"], saved["successes"], saved["wall_s"]
    t0 = time.perf_counter()
    report, successes = _eval(overrides, n)
    wall = time.perf_counter() - t0
    path.write_text(json.dumps({"key": key, "report": report, "successes": successes, "wall_s": wall}, default=str))
    return report, successes, wall


def learn(out: Path, overrides: list[str], n_eval: int, method: str = "rl", task_name: str = "robot_manipulation",
          only: str | None = None) -> dict:
    """Evaluate, train (`rl`: vlrl/train.py; `sft`: vlrl/sft.py), evaluate the final checkpoint; summary.json.
    `only="before"`: the 'before' evaluation alone (saved to before.json); `only="train"`: the training alone. The
    two can run side by side; the full command (with trainer.resume=auto) then reads the evaluation back, finds the
    budget spent and evaluates the final checkpoint."""
    if method == "sft":
        from vlrl.sft import run as train_run
    elif method == "rl":
        train_run = run
    else:
        raise ValueError(f"method must be rl or sft, got {method!r}")
    out.mkdir(parents=True, exist_ok=True)
    base = [f"task={task_name}"] + overrides
    t0 = time.perf_counter()
    if only not in (None, "before", "train"):
        raise ValueError(f"only must be before or train, got {only!r}")
    if only != "train":
        # trainer=sft_tiny requires an output_dir even to evaluate; evaluation writes nothing there
        before, s0, t_eval0 = _eval_once(out / "before.json", base + [f"trainer.output_dir={out / 'run'}"], n_eval)
        if only == "before":
            print(f"'before': {sum(s0):g} of {len(s0)} successes, saved to {out / 'before.json'}", flush=True)
            return {"before": before, "successes_before": s0, "eval_before_wall_s": round(t_eval0, 1)}
    cfg, task = validate(compose(base + [f"trainer.output_dir={out / 'run'}", "trainer.progress=false"]))
    train_run(cfg, task)
    final = checkpoint.list_checkpoints(str(out / "run"))[-1]
    # every process's training seconds (a stopped and resumed run), as the checkpoint counts them for the budget
    train_s = float(checkpoint.load_state(final).get("train_seconds", float("nan")))
    if only == "train":
        print(f"trained to {final} ({train_s:.0f} s of training)", flush=True)
        return {"final_checkpoint": str(final), "train_wall_s": round(train_s, 1)}
    after, s1 = _eval(base + [f"trainer.output_dir={out / 'run'}", f"model.path={final}"], n_eval)
    mean_d, se_d = paired_gain(s0, s1)
    p0, p1 = sum(s0) / len(s0), sum(s1) / len(s1)
    summary = {
        "task": task_name, "method": method if method == "sft" else cfg.algo.name, "overrides": overrides,
        "seed": cfg.trainer.seed,
        "algo": cfg.algo.name, "held_out_init_states": n_eval,
        "before": {"success_rate": p0, "stderr": binomial_stderr(p0, n_eval), "mean_turns": before.get("mean_turns")},
        "after": {"success_rate": p1, "stderr": binomial_stderr(p1, n_eval), "mean_turns": after.get("mean_turns")},
        "gain_points": 100 * mean_d, "gain_stderr_points": 100 * se_d,
        "final_checkpoint": str(final), "final_step": int(final.name.split("_")[1]),
        "train_wall_s": round(train_s, 1), "eval_before_wall_s": round(t_eval0, 1),
        "total_wall_s": round(time.perf_counter() - t0, 1),
        "successes_before": s0, "successes_after": s1,  # per held-out init state (eval seed i)
    }
    if "suites" in after:  # LIBERO: the per-task tables of both evaluations
        summary.update(suites_before=before["suites"], suites_after=after["suites"])
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2), flush=True)
    return summary


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="evaluate -> VLA-RL -> evaluate on held-out init states")
    p.add_argument("--out", required=True)
    p.add_argument("--eval", type=int, default=50, help="held-out init states (eval split seeds 0..N-1)")
    p.add_argument("--method", choices=["rl", "sft"], default="rl", help="sft: behaviour cloning, the control")
    p.add_argument("--task", choices=["robot_manipulation", "libero"], default="robot_manipulation",
                   help="libero: the official trials (task.trials_per_task >= --eval) before and after")
    p.add_argument("--only", choices=["before", "train"], default=None,
                   help="before: the 'before' evaluation alone (OUT/before.json); train: the training alone. Run side "
                        "by side, then the full command with trainer.resume=auto reads both back and evaluates 'after'")
    a, overrides = p.parse_known_args(argv)
    learn(Path(a.out), overrides, a.eval, a.method, a.task, a.only)


if __name__ == "__main__":
    main()
