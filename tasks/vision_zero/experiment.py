"""Vision-Zero measurements: batching throughput, held-out decision accuracy and probe, self-play vs control.

    python -m tasks.vision_zero.experiment speed [--games M] [--summary PATH] [overrides...]
    python -m tasks.vision_zero.experiment learn [--out DIR] [--eval N] [--probe N] [--method spo|sft]
                                                 [--summary PATH] [overrides...]

`speed` plays the same M games twice with the configured model (sampling, one CPU thread): once with all
games in one `run_episodes` call (every game's next prompt in one generate call), once one game at a time;
games per minute of each. `learn` evaluates `--start` on N held-out pairs (the decision prompt after a scripted clue stage,
greedy, one answer: decision accuracy, the headline), on `--games-played` held-out games played in full
and on the held-out probe, trains (self-play with
vlrl/train.py, or `--method sft`: the supervised control on scripted clue prompts with vlrl/sft.py, same
steps), evaluates the final checkpoint on the same games and questions, and writes one JSON with the
paired differences and their standard errors.

The probe (never trained on): for a held-out pair's original image, "What is at the <place>? Answer in
\\boxed{}." for an occupied cell; correct when the boxed answer names that object's colour and shape
(e.g. "red circle" anywhere in it). Grid pairs only.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import torch

from rewards.vision_zero import ACC_CORRECT, boxed_contents, normalise_clue
from vlrl.provenance import provenance as run_provenance
from vlrl.config import compose, validate
from vlrl.stats import mean_stderr, paired_gain

BASE = ["task=vision_zero", "model.path=assets/tiny-vision-zero", "trainer.threads=1"]


def provenance(argv: list[str]) -> dict:
    """The command line and the git commit of the code that ran."""
    return run_provenance("tasks.vision_zero.experiment", argv)


def _write(data: dict, *paths) -> None:
    for p in paths:
        if p is not None:
            Path(p).parent.mkdir(parents=True, exist_ok=True)
            Path(p).write_text(json.dumps(data, indent=2) + "\n")


# ---------------------------------------------------------------- speed

def speed(overrides: list[str], games: int) -> dict:
    from vlrl.models import load_model, load_processor
    from vlrl.rollout import make_engine, run_episodes

    cfg, task = validate(compose(BASE + overrides))
    torch.set_num_threads(max(1, cfg.trainer.threads))
    processor = load_processor(cfg.model)
    model = load_model(cfg.model, torch.device("cpu"), trainable=False)
    engine = make_engine(cfg.rollout, model, processor)
    seeds = list(range(games))
    turns = task.required_max_turns(cfg.task)

    def play(batches):
        torch.manual_seed(0)
        t0 = time.perf_counter()
        n = sum(len(run_episodes(engine, lambda: task.make_env(cfg.task, "eval"), b, 1, turns)) for b in batches)
        return n, time.perf_counter() - t0

    n_b, t_b = play([seeds])
    n_s, t_s = play([[s] for s in seeds])
    return {"games": games, "players": cfg.task.players, "rounds": cfg.task.rounds, "decision": cfg.task.decision,
            "observer_samples": cfg.task.observer_samples, "max_new_tokens": cfg.rollout.max_new_tokens,
            "model": cfg.model.path, "batched_wall_s": t_b, "one_at_a_time_wall_s": t_s,
            "batched_games_per_min": 60 * n_b / t_b, "one_at_a_time_games_per_min": 60 * n_s / t_s,
            "speedup": t_s / t_b, "overrides": overrides}


# ---------------------------------------------------------------- probe

def probe_items(n: int, cfg) -> list[tuple]:
    """(image, question, answer words) for n held-out questions: seeds of the eval split, disjoint from training."""
    from tasks.vision_zero.env import make_pair
    from tasks.vision_zero.language import _place

    items = []
    for seed in range(n):
        pair = make_pair(cfg, "eval", seed)
        objs = pair.record["objects"]
        o = objs[random.Random(f"probe:{seed}").randrange(len(objs))]
        place = _place(o["row"], o["col"], pair.record["grid"])
        items.append((pair.original, f"What is at the {place}? Answer in \\boxed{{}}.", f"{o['colour']} {o['shape']}"))
    return items


def probe(model_path: str, overrides: list[str], n: int) -> list[float]:
    """Per-question correctness (0/1) of greedy answers to the held-out probe."""
    from PIL import Image

    from vlrl.episode import Observation
    from vlrl.models import load_model, load_processor
    from vlrl.rollout import make_engine

    cfg, _ = validate(compose(BASE + overrides + [f"model.path={model_path}"]))
    if cfg.task.pairs != "grid":
        raise ValueError("the probe asks about grid cells: task.pairs=grid")
    processor = load_processor(cfg.model)
    engine = make_engine(cfg.rollout, load_model(cfg.model, torch.device("cpu"), trainable=False), processor)
    items = probe_items(n, cfg.task)
    out = []
    for start in range(0, n, 64):
        chunk = items[start:start + 64]
        obs = [Observation([{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": q}]}],
                           images=[Image.fromarray(img)]) for img, q, _ in chunk]
        for (_, _, ans), s in zip(chunk, engine.generate(obs, n=1, greedy=True)):
            boxes = boxed_contents(s[0].text)
            out.append(float(bool(boxes) and f" {ans} " in f" {normalise_clue(boxes[0])} "))
    return out


# ---------------------------------------------------------------- learn

def held_out_games(model_path: str, overrides: list[str], n: int, scripted: bool = False) -> tuple[list[float], dict]:
    """Per-game decision correctness (greedy, one observer sample) on eval games 0..n-1, and the report.

    scripted=True: the decision prompt of each held-out pair after a scripted clue stage (the same clues
    before and after training, `task.scripted=decision`): decision skill alone, one generate call a game."""
    from vlrl.evaluate import evaluate
    from tasks.vision_zero.env import game_of

    cfg, task = validate(compose(BASE + overrides + [f"model.path={model_path}", f"eval.num_examples={n}",
                                                     f"task.eval_examples={n}", "task.observer_samples=1",
                                                     "eval.batch_size=64", "task.decision=observer",
                                                     f"task.scripted={'decision' if scripted else 'off'}"]))
    report, episodes = evaluate(cfg, task, progress=False)
    per_game = []
    for ep in episodes:
        g = game_of(ep)
        per_game.append(0.0 if g is None else sum(d["acc"] == ACC_CORRECT for d in g["decisions"]) / len(g["decisions"]))
    return per_game, report


def paired(before: list[float], after: list[float]) -> dict:
    b, sb = mean_stderr(before)
    a, sa = mean_stderr(after)
    d, sd = paired_gain(before, after)
    return {"before": b, "before_stderr": sb, "after": a, "after_stderr": sa,
            "gain_points": 100 * d, "gain_stderr_points": 100 * sd}


def training_overrides(method: str, overrides: list[str], train_only: list[str], start: str, run_dir: Path,
                       seed: int) -> list[str]:
    """The training run's overrides. The supervised control (`sft`) trains on scripted clue prompts unless
    `train_only` names another `task.scripted` (later overrides win, so the user's comes after the default)."""
    control = ["task.scripted=clue", "sft.eval_examples=0", "trainer.eval_every=0"] if method == "sft" else []
    return BASE + overrides + control + train_only + [f"model.path={start}", f"trainer.output_dir={run_dir}",
                                                      f"trainer.seed={seed}", "trainer.overwrite=true"]


def learn(out: Path, overrides: list[str], train_only: list[str], n_eval: int, n_games: int, n_probe: int,
          method: str, start: str, seed: int) -> dict:
    t0 = time.perf_counter()
    dec_before, rep_before = held_out_games(start, overrides, n_eval, scripted=True)
    games_before, play_before = held_out_games(start, overrides, n_games)
    probe_before = probe(start, overrides, n_probe)
    t_eval = time.perf_counter() - t0
    run_dir = out / method
    t1 = time.perf_counter()
    cfg, task = validate(compose(training_overrides(method, overrides, train_only, start, run_dir, seed)))
    if method == "spo":
        from vlrl.train import run
    else:
        from vlrl.sft import run
    run(cfg, task)
    t_train = time.perf_counter() - t1
    final = sorted((run_dir / "checkpoints").glob("step_*"))[-1]
    dec_after, rep_after = held_out_games(str(final), overrides, n_eval, scripted=True)
    games_after, play_after = held_out_games(str(final), overrides, n_games)
    probe_after = probe(str(final), overrides, n_probe)
    return {"method": method, "seed": seed, "start": start, "final_checkpoint": str(final),
            "metric": "decision accuracy on held-out pairs (scripted clue stage, greedy, one observer answer)",
            "held_out_pairs": n_eval, "held_out_games": n_games, "held_out_probe_questions": n_probe,
            **paired(dec_before, dec_after),
            "played_games": paired(games_before, games_after),
            "probe": paired(probe_before, probe_after),
            "decision_report_before": rep_before["breakdown"], "decision_report_after": rep_after["breakdown"],
            "played_report_before": play_before["breakdown"], "played_report_after": play_after["breakdown"],
            "wall_s": {"eval_before": t_eval, "train": t_train, "total": time.perf_counter() - t0},
            "overrides": overrides, "train_overrides": train_only}


def main() -> None:
    argv = sys.argv[1:]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cmd", choices=["speed", "learn"])
    parser.add_argument("--games", type=int, default=32)
    parser.add_argument("--out", type=Path, default=Path("runs/vision_zero_learn"))
    parser.add_argument("--eval", type=int, default=1000)
    parser.add_argument("--games-played", type=int, default=200, help="held-out games played in full")
    parser.add_argument("--probe", type=int, default=1000)
    parser.add_argument("--method", choices=["spo", "sft"], default="spo")
    parser.add_argument("--start", default="assets/tiny-vision-zero")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train", action="append", default=[], help="an override for the training run only")
    parser.add_argument("--summary", type=Path, default=None)
    args, overrides = parser.parse_known_args(argv)
    origin = provenance(argv)  # at start-up: the commit of the code that runs, not of the tree at the end
    if args.cmd == "speed":
        result = speed(overrides, args.games)
    else:
        result = learn(args.out, overrides, args.train, args.eval, args.games_played, args.probe, args.method,
                       args.start, args.seed)
    result.update(origin)
    _write(result, args.summary, None if args.cmd == "speed" else args.out / f"summary_{args.method}.json")
    print(json.dumps({k: v for k, v in result.items() if not isinstance(v, (dict, list))}, indent=1))


if __name__ == "__main__":
    main()
