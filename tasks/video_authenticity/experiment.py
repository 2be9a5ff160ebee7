"""Held-out learning measurement for video authenticity: evaluate the start policy, train, evaluate again.

    python -m tasks.video_authenticity.experiment --method grpo --out runs/va_grpo --summary FILE.json [overrides...]
    python -m tasks.video_authenticity.experiment --method sft  --out runs/va_sft  --summary FILE.json \
        trainer=sft_tiny [overrides...]
    python -m tasks.video_authenticity.experiment compare --out runs/va_compare --summary-dir DIR \
        --methods grpo,grpo_ta,grpo_q,sft,sft_q --steps S --prompts P --group G [--set METHOD:KEY=VALUE] [overrides...]

Both evaluations are greedy on the same held-out clips (task.manifest, else the built-in held-out set);
the gain's standard error is paired (per-clip differences). `--method grpo` runs vlrl/train.py's loop
(task.reward picks plain / ta / q), `--method sft` vlrl/sft.py's (the supervised control). The summary
JSON has the keys every experiment summary uses: method, seed, held_out_clips, before, after,
gain_points, gain_stderr_points, wall times (train, eval, decode share), overrides, command.

`compare` runs every method from the same start on the same budget: S optimizer steps of P clips; RL samples
G answers per clip (GRPO-TA G/2 more on the perturbed copy, not trained on), the supervised control gets P x G
reference answers per step. It writes one summary JSON per method, `compare.json` and `table.md` (held-out
accuracy with paired standard errors, per artifact kind and level, wall time, decode share) and prints the table.
Each method is evaluated in the prompt format it trains on: the six-option one for GRPO-Q and `sft_q` (and for any
method run with task.reward=q; correct = real/fake right), else the binary one; the start is evaluated once per
format, and each RL method is compared (paired) with the supervised control of its own format when one ran.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from vlrl.cli import method_overrides
from vlrl.config import compose, validate
from vlrl.evaluate import evaluate
from vlrl.provenance import provenance, write_comparison
from vlrl.stats import paired_gain


def paired(before: dict[int, float], after: dict[int, float]) -> tuple[float, float, int]:
    """(mean after - before, its paired standard error, n) over the clips both evaluations scored."""
    keys = sorted(set(before) & set(after))
    if not keys:
        return 0.0, 0.0, 0
    mean, se = paired_gain([before[k] for k in keys], [after[k] for k in keys])
    return mean, se, len(keys)


def per_clip(episodes) -> dict[int, float]:
    return {ep.seed: float(ep.turns[0].info.get("correct", 0.0)) for ep in episodes if ep.turns}


METHODS = {"grpo": ["task.reward=plain"], "grpo_ta": ["task.reward=ta"], "grpo_q": ["task.reward=q"], "sft": [],
           "sft_q": ["task.reward=q"]}  # sft: the run's task.reward (binary unless set); sft_q: six-option targets
REPORT_KEYS = ("overall", "balanced_accuracy", "auroc", "parse_failure_rate", "breakdown")


def measure(method: str, out: Path, overrides: list[str], origin: dict, start: tuple | None = None) -> tuple:
    """Evaluate (unless `start` = (report, episodes, seconds) is given), train `method` ("grpo" | "sft") into
    `out`, evaluate the last checkpoint. -> (summary, start, after episodes)."""
    base = ["task=video_authenticity", *overrides, f"trainer.output_dir={out}", "trainer.progress=false"]
    cfg, task = validate(compose(base))
    if start is None:
        t0 = time.perf_counter()
        before_rep, before_eps = evaluate(cfg, task, progress=False)
        start = (before_rep, before_eps, time.perf_counter() - t0)
    before_rep, before_eps, eval_s = start
    from tasks.video_authenticity.training import decode_metrics

    decode_metrics(cfg.task)  # the step counters start after the evaluation's decodes
    t0 = time.perf_counter()
    if method == "sft":
        from vlrl.sft import run as train_run
    else:
        from vlrl.train import run as train_run
    last = train_run(cfg, task)
    train_s = time.perf_counter() - t0
    latest = (out / "checkpoints" / "latest").read_text().strip()
    ckpt = str(out / "checkpoints" / latest)
    after_cfg, _ = validate(compose([*base, f"model.path={ckpt}"]))
    after_rep, after_eps = evaluate(after_cfg, task, progress=False)
    gain, se, n = paired(per_clip(before_eps), per_clip(after_eps))
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    decode_s = sum(m.get("decode/seconds", 0.0) for m in metrics)
    step_s = sum(m.get("time/step", 0.0) for m in metrics)
    counted = any("decode/seconds" in m for m in metrics)  # vlrl/sft.py logs no decode counters: not measured
    label = {"plain": "grpo", "ta": "grpo_ta", "q": "grpo_q"}[cfg.task.reward] if method != "sft" else (
        "sft_q" if cfg.task.reward == "q" else "sft")
    summary = {
        "method": label, "seed": cfg.trainer.seed, "start": cfg.model.path, "held_out_clips": n,
        "answer_format": "six options" if cfg.task.reward == "q" else "binary",
        "before": before_rep["overall"], "after": after_rep["overall"],
        "gain_points": 100 * gain, "gain_stderr_points": 100 * se,
        "significant_3se": bool(se > 0 and gain > 3 * se),
        "before_report": {k: before_rep[k] for k in REPORT_KEYS},
        "after_report": {k: after_rep[k] for k in REPORT_KEYS},
        "skipped": after_rep["skipped"],
        "train_wall_s": round(train_s, 1), "eval_wall_s": round(eval_s, 1),
        "steps": max((int(m.get("step", 0)) for m in metrics), default=0),
        "decode_s": round(decode_s, 2), "decode_share_of_step": (decode_s / step_s) if step_s and counted else None,
        "last_train_metrics": {k: v for k, v in (last or {}).items() if isinstance(v, (int, float))},
        "overrides": overrides, "checkpoint": ckpt, **origin,
    }
    return summary, start, after_eps


def _write(data: dict, *paths: Path | None) -> None:
    for path in paths:
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(data, indent=2) + "\n")


def budget(method: str, steps: int, prompts: int, group: int) -> list[str]:
    """The overrides that give `method` S optimizer steps of P clips and S x P x G answers trained on."""
    if method.startswith("sft"):
        return [*METHODS[method], f"trainer.steps={steps}", f"trainer.prompts_per_step={prompts * group}",
                "trainer.eval_every=0", "sft.eval_examples=0", "sft.curriculum=[]"]
    ta = [f"task.ta_samples={max(1, group // 2)}"] if method == "grpo_ta" else []
    return [*METHODS[method], *ta, f"trainer.steps={steps}", f"trainer.prompts_per_step={prompts}",
            f"algo.group_size={group}"]


def compare(out: Path, overrides: list[str], methods: list[str], steps: int, prompts: int, group: int,
            method_sets: dict[str, list[str]], summary_dir: Path | None, origin: dict) -> dict:
    """Every method from the same start on the same budget; -> {"rows": {method: summary}, "table": markdown}."""
    starts: dict[str, tuple] = {}  # one evaluation of the start per answer format (binary / q)
    rows, finals = {}, {}
    for method in methods:
        own = budget(method, steps, prompts, group) + method_sets.get(method, [])
        fmt = validate(compose(["task=video_authenticity", *overrides, *own]))[0].task.reward == "q"
        summary, starts[fmt], after_eps = measure("sft" if method.startswith("sft") else "grpo", out / method,
                                                  [*overrides, *own], origin, starts.get(fmt))
        summary["method"], summary["method_overrides"] = method, own  # the row's name is the name asked for
        summary["budget"] = {"optimizer_steps": steps, "clips_per_step": prompts, "answers_per_clip": group,
                             "answers_trained_on": steps * prompts * group}
        rows[method], finals[method] = summary, per_clip(after_eps)
    controls = {r["answer_format"]: m for m, r in rows.items() if m.startswith("sft")}
    for method, row in rows.items():  # RL vs the supervised control in its own answer format, paired
        control = controls.get(row["answer_format"])
        if control is not None and not method.startswith("sft"):
            d, se, _ = paired(finals[control], finals[method])
            row["vs_sft_points"], row["vs_sft_stderr_points"], row["vs_sft_method"] = 100 * d, 100 * se, control
    table = to_table(rows)
    write_comparison(rows, table, origin, out, summary_dir)
    print(table, flush=True)
    return {"rows": rows, "table": table}


def to_table(rows: dict[str, dict]) -> str:
    """Markdown table of compare()'s summaries: accuracy in %, the start's row first (per answer format)."""
    kinds = sorted({g for r in rows.values() for g in r["before_report"]["breakdown"].get("generator", {})})
    levels = sorted({str(v) for r in rows.values() for v in r["before_report"]["breakdown"].get("level", {})})

    def cells(rep: dict) -> list[str]:
        b = rep["breakdown"]
        get = [("label", "real"), ("label", "fake"), *(("generator", k) for k in kinds),
               *(("level", v) for v in levels)]
        return [f"{100 * b[k][g]['accuracy']:.1f}" if g in b.get(k, {}) else "-" for k, g in get]

    head = ["method", "accuracy", "gain (paired)", "> 3 se", "vs SFT (paired)", "real", "fake", *kinds,
            *(f"level {v}" for v in levels), "train s", "decode share"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    shown = set()
    for method, r in rows.items():
        fmt = r.get("answer_format", "binary")
        if fmt not in shown:
            shown.add(fmt)
            rep = r["before_report"]
            lines.append("| " + " | ".join([f"start ({fmt})", f"{100 * r['before']:.1f}", "-", "-", "-",
                                             *cells(rep), "-", "-"]) + " |")
    for method, r in rows.items():
        vs = f"{r['vs_sft_points']:+.1f} ± {r['vs_sft_stderr_points']:.1f}" if "vs_sft_points" in r else "-"
        share = "-" if r["decode_share_of_step"] is None else f"{100 * r['decode_share_of_step']:.1f}%"
        lines.append("| " + " | ".join([method, f"{100 * r['after']:.1f}",
                                         f"{r['gain_points']:+.1f} ± {r['gain_stderr_points']:.1f}",
                                         "yes" if r["significant_3se"] else "no", vs, *cells(r["after_report"]),
                                         f"{r['train_wall_s']:.0f}", share]) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["compare"]:
        return main_compare(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--method", choices=("grpo", "sft"), default="grpo")
    ap.add_argument("--out", required=True, help="run folder (trainer.output_dir)")
    ap.add_argument("--summary", help="also write the summary JSON here")
    args, overrides = ap.parse_known_args(argv)
    origin = provenance("tasks.video_authenticity.experiment", argv)
    summary, _, _ = measure(args.method, Path(args.out), overrides, origin)
    _write(summary, Path(args.out) / "summary.json", Path(args.summary) if args.summary else None)
    print(json.dumps({k: summary[k] for k in ("method", "held_out_clips", "before", "after", "gain_points",
                                              "gain_stderr_points", "train_wall_s")}), flush=True)
    return summary


def main_compare(argv: list[str]) -> dict:
    ap = argparse.ArgumentParser(prog="python -m tasks.video_authenticity.experiment compare",
                                 description="every method from the same start on the same budget")
    ap.add_argument("mode", choices=["compare"])
    ap.add_argument("--out", type=Path, default=Path("runs/va_compare"))
    ap.add_argument("--summary-dir", type=Path, default=None, metavar="DIR",
                    help="also write the per-method JSONs, compare.json and table.md here")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of " + ",".join(METHODS))
    ap.add_argument("--steps", type=int, default=200, help="optimizer steps of every method")
    ap.add_argument("--prompts", type=int, default=8, help="clips per step (SFT: prompts x group answers)")
    ap.add_argument("--group", type=int, default=8, help="RL: sampled answers per clip")
    ap.add_argument("--set", action="append", default=[], metavar="METHOD:KEY=VALUE",
                    help="an override for one method only (repeatable), e.g. sft:trainer.lr=1e-3")
    args, overrides = ap.parse_known_args(argv)
    origin = provenance("tasks.video_authenticity.experiment", argv)
    methods = [m for m in args.methods.split(",") if m]
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods:
        ap.error(f"--methods: {bad or 'none given'} (choose from {list(METHODS)})")
    try:
        method_sets = method_overrides(args.set, methods)
    except ValueError as e:
        ap.error(str(e))
    return compare(args.out, overrides, methods, args.steps, args.prompts, args.group, method_sets,
                   args.summary_dir, origin)


if __name__ == "__main__":
    main()
