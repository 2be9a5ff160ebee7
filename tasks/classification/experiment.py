"""CLS-RL vs No-Thinking-RL vs SFT on the same shots and the same budget, measured on held-out images.

    python -m tasks.classification.experiment compare [--out DIR] [--summary-dir DIR] [--eval N]
        [--steps S] [--prompts P] [--group G] [--methods cls_rl,no_thinking,sft] [--sft-mode cls_rl]
        [--protocol base_to_new|all] [--set METHOD:KEY=VALUE ...] [overrides...]

Every method starts from the same checkpoint (`model.path`, by default the task's warm start) and trains on the
same k-shot sample (`task.shots`, `task.shot_seed`; by default base-to-new: the 18 base classes of the built-in
shapes set, 4 shots each; `--protocol all`: every class, 4 shots each). Budget: S optimizer steps for every
method. The RL runs (vlrl/train.py, `task.mode=cls_rl` / `no_thinking`) score P prompts x G sampled answers per
step; the supervised control (vlrl/sft.py, reference answers in the `--sft-mode` format) takes P x G examples per
step: the same number of optimizer steps and of image presentations. Each start is evaluated once per answer
format (greedy, the first N held-out images, every one of them before and after, so differences are paired) and
each final checkpoint once. Writes `<method>_seed<seed>.json` per method (keys `method`, `seed`,
`held_out_images`, `before`, `after`, `gain_points`, `gain_stderr_points`, wall times, `overrides`, `command`) and
`table.md` / `compare.json` under `--summary-dir` (and `--out`), and prints the table. Overrides apply to training
and evaluation alike; `--set cls_rl:trainer.lr=1e-3` adds an override to one method's training only (a learning
rate or sampling temperature chosen per method, e.g. by a sweep on other data).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from vlrl.provenance import provenance as run_provenance, write_comparison
from vlrl.cli import method_overrides
from vlrl.config import compose, validate
from vlrl.evaluate import evaluate, write_report
from vlrl.sft import run as sft_run
from vlrl.train import run as grpo_run
from vlrl.stats import paired_gain

BASE = ["task=classification"]
METHODS = ("cls_rl", "no_thinking", "sft")
REPORT_KEYS = ("overall", "stderr", "base", "new", "harmonic_mean", "mean_response_length", "mean_response_chars",
               "parse_failure_rate", "hedged_rate", "not_a_candidate_rate", "format_rate")


def provenance(argv: list[str] | None = None) -> dict:
    """The command line (default: this process's) and the git commit of the code that ran."""
    return run_provenance("tasks.classification.experiment", sys.argv[1:] if argv is None else argv)


def budget(method: str, steps: int, prompts: int, group: int, sft_mode: str) -> list[str]:
    """The overrides that give `method` S optimizer steps and S x P x G image presentations."""
    if method == "sft":
        return [f"task.mode={sft_mode}", f"trainer.steps={steps}", f"trainer.prompts_per_step={prompts * group}",
                "sft.curriculum=[]", "trainer.eval_every=0"]
    if method not in ("cls_rl", "no_thinking"):
        raise ValueError(f"unknown method {method!r}: one of {list(METHODS)}")
    return [f"task.mode={method}", f"trainer.steps={steps}", f"trainer.prompts_per_step={prompts}",
            f"algo.group_size={group}"]


def eval_mode(method: str, sft_mode: str) -> str:
    """The answer format a method is evaluated in (its training format)."""
    return sft_mode if method == "sft" else method


def _correct(episodes) -> list[float]:
    return [float(ep.turns[0].rewards.get("accuracy", 0.0)) if ep.turns else 0.0 for ep in episodes]


def _eval(overrides: list[str], n: int, output: Path) -> tuple[dict, list[float]]:
    cfg, task = validate(compose(overrides + [f"eval.num_examples={n}", f"eval.output={output}"]))
    report, episodes = evaluate(cfg, task, progress=False)
    if report["count"] != n:
        raise RuntimeError(f"evaluated {report['count']} images, wanted {n} (fewer held-out images than --eval?)")
    write_report(report, episodes, cfg, task, str(output))
    return report, _correct(episodes)


def _pick(report: dict) -> dict:
    return {k: report[k] for k in REPORT_KEYS if k in report}


def compare(out: Path, overrides: list[str], n_eval: int, steps: int, prompts: int, group: int,
            methods: list[str], sft_mode: str = "cls_rl", summary_dir: Path | None = None,
            origin: dict | None = None, protocol: str = "base_to_new",
            method_sets: dict[str, list[str]] | None = None) -> dict:
    """Run every method in `methods` from the same start; -> {"rows": {method: summary}, "table": markdown}.

    method_sets: {method: [overrides for that method's training only]}."""
    origin = provenance() if origin is None else origin
    trainers = {"grpo": grpo_run, "sft": sft_run}  # looked up per call: tests replace them
    out.mkdir(parents=True, exist_ok=True)
    shared = [f"task.protocol={protocol}"] + list(overrides)
    method_sets = method_sets or {}
    starts: dict[str, tuple[dict, list[float], float]] = {}
    rows: dict[str, dict] = {}
    finals: dict[str, list[float]] = {}
    for method in methods:
        mode = eval_mode(method, sft_mode)
        if mode not in starts:  # one evaluation of the start per answer format
            t0 = time.perf_counter()
            rep, hits = _eval(BASE + shared + [f"task.mode={mode}"], n_eval, out / f"eval_start_{mode}.json")
            starts[mode] = (rep, hits, time.perf_counter() - t0)
        before, hits0, before_s = starts[mode]
        run_dir = out / method
        own = budget(method, steps, prompts, group, sft_mode) + method_sets.get(method, [])
        cfg, task = validate(compose(BASE + shared + own
                                     + [f"trainer.output_dir={run_dir / 'run'}", "trainer.progress=false"]))
        t1 = time.perf_counter()
        trainers["sft" if method == "sft" else "grpo"](cfg, task)
        train_s = time.perf_counter() - t1
        final = run_dir / "run" / "checkpoints" / f"step_{cfg.trainer.steps:07d}"
        t2 = time.perf_counter()
        after, hits1 = _eval(BASE + shared + [f"task.mode={mode}", f"model.path={final}"], n_eval,
                             run_dir / "eval_after.json")
        after_s = time.perf_counter() - t2
        gain, gain_se = paired_gain(hits0, hits1)
        finals[method] = hits1
        rows[method] = {
            **origin,
            "method": method,
            "answer_format": mode,
            "seed": cfg.trainer.seed,
            "start": cfg.model.path,
            "held_out_images": n_eval,
            "shots": cfg.task.shots, "shot_seed": cfg.task.shot_seed, "protocol": cfg.task.protocol,
            "budget": {"optimizer_steps": cfg.trainer.steps, "prompts_per_step": cfg.trainer.prompts_per_step,
                       "samples_per_prompt": group if method != "sft" else 1,
                       "image_presentations": steps * prompts * group},
            "before": _pick(before),
            "after": _pick(after),
            "gain_points": 100 * gain,
            "gain_stderr_points": 100 * gain_se,  # paired: the same images before and after
            "gain_over_3_stderr": gain > 3 * gain_se,
            "overrides": overrides,
            "method_overrides": own,
            "eval_before_wall_s": round(before_s, 1),
            "train_wall_s": round(train_s, 1),
            "eval_after_wall_s": round(after_s, 1),
        }
    if "sft" in finals:  # RL vs the supervised control on the same images
        for method in rows:
            if method != "sft":
                d, se = paired_gain(finals["sft"], finals[method])
                rows[method]["vs_sft_points"], rows[method]["vs_sft_stderr_points"] = 100 * d, 100 * se
    table = to_table(rows)
    write_comparison(rows, table, origin, out, summary_dir)
    print(table)
    return {"rows": rows, "table": table}


def to_table(rows: dict[str, dict]) -> str:
    """Markdown table of compare()'s per-method summaries (accuracies in %, +- standard errors)."""
    def pct(x):
        return "-" if x is None else f"{100 * x:.1f}"

    lines = ["| method | before | after | gain (paired) | > 3 se | vs SFT (paired) | base | new | HM "
             "| resp. tokens | hedged / not a candidate | train s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for method, r in rows.items():
        b, a = r["before"], r["after"]
        vs = (f"{r['vs_sft_points']:+.1f} ± {r['vs_sft_stderr_points']:.1f}" if "vs_sft_points" in r else "-")
        lines.append(
            f"| {method} | {pct(b['overall'])} ± {pct(b['stderr'])} | {pct(a['overall'])} ± {pct(a['stderr'])} "
            f"| {r['gain_points']:+.1f} ± {r['gain_stderr_points']:.1f} | {'yes' if r['gain_over_3_stderr'] else 'no'} "
            f"| {vs} | {pct(b.get('base'))} → {pct(a.get('base'))} | {pct(b.get('new'))} → {pct(a.get('new'))} "
            f"| {pct(b.get('harmonic_mean'))} → {pct(a.get('harmonic_mean'))} "
            f"| {b['mean_response_length']:.1f} → {a['mean_response_length']:.1f} "
            f"| {pct(a['hedged_rate'])} / {pct(a['not_a_candidate_rate'])} | {r['train_wall_s']:.0f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["compare"])
    parser.add_argument("--out", type=Path, default=Path("runs/cls_compare"))
    parser.add_argument("--summary-dir", type=Path, default=None, metavar="DIR",
                        help="also write the per-method JSONs, compare.json and table.md here (e.g. docs/results/classification)")
    parser.add_argument("--eval", type=int, default=1080, help="held-out images (the same ones before and after)")
    parser.add_argument("--steps", type=int, default=150, help="optimizer steps of every method")
    parser.add_argument("--prompts", type=int, default=8, help="RL: images per step (SFT: prompts x group examples)")
    parser.add_argument("--group", type=int, default=8, help="RL: sampled answers per image")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of " + ",".join(METHODS))
    parser.add_argument("--sft-mode", choices=["cls_rl", "no_thinking"], default="cls_rl",
                        help="answer format of the supervised control's targets (and its evaluation)")
    parser.add_argument("--protocol", choices=["base_to_new", "all"], default="base_to_new",
                        help="base_to_new: train on the first half of the classes, evaluate base and new; "
                             "all: train and evaluate on every class")
    parser.add_argument("--set", action="append", default=[], metavar="METHOD:KEY=VALUE",
                        help="an override for one method's training only (repeatable), e.g. cls_rl:trainer.lr=1e-3")
    args, overrides = parser.parse_known_args()
    origin = provenance()
    methods = [m for m in args.methods.split(",") if m]
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods:
        parser.error(f"--methods: {bad or 'none given'} (choose from {list(METHODS)})")
    try:
        method_sets = method_overrides(args.set, methods)
    except ValueError as e:
        parser.error(str(e))
    compare(args.out, overrides, args.eval, args.steps, args.prompts, args.group, methods, args.sft_mode,
            args.summary_dir, origin, args.protocol, method_sets)


if __name__ == "__main__":
    main()
