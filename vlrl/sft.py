"""Supervised warm start: `python vlrl/sft.py task=NAME [overrides]`.

RL needs a policy that already succeeds sometimes. This trains one on the task's own data: each step
draws fresh training examples (`env.reset(seed)`), asks the task for the reference answer
(the task's `reference_answer(observation, cfg) -> str`, or `reference_ids(...) -> list[int]` when the
answer is tokens, e.g. VLA actions; vlrl/task.py) and minimises the answer-only token NLL.
Same model loading, forward (one vision pass per observation), checkpoints and resume as training;
`sft.curriculum` switches task settings (e.g. the number of widgets) by step.
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
from vlrl.config import Config, TrainerConfig, compose, validate
from vlrl.forward import Row, response_logprobs
from vlrl.metrics import peak_memory_mb, plot_curves, read_metrics
from vlrl.models import base_model
from vlrl.parallel import DataParallel, Strategy
from vlrl.rollout import make_engine
from vlrl.train import evaluate_policy, prompt_seeds, step_seed
from vlrl.trainer import start_run


def task_config_at(cfg: Config, step: int):
    """The task config with the curriculum stage of `step` applied."""
    for stage in cfg.sft.curriculum:
        if step < stage["until"]:
            return dataclasses.replace(cfg.task, **{k: (tuple(v) if isinstance(v, list) else v) for k, v in stage.get("task", {}).items()})
    return cfg.task


def sft_step(model, processor, optimizer, scheduler, rows: list[Row], trainer: TrainerConfig,
             strategy: Strategy | None = None) -> dict:
    """One optimizer step of answer-only NLL (token mean over this process's batch); `trainer`: micro-batch
    size and clipping; `strategy`: the run's distributed backend (default data parallel)."""
    strategy = strategy if strategy is not None else DataParallel()  # sharded ones are refused by run(): no padding here
    n_tokens = sum(len(r.response_ids) for r in rows)
    params = [p for p in model.parameters() if p.requires_grad]
    total, correct = 0.0, 0.0
    for i in range(0, len(rows), trainer.micro_batch_size):
        mb = rows[i : i + trainer.micro_batch_size]
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
    return {"loss": total, "token_acc": correct / n_tokens, "grad_norm": grad_norm.item(), "skipped_nonfinite": float(skipped)}


def run(cfg: Config, task) -> dict:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    if not task.can_imitate:
        raise ValueError(f"task {cfg.task.name!r} has no reference_answer(observation, cfg): nothing to imitate")
    r = start_run(cfg, cfg.trainer.steps)
    accelerator, rank, world, main = r.accelerator, r.rank, r.world, r.main
    model, processor, optimizer, scheduler, logger = r.model, r.processor, r.optimizer, r.scheduler, r.logger
    start, resume_from, out_dir = r.start, r.resume_from, cfg.trainer.output_dir
    if main:
        print(f"[vlrl sft] {'resuming from ' + str(resume_from) if resume_from else 'starting'}: task={cfg.task.name} "
              f"steps={cfg.trainer.steps} batch={cfg.trainer.prompts_per_step} -> {out_dir}", flush=True)

    def save(step: int):
        if main:
            checkpoint.save(out_dir, step, model if cfg.model.lora.r else base_model(model), processor, optimizer, scheduler,
                            {"config": OmegaConf.to_yaml(OmegaConf.structured(cfg))}, keep=cfg.trainer.keep_checkpoints)
            plot_curves(read_metrics(os.path.join(out_dir, "metrics.jsonl"), ["eval/overall"]), ["eval/overall"],
                        os.path.join(out_dir, "eval_curve.png"), title=f"{cfg.task.name}: held-out accuracy (SFT)")
        accelerator.wait_for_everyone()

    last: dict = {}
    t_start = time.perf_counter()
    progress = Progress(TextColumn("[bold]sft"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                        TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[info]}"),
                        disable=not (main and cfg.trainer.progress))
    with progress:
        bar = progress.add_task("sft", total=cfg.trainer.steps, completed=start, info="")
        for step in range(start, cfg.trainer.steps):
            t0 = time.perf_counter()
            torch.manual_seed(step_seed(cfg, step, rank))
            task_cfg = task_config_at(cfg, step)
            env = task.make_env(task_cfg, "train")
            rows = []
            for seed in prompt_seeds(cfg, step, rank, world):
                obs = env.reset(seed)
                rows.append(Row(obs, task.reference_ids(obs, task_cfg, processor.tokenizer)))
            metrics = sft_step(model, processor, optimizer, scheduler, rows, cfg.trainer, r.strategy)
            metrics.update({"lr": scheduler.get_last_lr()[0], "time/step": time.perf_counter() - t0,
                            "time/elapsed": time.perf_counter() - t_start, "memory/peak_mb": peak_memory_mb()})
            done = step + 1
            if cfg.trainer.eval_every and (done % cfg.trainer.eval_every == 0 or done == cfg.trainer.steps):
                eval_cfg = dataclasses.replace(cfg, task=task_cfg)
                engine = make_engine(cfg.rollout, model, processor)
                report, _ = evaluate_policy(engine, task, eval_cfg, cfg.sft.eval_examples, cfg.eval.batch_size)
                metrics.update({f"eval/{k}": v for k, v in report.items() if isinstance(v, (int, float))})
            if done % cfg.trainer.log_every == 0 or "eval/overall" in metrics:
                logger.log(done, metrics)
            progress.update(bar, advance=1, info=f"loss {metrics['loss']:.3f} acc {metrics['token_acc']:.2f}")
            if not cfg.trainer.progress and main and "eval/overall" in metrics:
                print(f"step {done} loss {metrics['loss']:.4f} eval {metrics['eval/overall']:.3f}", flush=True)
            if cfg.trainer.save_every and done % cfg.trainer.save_every == 0:
                save(done)
            last = metrics
    if not (cfg.trainer.save_every and cfg.trainer.steps % cfg.trainer.save_every == 0) and cfg.trainer.steps > start:
        save(cfg.trainer.steps)
    logger.close()
    r.strategy.close()
    return last


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    overrides = [a for a in args if a not in ("--cfg", "job")]
    cfg, task = validate(compose(overrides))
    if "--cfg" in args:
        print(OmegaConf.to_yaml(OmegaConf.structured(cfg)))
        return
    run(cfg, task)


if __name__ == "__main__":
    main()
