"""Train a policy with RL: `python vlrl/train.py task=gui_grounding [overrides]`.

Also `accelerate launch vlrl/train.py ...` (one process per device; on a CPU machine use
`--config_file configs/accelerate/cpu_2proc.yaml`, fsdp2_cpu_2proc.yaml for FSDP2 or
deepspeed_zero3_cpu_2proc.yaml for DeepSpeed ZeRO-3) and the
`vlrl-train` console script. `--cfg job` prints the resolved config, `--help` (or `--help-fields`)
every field with its effective value and help (with `task=NAME`, the task's fields too).

The loop, per step: sample prompts -> roll out G episodes each -> score -> advantages -> update.
"""

from __future__ import annotations

import os
import sys

if __package__ in (None, ""):
    # Run as a script: the package directory would shadow top-level modules; use the repo root.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    sys.path.insert(0, os.path.dirname(_here))

import json
import time

import torch
from omegaconf import OmegaConf

from vlrl import checkpoint
from vlrl.cli import parse_cli  # noqa: F401  (re-exported: vlrl.train.parse_cli)
from vlrl.config import Config, UsageError
from vlrl.critic import episode_values, make_critic
from vlrl.curriculum import SeedCurriculum
from vlrl.metrics import episode_metrics, peak_memory_mb, plot_curves, read_metrics, sample_rows
from vlrl.progress import RL_KEYS, progress_line, run_summary, show_bar
from vlrl.models import base_model, load_model
from vlrl.rollout import FrozenRoles, make_engine, run_episodes
from vlrl.forward import Row
from vlrl.skips import SkipBudget, skip_metrics, skipped_report
from vlrl.algos.roles import RoleBaselines, role_metrics
from vlrl.episode import turn_reward
from vlrl.trainer import TrainRow, build_rows, global_sum, build_turn_rows, episode_advantages, gae_advantages, start_run, update


CURVES = ["reward/mean", "success/rate", "eval/overall"]  # reward_curve.png


def step_seed(cfg: Config, step: int, rank: int) -> int:
    """Sampling seed of one step on one process: a resumed run draws exactly what it would have."""
    return (cfg.trainer.seed * 1_000_003 + step * 7919 + rank * 104_729) % (2**31)


def prompt_seeds(cfg: Config, step: int, rank: int, world: int) -> list[int]:
    """Training prompt seeds: consecutive, disjoint across processes; the data position is the step."""
    n = cfg.trainer.prompts_per_step
    base = cfg.trainer.seed * 10_000_000 + (step * world + rank) * n
    return list(range(base, base + n))


def group_weights(task, cfg: Config, episodes) -> list[float]:
    """Per-episode loss weights, one group of G at a time (the task's `sample_weights` hook)."""
    G, out = cfg.algo.group_size, []
    for i in range(0, len(episodes), G):
        out.extend(task.sample_weights(episodes[i : i + G], cfg.task))
    return out


def informative(episodes, cfg: Config) -> list[bool]:
    """Per episode: does its group carry signal (rewards not all equal)? Used by algo.filter_groups."""
    G, keep = cfg.algo.group_size, []
    for i in range(0, len(episodes), G):
        rewards = [ep.total_reward(cfg.algo.reward_weights) for ep in episodes[i : i + G]]
        keep.extend([max(rewards) > min(rewards)] * len(rewards))  # NaN compares False: dropped
    return keep


def role_rows(episodes, baselines: RoleBaselines, cfg: Config, trained) -> tuple[list[TrainRow], dict[str, float]]:
    """algo.advantage=role: every turn is a row with advantage r_turn - b_role (its observation's role), the
    baselines updated with this step's turns first (all of them, trained roles or not). Rows only for
    the `trained` roles (None: all). Returns (rows, per-role metrics `role/<name>/...`)."""
    turns = [t for ep in episodes for t in ep.turns]
    rewards = [turn_reward(t.rewards, cfg.algo.reward_weights) for t in turns]
    roles = [t.observation.role or "" for t in turns]
    adv = baselines.advantages(rewards, roles)  # every process calls it: the sums are all-reduced
    rows = [TrainRow(Row(t.observation, t.response_ids), t.logprobs, float(a))
            for t, a, role in zip(turns, adv.tolist(), roles)
            if t.response_ids and (trained is None or role in trained)]
    return rows, role_metrics(rewards, roles, adv, baselines.roles, baselines.baselines, trained)


def out_of_time(elapsed_s: float, budget_min: float, device=None) -> bool:
    """Has the run used its wall-clock budget? Every process follows rank 0's clock, so all stop together."""
    flag = torch.tensor([float(elapsed_s >= budget_min * 60)], device=device)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.broadcast(flag, src=0)
    return bool(flag.item())


def budget_steps(cfg, start: int, seconds_before: float, device, main: bool, tag: str) -> range:
    """The steps to run: start .. trainer.steps, or none when a resumed run already used its trainer.max_minutes
    (it stopped on the budget; resuming finishes it instead of training on with a fresh budget)."""
    if cfg.trainer.max_minutes and start < cfg.trainer.steps and out_of_time(seconds_before, cfg.trainer.max_minutes,
                                                                             device):
        if main:
            print(f"{tag} the time budget of {cfg.trainer.max_minutes} min was used before step {start}: "
                  "nothing left to train", flush=True)
        return range(start, start)
    return range(start, cfg.trainer.steps)


def pad_row(episodes) -> TrainRow | None:
    """A zero-advantage row from this process's first episode: what a sharded update pads with."""
    for ep in episodes:
        for turn in ep.turns:
            if turn.response_ids:
                return TrainRow(Row(turn.observation, turn.response_ids), turn.logprobs, 0.0, 1.0, 0.0, 0.0)
    return None


def evaluate_policy(engine, task, cfg: Config, n: int, batch_size: int) -> tuple[dict, list]:
    """Episodes on `cfg.eval.split` (greedy per `eval.greedy`; sampled ones seeded by `eval.seed` without
    disturbing the training RNG) -> the task's report."""
    episodes, stats = [], {}
    with torch.random.fork_rng(devices=[torch.cuda.current_device()] if torch.cuda.is_available() else []):
        torch.manual_seed(cfg.eval.seed)
        for start in range(0, n, batch_size):
            seeds = list(range(start, min(n, start + batch_size)))
            episodes.extend(
                run_episodes(engine, lambda: task.make_env(cfg.task, cfg.eval.split), seeds, 1, cfg.rollout.max_turns,
                             greedy=cfg.eval.greedy, stats=stats)
            )
    return task.report(episodes, cfg.task, skipped=skipped_report(stats)), episodes


def eval_metrics(report: dict) -> dict[str, float]:
    """A task report as log metrics: eval/overall, eval/count, eval/skipped and every number of its breakdown
    (eval/<key>), so a curve of e.g. the N/A rate is in metrics.jsonl, not only the headline."""
    out = {f"eval/{k}": v for k, v in report.items() if isinstance(v, (int, float))}
    out["eval/skipped"] = report.get("skipped", {}).get("count", 0)
    out.update({f"eval/{k}": v for k, v in report.get("breakdown", {}).items()
                if isinstance(v, (int, float)) and f"eval/{k}" not in out})
    return out


def run(cfg: Config, task) -> dict:
    r = start_run(cfg, cfg.trainer.steps * cfg.algo.num_iterations, can_shard=True)
    accelerator, rank, world, main = r.accelerator, r.rank, r.world, r.main
    model, processor, optimizer, scheduler, logger = r.model, r.processor, r.optimizer, r.scheduler, r.logger
    start, resume_from, out_dir, strategy = r.start, r.resume_from, cfg.trainer.output_dir, r.strategy
    # The reference policy is the starting one, not the checkpoint being resumed.
    ref_model = load_model(cfg.model, accelerator.device, trainable=False) if cfg.algo.beta > 0 else None
    engine = make_engine(cfg.rollout, model, processor)
    frozen = cfg.rollout.frozen_roles
    if frozen:  # those roles' turns: the start plays them, they are never trained
        unknown = sorted(set(frozen) - set(task.roles(cfg.task)))
        if unknown:
            raise UsageError(f"invalid config value for 'rollout.frozen_roles': {unknown} are not roles of task "
                             f"{cfg.task.name!r} (its roles: {task.roles(cfg.task)})")
        engine = FrozenRoles(engine, make_engine(cfg.rollout, load_model(cfg.model, accelerator.device, trainable=False),
                                                 processor), frozen)
    learning_roles = [x for x in task.roles(cfg.task) if x not in frozen] if frozen else None
    state = checkpoint.load_state(resume_from) if resume_from else {}
    critic = critic_optimizer = None
    if cfg.algo.advantage == "gae":
        critic, critic_optimizer = make_critic(cfg, model, accelerator.device)
        if "critic" in state:
            critic.load_state_dict(state["critic"])
            critic_optimizer.load_state_dict(state["critic_optimizer"])
    baselines = RoleBaselines(task.roles(cfg.task), cfg.algo.role_decay) if cfg.algo.advantage == "role" else None
    if baselines is not None and "role_baselines" in state:
        baselines.load_state_dict(state["role_baselines"])
    schedule = task.role_schedule(cfg.task)  # multi-role tasks: which roles train at a step, task metrics
    if schedule is not None and "role_schedule" in state:
        schedule.load_state_dict(state["role_schedule"])
    curriculum = None
    if cfg.trainer.curriculum_pool:
        curriculum = SeedCurriculum(cfg.trainer.curriculum_pool, cfg.trainer.curriculum_window,
                                    cfg.trainer.curriculum_temperature, cfg.trainer.curriculum_first_seed,
                                    cfg.trainer.curriculum_weighting)
        curriculum.load_state_dict(state.get("curriculum", {}))
    if main:
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "config.yaml"), "w") as f:
            f.write(OmegaConf.to_yaml(OmegaConf.structured(cfg)))
        where = f"resuming from {resume_from}" if resume_from else "starting"
        print(f"[vlrl] {where}: task={cfg.task.name} model={cfg.model.path} steps={cfg.trainer.steps} "
              f"G={cfg.algo.group_size} processes={world} -> {out_dir}", flush=True)

    def make_train_env():
        return task.make_env(cfg.task, "train")

    def save(step: int):
        full = strategy.full_state(model, optimizer)  # sharded: collectives, every process takes part, rank 0 writes
        if main:
            extra = {"config": OmegaConf.to_yaml(OmegaConf.structured(cfg)), "entry_point": "train",
                     "train_seconds": spent()}
            if critic is not None:
                extra.update(critic=critic.state_dict(), critic_optimizer=critic_optimizer.state_dict())
            if curriculum is not None:
                extra["curriculum"] = curriculum.state_dict()
            if baselines is not None:
                extra["role_baselines"] = baselines.state_dict()
            if schedule is not None:
                extra["role_schedule"] = schedule.state_dict()
            checkpoint.save(out_dir, step, base_model(model) if cfg.model.lora.r == 0 else model, processor,
                            optimizer, scheduler, extra, keep=cfg.trainer.keep_checkpoints, **full)
            plot_curves(read_metrics(os.path.join(out_dir, "metrics.jsonl"), CURVES), CURVES,
                        os.path.join(out_dir, "reward_curve.png"), title=f"{cfg.task.name}: {cfg.algo.name}",
                        panels=[("reward (mean per step)", ["reward/mean"]),
                                ("success rate (train) / held-out score", ["success/rate", "eval/overall"])])
        accelerator.wait_for_everyone()

    last: dict = {}
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    progress = Progress(TextColumn("[bold]train"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                        TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[info]}"),
                        disable=not show_bar(main and cfg.trainer.progress))
    skips = SkipBudget(cfg.trainer.max_skip_fraction, cfg.trainer.skip_window)
    t_start = time.perf_counter()

    def spent() -> float:
        return r.seconds_before + time.perf_counter() - t_start

    steps = budget_steps(cfg, start, r.seconds_before, accelerator.device, main, "[vlrl]")
    final = steps.stop
    with progress:
        bar = progress.add_task("train", total=cfg.trainer.steps, completed=start, info="")
        for step in steps:
            t0 = time.perf_counter()
            torch.manual_seed(step_seed(cfg, step, rank))
            if curriculum is not None:
                gen = torch.Generator().manual_seed(step_seed(cfg, step, rank))
                seeds = curriculum.sample(cfg.trainer.prompts_per_step, gen)
            else:
                seeds = prompt_seeds(cfg, step, rank, world)
            rollout_stats: dict = {}
            with strategy.gathered(model), strategy.autocast():  # sharded: ragged rollouts cannot run sharded forwards
                episodes = run_episodes(engine, make_train_env, seeds, cfg.algo.group_size, cfg.rollout.max_turns,
                                        stats=rollout_stats)
                task_metrics = task.post_rollout(episodes, engine.generate, cfg.task)  # group rewards, extra samples
            # Every process takes the same decision from the global counts (none stops alone).
            attempted, skipped = global_sum([len(seeds), rollout_stats.get("skipped_samples", 0)], accelerator.device)
            skips.record(attempted, skipped, rollout_stats.get("skipped_reasons", {}))
            skips.check(final=step + 1 == cfg.trainer.steps)
            task.score_episodes(episodes, cfg.task)  # batched post-rollout rewards (learned reward models)
            t_rollout = time.perf_counter() - t0
            if curriculum is not None:
                for ep in episodes:
                    curriculum.record(ep.seed, task.episode_success(ep, cfg.task))

            keep = informative(episodes, cfg) if cfg.algo.filter_groups else [True] * len(episodes)
            sel = [i for i, k in enumerate(keep) if k]
            trained = schedule.trained_roles(step) if schedule is not None else None
            if frozen:
                trained = learning_roles if trained is None else [x for x in trained if x not in frozen]
            role_stats: dict = {}
            if baselines is not None:  # multi-role: per-turn r - b_role
                rows, role_stats = role_rows([episodes[i] for i in sel], baselines, cfg, trained)
            elif critic is not None:  # PPO: per-turn GAE advantages from the critic's values
                with strategy.gathered(model), strategy.autocast():
                    values, bootstrap = episode_values(critic, processor, [episodes[i] for i in sel])
                advs, returns = gae_advantages([episodes[i] for i in sel], cfg.algo, values, bootstrap)
                rows = build_turn_rows([episodes[i] for i in sel], advs, values, returns)
            else:  # group-relative: every turn of an episode carries the episode's advantage
                advantages = episode_advantages(episodes, cfg.algo)
                weights = group_weights(task, cfg, episodes)
                rows = build_rows([episodes[i] for i in sel], advantages[sel], [weights[i] for i in sel])
            if trained is not None:  # the untrained roles' turns were played (they shaped rewards) but get no gradient
                rows = [r for r in rows if r.row.observation.role in trained]
            stats = {}
            # Every process updates when any has rows: gradients are reduced across all of them.
            if global_sum([len(rows)], accelerator.device)[0] > 0:
                stats = update(model, processor, optimizer, scheduler, rows, cfg, strategy, ref_model=ref_model,
                               critic=critic, critic_optimizer=critic_optimizer,
                               train_policy=step >= cfg.algo.critic_warmup or critic is None,
                               pad_row=pad_row(episodes))
            stats["groups/kept_frac"] = sum(keep) / max(len(keep), 1)
            engine.sync_weights()
            dt = time.perf_counter() - t0

            metrics = episode_metrics(episodes, cfg.algo.group_size, cfg.algo.reward_weights)
            if episodes:  # the task's own success metric, beside the reward in logs and plots
                metrics["success/rate"] = sum(task.episode_success(ep, cfg.task) for ep in episodes) / len(episodes)
            n_tokens = sum(len(t.response_ids) for ep in episodes for t in ep.turns)
            metrics.update(stats)
            metrics.update(role_stats)
            if schedule is not None:
                metrics.update(schedule.observe(step, episodes, out_dir if main else None))
            metrics.update(skip_metrics(rollout_stats))
            metrics.update(task_metrics)
            metrics.update({
                "time/step": dt, "time/rollout": t_rollout, "time/update": dt - t_rollout,
                "samples_per_s": len(episodes) * world / dt, "tokens_per_s": n_tokens * world / dt,
                "memory/peak_mb": peak_memory_mb(),
            })
            done = step + 1
            if cfg.trainer.eval_every and done % cfg.trainer.eval_every == 0 and cfg.trainer.eval_examples:
                with strategy.gathered(model), strategy.autocast():
                    report, _ = evaluate_policy(engine, task, cfg, cfg.trainer.eval_examples, cfg.eval.batch_size)
                metrics.update(eval_metrics(report))
            if done % cfg.trainer.log_every == 0 or done == cfg.trainer.steps:
                logger.log(done, metrics)
            if cfg.trainer.samples_every and done % cfg.trainer.samples_every == 0:
                logger.log_samples(done, sample_rows(episodes, 4, cfg.algo.reward_weights))
            loss = metrics.get("loss", float("nan"))
            progress.update(bar, advance=1, info=f"reward {metrics['reward/mean']:.3f} loss {loss:.4f}")
            if progress.disable and main and (done % cfg.trainer.log_every == 0 or done == cfg.trainer.steps):
                budget_left = cfg.trainer.max_minutes * 60 - spent() if cfg.trainer.max_minutes else None
                print(progress_line(done, cfg.trainer.steps, metrics, RL_KEYS, time.perf_counter() - t_start,
                                    done - start, budget_left),
                      flush=True)
            last = metrics
            if cfg.trainer.max_minutes and out_of_time(spent(), cfg.trainer.max_minutes, accelerator.device):
                final = done
                if done % cfg.trainer.log_every and done != cfg.trainer.steps:
                    logger.log(done, metrics)
                if main:
                    print(f"[vlrl] time budget of {cfg.trainer.max_minutes} min reached after step {done}", flush=True)
                break
            if cfg.trainer.save_every and done % cfg.trainer.save_every == 0 and done != cfg.trainer.steps:
                save(done)

    if cfg.trainer.eval_examples and not cfg.trainer.eval_every:
        with strategy.gathered(model), strategy.autocast():
            report, _ = evaluate_policy(engine, task, cfg, cfg.trainer.eval_examples, cfg.eval.batch_size)
        last.update(eval_metrics(report))
        logger.log(final, eval_metrics(report))
    if final > start or resume_from is None:
        save(final)
    logger.close()
    if main:
        records = read_metrics(os.path.join(out_dir, "metrics.jsonl"), [k for k, _ in RL_KEYS] + ["eval/overall"])
        print(run_summary(records, RL_KEYS + (("eval/overall", "eval"),), time.perf_counter() - t_start, final - start,
                          out_dir), flush=True)
    strategy.close()
    return last


def main(argv: list[str] | None = None) -> None:
    from vlrl import cli

    result = cli.main(__doc__, sys.argv[1:] if argv is None else argv, lambda cfg, task, _: run(cfg, task))
    if result is not None and os.environ.get("VLRL_PRINT_RESULT"):
        print(json.dumps({k: v for k, v in result.items() if isinstance(v, (int, float))}))


if __name__ == "__main__":
    main()
