"""Evaluate a checkpoint on a task's held-out data:
`python vlrl/evaluate.py task=NAME model.path=CHECKPOINT eval.output=REPORT.json [overrides]`
(`--cfg job`: the resolved config, nothing run; `--help`: every field with its effective value).

Prints which model it scores. Without `eval.output` the report goes beside the model's folder, named after the
model, task and split (`CHECKPOINT.eval-TASK-SPLIT.json`); a hub id needs `eval.output`.

Writes the task's report as JSON (plus a Markdown table when the task provides one, also printed, and
annotated examples when `eval.dump_images > 0` and the task supports it). A task with a step limit
(`required_max_turns`) refuses a smaller `rollout.max_turns`.
"""

from __future__ import annotations

import os
import sys

if __package__ in (None, ""):
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    sys.path.insert(0, os.path.dirname(_here))

import json
import math
import time
from pathlib import Path

import torch

from vlrl.config import Config, UsageError, resolve_path
from vlrl.models import load_model, load_processor
from vlrl.progress import duration, show_bar
from vlrl.rollout import make_engine, run_episodes
from vlrl.skips import skipped_report

DEFAULT_GENERATED_EXAMPLES = 1000


def evaluate(cfg: Config, task, progress: bool = True) -> tuple[dict, list]:
    """Run the policy on `cfg.eval.split` and return (report, episodes)."""
    if cfg.trainer.threads:  # as in training: a CPU job that shares the machine asks for its share of cores
        torch.set_num_threads(cfg.trainer.threads)
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    check_max_turns(cfg, task)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    processor = load_processor(cfg.model)
    model = load_model(cfg.model, device, trainable=False)
    engine = _FreeEncodings(make_engine(cfg.rollout, model, processor))
    available = task.num_examples(cfg.task, cfg.eval.split)
    n = cfg.eval.num_examples or (available if available is not None else DEFAULT_GENERATED_EXAMPLES)
    first = cfg.eval.first_example
    if available is not None:
        if first >= available:
            raise UsageError(f"eval.first_example={first}: the {cfg.eval.split} split has only {available} examples")
        n = min(n, available - first)
    torch.manual_seed(cfg.eval.seed)
    t0 = time.perf_counter()
    episodes, stats = [], {}
    live = show_bar(progress)  # a bar on a terminal; in a log file a plain line per tenth of the work instead
    lines_every = max(1, math.ceil(n / cfg.eval.batch_size / 10))
    with Progress(TextColumn("[bold]eval"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeRemainingColumn(), disable=not live) as bar:
        job = bar.add_task("eval", total=n)
        for i, start in enumerate(range(first, first + n, cfg.eval.batch_size)):
            seeds = list(range(start, min(first + n, start + cfg.eval.batch_size)))
            batch = run_episodes(engine, lambda: task.make_env(cfg.task, cfg.eval.split), seeds, 1,
                                 cfg.rollout.max_turns, greedy=cfg.eval.greedy, stats=stats)
            for ep in batch[max(0, cfg.eval.dump_images - len(episodes)):]:
                for turn in ep.turns[1:]:  # later turns' images of multi-turn episodes: not needed by any report
                    turn.observation.release()
            episodes.extend(batch)
            bar.update(job, advance=len(seeds))
            if progress and not live and ((i + 1) % lines_every == 0 or len(episodes) == n):
                print(eval_line(len(episodes), n, cfg.eval.split, time.perf_counter() - t0), flush=True)
    # Samples that never became an episode (unreadable input) are counted, never silently dropped.
    report = task.report(episodes, cfg.task, skipped=skipped_report(stats))
    report["meta"] = {
        "task": cfg.task.name, "model": cfg.model.path, "split": cfg.eval.split, "examples": n,
        "first_example": first,
        "greedy": cfg.eval.greedy, "seed": cfg.eval.seed, "wall_s": round(time.perf_counter() - t0, 2),
    }
    return report, episodes


def eval_line(done: int, total: int, split: str, elapsed_s: float) -> str:
    """`[vlrl eval] 40/200 eval examples, 5m00s, ETA 20m00s`: the plain progress line of an evaluation in a log."""
    eta = elapsed_s / max(done, 1) * max(total - done, 0)
    return f"[vlrl eval] {done}/{total} {split} examples, {duration(elapsed_s)}, ETA {duration(eta)}"


class _FreeEncodings:
    """The engine, dropping each observation's cached encoding once its responses are sampled: evaluation
    never trains on it, and a long multi-turn episode (LIBERO: up to 520 turns) would otherwise hold the
    pixel values of every turn."""

    def __init__(self, engine):
        self.engine = engine

    def generate(self, observations, n: int = 1, greedy: bool = False):
        out = self.engine.generate(observations, n=n, greedy=greedy)
        for obs in observations:
            obs.release(encoding_only=True)  # the report may still show the first turn's image
        return out

    def __getattr__(self, name):
        return getattr(self.engine, name)


def check_max_turns(cfg: Config, task) -> None:
    """Multi-turn tasks with a step limit (`required_max_turns(cfg)`) need rollout.max_turns >= it; frozen roles
    (a training setting) are refused."""
    if cfg.rollout.frozen_roles:  # a training setting: evaluating the frozen start beside itself would mean nothing
        raise UsageError("invalid config value for 'rollout.frozen_roles': used in training only; evaluation plays "
                         "every role with model.path")
    need = task.required_max_turns(cfg.task)
    if cfg.rollout.max_turns < need:
        raise ValueError(f"invalid config value for 'rollout.max_turns': {cfg.rollout.max_turns} is below the "
                         f"{need} steps an episode of task {cfg.task.name!r} may take; set rollout.max_turns={need}")


def default_output(cfg: Config) -> str:
    """Where the report goes without `eval.output`: beside the model's folder, named after the model, task and split
    (`runs/x/checkpoints/step_0000100.eval-gui_grounding-eval.json`), so it never lands in another run's folder.
    A model that is not a local folder (a hub id) needs eval.output."""
    path = resolve_path(cfg.model.path)
    if not os.path.isdir(path):
        raise UsageError(f"invalid config value for 'eval.output': required when model.path ({cfg.model.path!r}) is not "
                         "a local folder (the report is otherwise written beside the model's folder)")
    folder = Path(path).resolve()
    return str(folder.parent / f"{folder.name}.eval-{cfg.task.name}-{cfg.eval.split}.json")


def write_report(report: dict, episodes: list, cfg: Config, task, output: str) -> Path:
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    md = task.markdown(report, cfg.task)
    if cfg.eval.dump_images:
        # Failures first: they are what a person opens the images for. sorted() is stable: data order within each.
        chosen = sorted(episodes, key=lambda ep: task.episode_success(ep, cfg.task))[: cfg.eval.dump_images]
        paths = task.dump_examples(chosen, out.with_suffix(""), cfg.task)
        md += examples_markdown(paths, out.parent)
    out.with_suffix(".md").write_text(md)
    return out


def examples_markdown(paths: list[str], base: Path) -> str:
    """A Markdown section linking the annotated examples, relative to the report's folder ("" when none)."""
    if not paths:
        return ""
    rel = [os.path.relpath(p, base) for p in paths]
    return "\n\n## Annotated examples (failures first)\n\n" + "\n".join(f"- [{Path(r).name}]({r})" for r in rel) + "\n"


def main(argv: list[str] | None = None) -> None:
    from vlrl import cli

    cli.main(__doc__, sys.argv[1:] if argv is None else argv, score)


def score(cfg: Config, task, overrides: list[str]) -> dict:
    """Evaluate, write and print the report (what `python vlrl/evaluate.py ...` does) -> the report."""
    output = cfg.eval.output or default_output(cfg)
    given = any(a.split("=", 1)[0].lstrip("+~") in ("model", "model.path") for a in overrides)
    print(f"[vlrl] evaluating model {resolve_path(cfg.model.path)}"
          + ("" if given else " (model.path not given: the config's default policy)")
          + f" on task={cfg.task.name} split={cfg.eval.split} -> {output}", flush=True)
    report, episodes = evaluate(cfg, task)
    path = write_report(report, episodes, cfg, task, output)
    summary = {k: v for k, v in report.items() if isinstance(v, (int, float))}
    print(json.dumps(summary))
    print(task.markdown(report, cfg.task))
    print(f"[vlrl] report: {path}")
    return report


if __name__ == "__main__":
    main()
