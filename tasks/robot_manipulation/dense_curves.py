"""Training curves of the dense-vs-sparse VLA-RL runs: success and dense reward against wall time and episodes.

    python -m tasks.robot_manipulation.dense_curves --out tasks/robot_manipulation/results/dense_curves \
        sparse_seed0=runs/dense/sparse_seed0 progress_seed0=runs/dense/progress_seed0 ...

Reads each run's RUN/run/metrics.jsonl and writes OUT.json (per run: the per-step series and a summary) and OUT.png.
Wall time is the sum of the steps' `time/step` (training only, no evaluation); episodes the sum of `episodes`.
An episode's dense reward is `reward/dense` (the mean over turns) x `turns/mean`, i.e. the batch's dense sum per
episode. The summary compares the first and the last fifth of the steps: a dense reward that rises while the
training success rate does not is the sign of a hacked reward model.

Where every run has its RUN/summary.json (the experiment's result), `versus_reference` pairs each run's greedy
after-RL successes with the reference run's (`--reference`, default the first run) state by state on the same
held-out init states: the run-vs-run difference in points with its paired standard error.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from vlrl.metrics import read_metrics
from vlrl.stats import paired_gain

KEYS = ["time/step", "episodes", "success/rate", "reward/dense", "turns/mean"]


def series(records: list[dict]) -> dict[str, list[float]]:
    """Per-step series of one run: step, wall_s and episodes (cumulative), success, dense reward per episode
    (NaN for a run without a dense reward)."""
    out: dict[str, list[float]] = {"step": [], "wall_s": [], "episodes": [], "success": [], "dense_per_episode": []}
    wall = episodes = 0.0
    for r in records:
        if "time/step" not in r:  # an evaluation-only record
            continue
        wall += r["time/step"]
        episodes += r.get("episodes", 0.0)
        out["step"].append(r["step"])
        out["wall_s"].append(round(wall, 3))
        out["episodes"].append(episodes)
        out["success"].append(r.get("success/rate", math.nan))
        dense = r.get("reward/dense")
        out["dense_per_episode"].append(math.nan if dense is None else dense * r.get("turns/mean", math.nan))
    return out


def _mean_se(xs: list[float]) -> tuple[float, float]:
    xs = [x for x in xs if not math.isnan(x)]
    if not xs:
        return math.nan, math.nan
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, math.nan
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs))


def change(xs: list[float], fraction: float = 0.2) -> dict[str, float]:
    """Mean of the last `fraction` of the steps minus that of the first, with the standard error of the difference
    (the per-step values of each window taken as independent)."""
    k = max(1, int(len(xs) * fraction))
    (a, sa), (b, sb) = _mean_se(xs[:k]), _mean_se(xs[-k:])
    return {"first": a, "last": b, "change": b - a, "stderr": math.hypot(sa, sb), "steps_per_window": k}


def summarise(s: dict[str, list[float]]) -> dict:
    success, dense = change(s["success"]), change(s["dense_per_episode"])
    rising = lambda c: c["change"] > 2 * c["stderr"]  # noqa: E731  (more than two standard errors)
    return {"steps": len(s["step"]), "train_wall_s": s["wall_s"][-1] if s["wall_s"] else 0.0,
            "episodes": s["episodes"][-1] if s["episodes"] else 0.0, "success": success, "dense_per_episode": dense,
            "dense_rose_while_success_did_not": bool(rising(dense) and not rising(success))
            if not math.isnan(dense["change"]) else None}


def versus_reference(summaries: dict[str, dict], reference: str) -> dict[str, dict]:
    """summaries: run name -> the experiment's summary.json (`successes_after`: [N] 0/1 per held-out state, in the
    evaluation's order) -> per run: its after minus the reference's after, paired per state, in points."""
    ref = summaries[reference]["successes_after"]
    out = {}
    for name, s in summaries.items():
        if len(s["successes_after"]) != len(ref):
            raise SystemExit(f"dense_curves: {name} has {len(s['successes_after'])} held-out states, "
                             f"{reference} has {len(ref)}; runs compared per state need the same states")
        diff, se = paired_gain(ref, s["successes_after"])
        out[name] = {"after": s["after"]["success_rate"], "minus_reference_points": 100 * diff,
                     "minus_reference_stderr_points": 100 * se, "held_out_init_states": len(ref)}
    return out


def plot(runs: dict[str, dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for i, (name, s) in enumerate(runs.items()):
        color = f"C{i}"  # one colour per run in every panel (a sparse run has no dense curve)
        axes[0].plot([t / 60 for t in s["wall_s"]], _smooth(s["success"]), label=name, color=color)
        axes[1].plot(s["episodes"], _smooth(s["success"]), label=name, color=color)
        if not all(math.isnan(d) for d in s["dense_per_episode"]):
            axes[2].plot(s["episodes"], _smooth(s["dense_per_episode"]), label=name, color=color)
    for ax, (x, y) in zip(axes, [("training wall time (min)", "training success (10-step mean)"),
                                 ("episodes", "training success (10-step mean)"),
                                 ("episodes", "dense reward per episode (10-step mean)")]):
        ax.set_xlabel(x), ax.set_ylabel(y), ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def _smooth(xs: list[float], k: int = 10) -> list[float]:
    return [_mean_se(xs[max(0, i - k + 1): i + 1])[0] for i in range(len(xs))]


def _finite(x):
    """NaN -> None, so the file is standard JSON."""
    if isinstance(x, float) and math.isnan(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return x


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description="dense-vs-sparse VLA-RL training curves")
    p.add_argument("runs", nargs="+", help="NAME=RUN_DIR (the experiment's --out; its run/metrics.jsonl is read)")
    p.add_argument("--out", required=True, help="OUT.json and OUT.png are written")
    p.add_argument("--reference", help="run NAME the others are paired against (default: the first run)")
    argv = sys.argv[1:] if argv is None else argv
    a = p.parse_args(argv)
    runs, summaries = {}, {}
    for spec in a.runs:
        name, _, path = spec.partition("=")
        metrics = Path(path) / "run" / "metrics.jsonl"
        if not name or not metrics.exists():
            raise SystemExit(f"dense_curves: {spec!r} is not NAME=RUN_DIR with RUN_DIR/run/metrics.jsonl")
        runs[name] = series(read_metrics(metrics, KEYS))
        if (Path(path) / "summary.json").exists():
            summaries[name] = json.loads((Path(path) / "summary.json").read_text())
    reference = a.reference or next(iter(runs))
    if reference not in runs:
        raise SystemExit(f"dense_curves: --reference {reference!r} is not one of the runs {sorted(runs)}")
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {"command": "python -m tasks.robot_manipulation.dense_curves " + " ".join(argv),
              "summary": {n: summarise(s) for n, s in runs.items()}, "series": runs}
    if len(summaries) == len(runs):  # only a complete set: a run still training has no after to pair
        result["reference"] = reference
        result["versus_reference"] = versus_reference(summaries, reference)
    out.with_suffix(".json").write_text(json.dumps(_finite(result), indent=1))
    plot(runs, out.with_suffix(".png"))
    print(json.dumps({k: result[k] for k in ("summary", "versus_reference") if k in result}, indent=2))
    return result


if __name__ == "__main__":
    main()
