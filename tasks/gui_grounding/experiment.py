"""Measured learning on held-out synthetic screens: evaluate -> GRPO -> evaluate, and the reward ablation.

    python -m tasks.gui_grounding.experiment learn  [--out DIR] [--summary PATH] [--method grpo|sft] [overrides...]
    python -m tasks.gui_grounding.experiment ablate [--out DIR] [--summary PATH] [overrides...]
    python -m tasks.gui_grounding.experiment misses [--out DIR] [overrides...]
    python -m tasks.gui_grounding.experiment passk  [--out DIR] [--k K] [overrides...]
    python -m tasks.gui_grounding.experiment read   [--out DIR] [overrides...]

`learn` evaluates the starting checkpoint (greedy, `--eval N` held-out screens, default 1000),
trains with the given Hydra overrides, evaluates the final checkpoint on the same screens and
writes `summary.json` (accuracies with binomial standard errors, the paired difference, seed, wall
times, the command line and git commit that produced it) plus the reward curve; `--summary PATH` writes
the same JSON to PATH too (a committed results file, while checkpoints stay under `--out`). `--method sft` trains with supervised fine-tuning on the reference
answers instead (`vlrl/sft.py`; pass e.g. `trainer=sft_tiny 'sft.curriculum=[]'`): the control that
says how much of a GRPO gain plain supervised training from the same start would also give. `ablate`
runs `learn` twice on the same budget, reward = hit only vs hit + iou + box, and compares the box-size
diagnostics (GUI-G1's claim: the size terms stop box inflation). `misses` evaluates `model.path` on
the held-out screens and sorts every miss by where the click landed: on another widget (the
instruction was not bound to its target) or on no widget. `passk` samples K answers per held-out screen (at `rollout.temperature`) and reports the mean sampled
hit rate and pass@K, the share of screens where at least one of the K answers hits: the answers a
group can find, hence what GRPO can reinforce. `read` asks for the name of the target at its box
(the warm start's reading examples, `task.describe_prob`) on the held-out screens and reports the share
of exact names (greedy): whether the model can read the widgets an instruction names.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from vlrl.provenance import provenance as run_provenance
from vlrl.config import compose, validate
from vlrl.evaluate import evaluate, write_report
from vlrl.sft import run as sft_run
from vlrl.train import run
from vlrl.stats import mean_stderr

BASE = ["task=gui_grounding", "model.path=assets/tiny-gui-grounding"]


def provenance(argv: list[str] | None = None) -> dict:
    """The command line (default: this process's) and the git commit of the code that ran."""
    return run_provenance("tasks.gui_grounding.experiment", sys.argv[1:] if argv is None else argv)


def _write_json(data: dict, *paths: Path | None) -> None:
    for path in paths:
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(data, indent=2) + "\n")


def _hits(episodes) -> list[float]:
    return [float(ep.turns[0].info.get("hit", 0.0)) for ep in episodes]


def fixed_click_baseline(infos: list[dict], grid: int = 19) -> dict:
    """Best constant answer: the click at one relative point (fx, fy) of every screen, the point
    chosen on these very screens from a `grid` x `grid` lattice (so an upper bound for any model
    that ignores the image). A policy below it has not learned to localise.

    infos: observation infos with `gt_box` and `image_size` in the model frame.
    """
    best = (-1.0, 0.0, 0.0)
    for fx in [(i + 0.5) / grid for i in range(grid)]:
        for fy in [(j + 0.5) / grid for j in range(grid)]:
            hits = 0
            for info in infos:
                (w, h), (x1, y1, x2, y2) = info["image_size"], info["gt_box"]
                hits += x1 <= fx * w <= x2 and y1 <= fy * h <= y2
            best = max(best, (hits / len(infos), fx, fy))
    return {"accuracy": best[0], "point": [round(best[1], 3), round(best[2], 3)], "screens": len(infos)}


def miss_kind(click: tuple[float, float], boxes: list[list[float]], target: int) -> str:
    """'hit' if the click is inside boxes[target] (inclusive), 'other_widget' if inside another box,
    else 'nothing'. click: (x, y); boxes: [K, 4] as [x1, y1, x2, y2], same pixel frame."""
    def inside(b):
        return b[0] <= click[0] <= b[2] and b[1] <= click[1] <= b[3]

    if inside(boxes[target]):
        return "hit"
    return "other_widget" if any(inside(b) for i, b in enumerate(boxes) if i != target) else "nothing"


def misses(out: Path, overrides: list[str], n_eval: int) -> dict:
    from .coords import point_to_original
    from .data import generator_kwargs, layout_seed
    from .env import analyse_answer
    from .generator import generate

    cfg, _ = validate(compose(BASE + overrides))
    if cfg.task.data != "synthetic" or cfg.task.eval_data is not None:
        raise ValueError("misses needs synthetic eval screens (it regenerates every widget box): got "
                         f"task.data={cfg.task.data!r}, task.eval_data={cfg.task.eval_data!r}")
    kwargs = generator_kwargs(cfg.task)
    out.mkdir(parents=True, exist_ok=True)
    report, episodes = _eval(BASE + overrides, n_eval, out / "eval.json")
    counts: dict[str, dict[str, int]] = {}
    for i, ep in enumerate(episodes):
        turn = ep.turns[0]
        info = turn.observation.info
        screen = generate(layout_seed("eval", i), **kwargs, render=False)  # the layout is enough
        a = analyse_answer(turn.response_text, info)
        if a["pred"] is None:
            kind = "unparsed"
        else:
            click = point_to_original(a["pred"].center(), info["image_size"], info["orig_size"])
            kind = miss_kind(click, [w.box for w in screen.widgets], screen.target)
        row = counts.setdefault(str(screen.metadata["n_widgets"]), {})
        row[kind] = row.get(kind, 0) + 1
    summary = {"model": cfg.model.path, "held_out_screens": n_eval, "accuracy": report["overall"],
               "by_n_widgets": dict(sorted(counts.items()))}
    (out / "misses.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return summary


def pass_at_k(hits: list[list[float]]) -> dict:
    """hits: [screens][K] 0/1 hits of K sampled answers per screen -> mean hit, pass@K, their stderrs."""
    k = len(hits[0])
    if any(len(h) != k for h in hits):
        raise ValueError("pass_at_k: every screen needs the same number of samples")
    m1, se1 = mean_stderr([sum(h) / k for h in hits])
    pk, sek = mean_stderr([float(max(h) > 0) for h in hits])
    return {"k": k, "screens": len(hits), "mean_hit": m1, "mean_hit_stderr": se1, "pass_at_k": pk, "pass_at_k_stderr": sek}


def passk(out: Path, overrides: list[str], n_eval: int, k: int) -> dict:
    cfg, _ = validate(compose(BASE + overrides))
    out.mkdir(parents=True, exist_ok=True)
    hits: list[list[float]] = [[] for _ in range(n_eval)]
    for draw in range(k):  # a different sampling seed per draw, same screens
        _, episodes = _eval(BASE + overrides + ["eval.greedy=false", f"eval.seed={draw}"], n_eval, out / f"draw_{draw}.json")
        for i, h in enumerate(_hits(episodes)):
            hits[i].append(h)
    summary = {"model": cfg.model.path, "temperature": cfg.rollout.temperature, **pass_at_k(hits)}
    (out / "passk.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return summary


def read(out: Path, overrides: list[str], n_eval: int) -> dict:
    import torch

    from vlrl.models import load_model, load_processor
    from vlrl.rollout import make_engine

    from .env import as_reading_example

    cfg, task = validate(compose(BASE + overrides + [f"task.eval_examples={n_eval}"]))
    processor = load_processor(cfg.model)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    engine = make_engine(cfg.rollout, load_model(cfg.model, device, trainable=False), processor)
    env = task.make_env(cfg.task, "eval")
    rows = []
    for start in range(0, n_eval, cfg.eval.batch_size):
        obs = [as_reading_example(env.reset(i), cfg.task.image_first)
               for i in range(start, min(n_eval, start + cfg.eval.batch_size))]
        for o, (sample,) in zip(obs, engine.generate(obs, n=1, greedy=True)):
            meta, answer = o.info["metadata"], sample.text.strip()
            rows.append({"n_widgets": meta["n_widgets"], "kind": meta["target_kind"], "name": o.info["describe"],
                         "answer": answer, "correct": float(answer == o.info["describe"])})
    by: dict[str, list[float]] = {}
    for r in rows:
        for key in (f"n_widgets={r['n_widgets']}", f"kind={r['kind']}"):
            by.setdefault(key, []).append(r["correct"])
    summary = {"model": cfg.model.path, "held_out_screens": n_eval, "exact_name": sum(r["correct"] for r in rows) / len(rows),
               "breakdown": {k: {"exact_name": sum(v) / len(v), "n": len(v)} for k, v in sorted(by.items())},
               "examples": rows[:20]}
    out.mkdir(parents=True, exist_ok=True)
    (out / "read.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "examples"}, indent=2))
    return summary


def _eval(overrides: list[str], n: int, output: Path) -> tuple[dict, list]:
    cfg, task = validate(compose(overrides + [f"eval.num_examples={n}", f"task.eval_examples={n}", f"eval.output={output}"]))
    report, episodes = evaluate(cfg, task)
    assert report["count"] == n, f"evaluated {report['count']} screens, wanted {n}"
    write_report(report, episodes, cfg, task, str(output))
    return report, episodes


def learn(out: Path, overrides: list[str], n_eval: int, train_only: list[str] = (), method: str = "grpo",
          summary_path: Path | None = None, origin: dict | None = None) -> dict:
    """origin: provenance() of the process (taken at start-up); summary_path: a second copy of summary.json."""
    origin = provenance() if origin is None else origin
    trainers = {"grpo": run, "sft": sft_run}  # looked up per call: tests replace them
    if method not in trainers:
        raise ValueError(f"learn: method must be one of {sorted(trainers)}, got {method!r}")
    out.mkdir(parents=True, exist_ok=True)
    train_only = list(train_only)
    t0 = time.perf_counter()
    before, episodes0 = _eval(BASE + overrides, n_eval, out / "eval_before.json")
    hits0 = _hits(episodes0)
    cfg, task = validate(compose(BASE + overrides + train_only + [f"trainer.output_dir={out / 'run'}",
                                                                         "trainer.progress=false"]))
    t1 = time.perf_counter()
    trainers[method](cfg, task)
    train_s = time.perf_counter() - t1
    final = out / "run" / "checkpoints" / f"step_{cfg.trainer.steps:07d}"
    after, episodes1 = _eval(BASE + overrides + [f"model.path={final}"], n_eval, out / "eval_after.json")
    hits1 = _hits(episodes1)
    mean_d, se_d = mean_stderr([b - a for a, b in zip(hits0, hits1)])
    summary = {
        **origin,
        "method": method,
        "overrides": overrides,
        "train_only_overrides": train_only,
        "seed": cfg.trainer.seed,
        "held_out_screens": n_eval,
        "before": {k: before.get(k) for k in ("overall", "stderr", "mean_iou", "mean_area_ratio", "big_box_rate", "parse_failure_rate")},
        "after": {k: after.get(k) for k in ("overall", "stderr", "mean_iou", "mean_area_ratio", "big_box_rate", "parse_failure_rate")},
        "gain_points": 100 * mean_d,
        "gain_stderr_points": 100 * se_d,  # paired: the same screens before and after
        "fixed_click_baseline": fixed_click_baseline([ep.turns[0].observation.info for ep in episodes0]),
        "train_wall_s": round(train_s, 1),
        "total_wall_s": round(time.perf_counter() - t0, 1),
        "curve": str(out / "run" / ("reward_curve.png" if method == "grpo" else "eval_curve.png")),
    }
    _write_json(summary, out / "summary.json", summary_path)
    print(json.dumps(summary, indent=2))
    return summary


def ablate(out: Path, overrides: list[str], n_eval: int, train_only: list[str] = (),
           summary_path: Path | None = None, origin: dict | None = None) -> dict:
    """summary_path: also write the table, both runs' summaries and the provenance there."""
    origin = provenance() if origin is None else origin
    full = learn(out / "hit_iou_box", overrides + ["task.reward_terms=[hit,iou,box]"], n_eval, train_only, origin=origin)
    hit = learn(out / "hit_only", overrides + ["task.reward_terms=[hit]"], n_eval, train_only, origin=origin)
    table = {name: {"accuracy": s["after"]["overall"], "stderr": s["after"]["stderr"], "mean_iou": s["after"]["mean_iou"],
                    "area_ratio": s["after"]["mean_area_ratio"], "big_box_rate": s["after"]["big_box_rate"],
                    "gain_points": s["gain_points"]}
             for name, s in (("hit+iou+box", full), ("hit only", hit))}
    (out / "ablation.json").write_text(json.dumps(table, indent=2) + "\n")
    if summary_path is not None:
        _write_json({**origin, "table": table, "runs": {"hit+iou+box": full, "hit only": hit}}, summary_path)
    print(json.dumps(table, indent=2))
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["learn", "ablate", "misses", "passk", "read"])
    parser.add_argument("--out", type=Path, default=Path("runs/gui_rl"))
    parser.add_argument("--summary", type=Path, default=None, metavar="PATH",
                        help="learn/ablate: also write the summary JSON here (e.g. a committed docs/results/ file)")
    parser.add_argument("--eval", type=int, default=1000, help="held-out screens (same ones before and after)")
    parser.add_argument("--method", choices=["grpo", "sft"], default="grpo",
                        help="learn: train with GRPO (vlrl/train.py) or supervised fine-tuning (vlrl/sft.py)")
    parser.add_argument("--k", type=int, default=8, help="passk: sampled answers per screen")
    parser.add_argument("--train-only", action="append", default=[], metavar="KEY=VALUE",
                        help="override applied to training but not to the held-out evaluation "
                             "(e.g. task.n_widgets=[2,3] to train where the instruction decides the target)")
    args, overrides = parser.parse_known_args()
    origin = provenance()  # before the run: the code imported now is the code that runs
    if args.summary is not None and args.mode not in ("learn", "ablate"):
        parser.error(f"--summary applies to learn and ablate, not {args.mode}")
    if args.mode == "misses":
        misses(args.out, overrides, args.eval)
    elif args.mode == "passk":
        passk(args.out, overrides, args.eval, args.k)
    elif args.mode == "read":
        read(args.out, overrides, args.eval)
    elif args.mode == "learn":
        learn(args.out, overrides, args.eval, args.train_only, args.method, args.summary, origin)
    else:
        ablate(args.out, overrides, args.eval, args.train_only, args.summary, origin)


if __name__ == "__main__":
    main()
