"""Held-out learning measurement for video authenticity: evaluate the start policy, train, evaluate again.

    python -m tasks.video_authenticity.experiment --method grpo --out runs/va_grpo --summary FILE.json [overrides...]
    python -m tasks.video_authenticity.experiment --method sft  --out runs/va_sft  --summary FILE.json \
        trainer=sft_tiny [overrides...]

Both evaluations are greedy on the same held-out clips (task.manifest, else the built-in held-out set);
the gain's standard error is paired (per-clip differences). `--method grpo` runs vlrl/train.py's loop
(task.reward picks plain / ta / q), `--method sft` vlrl/sft.py's (the supervised control). The summary
JSON has the keys every experiment summary uses: method, seed, held_out_clips, before, after,
gain_points, gain_stderr_points, wall times (train, eval, decode share), overrides, command.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from vlrl.config import compose, validate
from vlrl.evaluate import evaluate
from vlrl.provenance import provenance
from vlrl.stats import mean_stderr


def paired(before: dict[int, float], after: dict[int, float]) -> tuple[float, float, int]:
    """(mean after - before, its paired standard error, n) over the clips both evaluations scored."""
    keys = sorted(set(before) & set(after))
    if not keys:
        return 0.0, 0.0, 0
    mean, se = mean_stderr([after[k] - before[k] for k in keys])
    return mean, se, len(keys)


def per_clip(episodes) -> dict[int, float]:
    return {ep.seed: float(ep.turns[0].info.get("correct", 0.0)) for ep in episodes if ep.turns}


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--method", choices=("grpo", "sft"), default="grpo")
    ap.add_argument("--out", required=True, help="run folder (trainer.output_dir)")
    ap.add_argument("--summary", help="also write the summary JSON here")
    args, overrides = ap.parse_known_args(argv)
    origin = provenance("tasks.video_authenticity.experiment", argv)
    base = ["task=video_authenticity", *overrides, f"trainer.output_dir={args.out}", "trainer.progress=false"]
    cfg, task = validate(compose(base))
    t0 = time.perf_counter()
    before_rep, before_eps = evaluate(cfg, task, progress=False)
    eval_s = time.perf_counter() - t0
    from tasks.video_authenticity.training import decode_metrics

    decode_metrics(cfg.task)  # the step counters start after the first evaluation's decodes
    t0 = time.perf_counter()
    if args.method == "sft":
        from vlrl.sft import run as train_run
    else:
        from vlrl.train import run as train_run
    last = train_run(cfg, task)
    train_s = time.perf_counter() - t0
    latest = (Path(args.out) / "checkpoints" / "latest").read_text().strip()
    ckpt = str(Path(args.out) / "checkpoints" / latest)
    after_cfg, _ = validate(compose([*base, f"model.path={ckpt}"]))
    after_rep, after_eps = evaluate(after_cfg, task, progress=False)
    gain, se, n = paired(per_clip(before_eps), per_clip(after_eps))
    metrics = [json.loads(line) for line in (Path(args.out) / "metrics.jsonl").read_text().splitlines() if line.strip()]
    decode_s = sum(m.get("decode/seconds", 0.0) for m in metrics)
    step_s = sum(m.get("time/step", 0.0) for m in metrics)
    label = args.method if args.method == "sft" else {"plain": "grpo", "ta": "grpo_ta", "q": "grpo_q"}[cfg.task.reward]
    summary = {
        "method": label, "seed": cfg.trainer.seed, "held_out_clips": n,
        "before": before_rep["overall"], "after": after_rep["overall"],
        "gain_points": 100 * gain, "gain_stderr_points": 100 * se,
        "significant_3se": bool(se > 0 and gain > 3 * se),
        "before_report": {k: before_rep[k] for k in ("overall", "balanced_accuracy", "auroc", "parse_failure_rate", "breakdown")},
        "after_report": {k: after_rep[k] for k in ("overall", "balanced_accuracy", "auroc", "parse_failure_rate", "breakdown")},
        "skipped": after_rep["skipped"],
        "train_wall_s": round(train_s, 1), "eval_wall_s": round(eval_s, 1),
        "steps": max((int(m.get("step", 0)) for m in metrics), default=0),
        "decode_s": round(decode_s, 2), "decode_share_of_step": (decode_s / step_s) if step_s else None,
        "last_train_metrics": {k: v for k, v in (last or {}).items() if isinstance(v, (int, float))},
        "overrides": overrides, "checkpoint": ckpt, **origin,
    }
    for path in (Path(args.out) / "summary.json", Path(args.summary) if args.summary else None):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: summary[k] for k in ("method", "held_out_clips", "before", "after", "gain_points",
                                              "gain_stderr_points", "train_wall_s")}), flush=True)
    return summary


if __name__ == "__main__":
    main()
