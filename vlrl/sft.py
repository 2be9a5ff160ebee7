"""Supervised warm start: `python vlrl/sft.py task=NAME [overrides]`.

RL needs a policy that already succeeds sometimes. This trains one on the task's own data: each step
draws fresh training examples (`env.reset(seed)`), asks the task for the reference answer
(the task's `reference_answer(observation, cfg) -> str`, or `reference_ids(...) -> list[int]` when the
answer is tokens, e.g. VLA actions; vlrl/task.py) and minimises the answer-only token NLL.
Same model loading, forward (one vision pass per observation), checkpoints and resume as training;
`sft.curriculum` switches task settings (e.g. the number of widgets) by step.

    python vlrl/sft.py task=NAME trainer.output_dir=DIR [key=value ...]
    python vlrl/sft.py --cfg job ...     the resolved config, nothing run
    python vlrl/sft.py --help ...        every field with its effective value (task=NAME: the task's too)
"""

from __future__ import annotations

import os
import sys

if __package__ in (None, ""):
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    sys.path.insert(0, os.path.dirname(_here))

import dataclasses
import time

import torch
from omegaconf import OmegaConf

from vlrl import checkpoint
from vlrl.config import Config, TrainerConfig, UsageError
from vlrl.forward import Row, response_logprobs
from vlrl.metrics import peak_memory_mb, plot_curves, prompt_text, read_metrics
from vlrl.models import base_model
from vlrl.parallel import DataParallel, Strategy
from vlrl.rollout import make_engine
from vlrl.progress import SFT_KEYS, progress_line, run_summary, show_bar
from vlrl.skips import SkipBudget, count_skip, skip_metrics
from vlrl.train import budget_steps, eval_metrics, evaluate_policy, out_of_time, prompt_seeds, step_seed
from vlrl.trainer import global_sum, start_run


def task_config_at(cfg: Config, step: int):
    """The task config with the curriculum stage of `step` applied."""
    for stage in cfg.sft.curriculum:
        if step < stage["until"]:
            return dataclasses.replace(cfg.task, **{k: (tuple(v) if isinstance(v, list) else v) for k, v in stage.get("task", {}).items()})
    return cfg.task


def sft_step(model, processor, optimizer, scheduler, rows: list[Row], trainer: TrainerConfig,
             strategy: Strategy | None = None) -> dict:
    """One optimizer step of answer-only NLL, the token mean over the step's rows on ALL processes: each process
    divides by the global token count and the strategy SUMs gradients (as in trainer.update), so 2 processes give
    the update of 1 process with accumulation. `trainer`: micro-batch size and clipping; `strategy`: the run's
    distributed backend (default data parallel)."""
    strategy = strategy if strategy is not None else DataParallel()  # sharded ones are refused by run(): no padding here
    params = [p for p in model.parameters() if p.requires_grad]
    device = next(model.parameters()).device
    (n_tokens,) = global_sum([float(sum(len(r.response_ids) for r in rows))], device)
    total, correct = 0.0, 0.0
    for i in range(0, len(rows), trainer.micro_batch_size):
        mb = rows[i : i + trainer.micro_batch_size]
        with strategy.autocast():
            logp, mask = response_logprobs(strategy.forward_model(model), processor, mb)
            loss = -(logp * mask).sum() / n_tokens
        strategy.backward(loss)
        total += loss.item()
        correct += float(((logp > -0.693) * mask).sum())  # token prob > 0.5: a cheap accuracy proxy
    strategy.reduce_gradients(params)
    grad_norm = strategy.clip_and_step(optimizer, params, trainer.max_grad_norm)
    skipped = not torch.isfinite(grad_norm)
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    total, correct = global_sum([total, correct], device)  # every process's share: the step's loss and accuracy
    return {"loss": total, "token_acc": correct / max(n_tokens, 1.0), "grad_norm": grad_norm.item(),
            "skipped_nonfinite": float(skipped)}


def check_supported(cfg: Config) -> None:
    """Refuse the trainer settings of RL runs that have no meaning here (they would be silently ignored)."""
    if cfg.trainer.curriculum_pool:
        raise UsageError("invalid config value for 'trainer.curriculum_pool': the success-rate seed curriculum needs "
                         "RL outcomes; vlrl/sft.py draws fresh examples every step (its own schedule: sft.curriculum)")
    if cfg.rollout.frozen_roles:
        raise UsageError("invalid config value for 'rollout.frozen_roles': an RL training setting (who plays which role "
                         "in self-play); vlrl/sft.py imitates reference answers and plays no games")
    if cfg.trainer.eval_examples:
        raise UsageError("invalid config value for 'trainer.eval_examples': vlrl/sft.py scores sft.eval_examples held-out "
                         "examples at each trainer.eval_every; set sft.eval_examples instead")


def batch(task, task_cfg, seeds: list[int], tokenizer, stats: dict) -> list[Row]:
    """(observation, reference ids) rows of `seeds`; a seed whose reset fails (unreadable sample) is counted in
    `stats` (vlrl.skips) and left out, as in RL rollouts."""
    env, rows = task.make_env(task_cfg, "train"), []
    for seed in seeds:
        try:
            obs = env.reset(seed)
        except (OSError, ValueError) as e:
            count_skip(stats, getattr(e, "reason", None) or type(e).__name__)
            continue
        rows.append(Row(obs, task.reference_ids(obs, task_cfg, tokenizer)))
    return rows


def completions(engine, processor, rows: list[Row], n: int = 4) -> list[dict]:
    """Greedy completions of the first `n` rows beside their reference answers (the SFT sample table)."""
    rows = rows[:n]
    samples = engine.generate([r.observation for r in rows], n=1, greedy=True)
    tok = processor.tokenizer
    return [{"prompt": prompt_text(r.observation)[-200:], "response": s[0].text[:200],
             "reference": tok.decode(r.response_ids, skip_special_tokens=True)[:200]} for r, s in zip(rows, samples)]


def run(cfg: Config, task) -> dict:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    if not task.can_imitate:
        raise UsageError(f"task {cfg.task.name!r} has no reference_answer(observation, cfg): nothing to imitate")
    check_supported(cfg)
    r = start_run(cfg, cfg.trainer.steps, entry_point="sft")
    accelerator, rank, world, main = r.accelerator, r.rank, r.world, r.main
    model, processor, optimizer, scheduler, logger = r.model, r.processor, r.optimizer, r.scheduler, r.logger
    start, resume_from, out_dir = r.start, r.resume_from, cfg.trainer.output_dir
    if main:
        print(f"[vlrl sft] {'resuming from ' + str(resume_from) if resume_from else 'starting'}: task={cfg.task.name} "
              f"model={cfg.model.path} steps={cfg.trainer.steps} batch={cfg.trainer.prompts_per_step} -> {out_dir}", flush=True)
    saved = set()

    def save(step: int):
        if main:
            checkpoint.save(out_dir, step, model if cfg.model.lora.r else base_model(model), processor, optimizer, scheduler,
                            {"config": OmegaConf.to_yaml(OmegaConf.structured(cfg)), "entry_point": "sft",
                             "train_seconds": spent()},
                            keep=cfg.trainer.keep_checkpoints)
            keys = ["loss", "token_acc", "eval/overall"]
            plot_curves(read_metrics(os.path.join(out_dir, "metrics.jsonl"), keys), keys,
                        os.path.join(out_dir, "eval_curve.png"), title=f"{cfg.task.name}: supervised warm start",
                        panels=[("answer-token NLL", ["loss"]),
                                ("accuracy", ["token_acc", "eval/overall"])])
        saved.add(step)
        accelerator.wait_for_everyone()

    last: dict = {}
    skips = SkipBudget(cfg.trainer.max_skip_fraction, cfg.trainer.skip_window)
    engine = make_engine(cfg.rollout, model, processor)
    t_start = time.perf_counter()

    def spent() -> float:
        return r.seconds_before + time.perf_counter() - t_start

    steps = budget_steps(cfg, start, r.seconds_before, accelerator.device, main, "[vlrl sft]")
    final = steps.stop
    progress = Progress(TextColumn("[bold]sft"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                        TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[info]}"),
                        disable=not show_bar(main and cfg.trainer.progress))
    with progress:
        bar = progress.add_task("sft", total=cfg.trainer.steps, completed=start, info="")
        for step in steps:
            t0 = time.perf_counter()
            torch.manual_seed(step_seed(cfg, step, rank))
            task_cfg = task_config_at(cfg, step)
            seeds, stats = prompt_seeds(cfg, step, rank, world), {}
            rows = batch(task, task_cfg, seeds, processor.tokenizer, stats)
            attempted, skipped = global_sum([len(seeds), stats.get("skipped_samples", 0)], accelerator.device)
            skips.record(attempted, skipped, stats.get("skipped_reasons", {}))
            skips.check(final=step + 1 == cfg.trainer.steps)
            metrics = sft_step(model, processor, optimizer, scheduler, rows, cfg.trainer, r.strategy)
            metrics.update(skip_metrics(stats))
            metrics.update({"lr": scheduler.get_last_lr()[0], "time/step": time.perf_counter() - t0,
                            "time/elapsed": time.perf_counter() - t_start, "memory/peak_mb": peak_memory_mb()})
            done = step + 1
            if cfg.trainer.eval_every and (done % cfg.trainer.eval_every == 0 or done == cfg.trainer.steps):
                eval_cfg = dataclasses.replace(cfg, task=task_cfg)
                with r.strategy.autocast():
                    report, _ = evaluate_policy(engine, task, eval_cfg, cfg.sft.eval_examples, cfg.eval.batch_size)
                metrics.update(eval_metrics(report))
            if done % cfg.trainer.log_every == 0 or "eval/overall" in metrics:
                logger.log(done, metrics)
            if cfg.trainer.samples_every and done % cfg.trainer.samples_every == 0 and rows:
                with torch.random.fork_rng(devices=[]), r.strategy.autocast():
                    logger.log_samples(done, completions(engine, processor, rows))
            progress.update(bar, advance=1, info=f"loss {metrics['loss']:.3f} acc {metrics['token_acc']:.2f}")
            if progress.disable and main and (done % cfg.trainer.log_every == 0 or "eval/overall" in metrics):
                budget_left = cfg.trainer.max_minutes * 60 - spent() if cfg.trainer.max_minutes else None
                print(progress_line(done, cfg.trainer.steps, metrics, SFT_KEYS, time.perf_counter() - t_start,
                                    done - start, budget_left),
                      flush=True)
            last = metrics
            if cfg.trainer.max_minutes and out_of_time(spent(), cfg.trainer.max_minutes, accelerator.device):
                final = done
                if done % cfg.trainer.log_every and "eval/overall" not in metrics:
                    logger.log(done, metrics)
                if main:
                    print(f"[vlrl sft] time budget of {cfg.trainer.max_minutes} min reached after step {done}", flush=True)
                break
            if cfg.trainer.save_every and done % cfg.trainer.save_every == 0:
                save(done)
    if final > start and final not in saved:
        save(final)
    logger.close()
    if main:
        records = read_metrics(os.path.join(out_dir, "metrics.jsonl"), [k for k, _ in SFT_KEYS])
        print(run_summary(records, SFT_KEYS, time.perf_counter() - t_start, final - start, out_dir), flush=True)
    r.strategy.close()
    return last


def main(argv: list[str] | None = None) -> None:
    from vlrl import cli

    cli.main(__doc__, sys.argv[1:] if argv is None else argv, lambda cfg, task, _: run(cfg, task),
             print_cfg=lambda cfg: OmegaConf.to_yaml(OmegaConf.structured(cfg)))


if __name__ == "__main__":
    main()
