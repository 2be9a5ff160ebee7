"""The policy update: episodes + advantages -> clipped policy-gradient steps.

Each process accumulates gradients of losses that are already normalised by GLOBAL counts (sequences,
tokens, micro-batches of the whole step over all processes); the run's parallel strategy (vlrl/parallel/:
data parallel, FSDP2 or ZeRO-3) SUMs them over processes. The result is the gradient of the full-batch
loss, whatever the number of processes or micro-batches, and processes may hold different numbers of rows
(multi-turn episodes).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.distributed as dist

from vlrl import checkpoint, runs, shared_prefix
from vlrl.algos import aggregate, gae, group_advantages, loss_terms, value_loss
from vlrl.config import AlgoConfig, Config, RolloutConfig, TrainerConfig
from vlrl.episode import Episode, turn_reward
from vlrl.forward import Row, response_logprobs, right_aligned
from vlrl.metrics import RunLogger
from vlrl.models import load_model, load_processor
from vlrl.parallel import DataParallel, Strategy, make_strategy, model_config


@dataclass
class TrainRow:
    """One training sequence with its advantage and loss weight."""

    row: Row
    old_logprobs: list[float]
    advantage: float
    weight: float = 1.0
    old_value: float | None = None  # critic's value of the observation at rollout time (PPO)
    value_target: float | None = None  # GAE return: the value loss's target


@dataclass
class Run:
    """What a training entry point (train.py, sft.py) starts from: processes, model, optimizer, position."""

    accelerator: object
    rank: int
    world: int
    main: bool
    processor: object
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: object
    logger: RunLogger
    start: int  # first step to run (the checkpoint's step when resuming)
    resume_from: object  # the checkpoint directory resumed from, or None
    strategy: Strategy  # the distributed backend (vlrl/parallel/): rollouts, update, checkpoints go through it
    # Training seconds the run spent before this process (from the checkpoint): a resumed run's trainer.max_minutes
    # counts them, so stopping and resuming does not buy it a fresh wall-clock budget.
    seconds_before: float = 0.0


class UpdateConfig(Protocol):
    """What `update` reads: vlrl.config.Config, or any config with these three parts."""

    algo: AlgoConfig
    trainer: TrainerConfig
    rollout: RolloutConfig  # max_new_tokens (dr_grpo's max completion length) and temperature


def start_run(cfg: Config, total_updates: int, can_shard: bool = False, entry_point: str = "train") -> Run:
    """Processes, parallel strategy, seeds, model (from the checkpoint when resuming), optimizer, scheduler
    and logger. The strategy is chosen from the `accelerate launch` environment (vlrl.parallel.make_strategy;
    `can_shard`: whether the entry point supports a sharded policy). The output folder is checked first
    (vlrl/runs.py: resume=auto continues only the same run; another run's folder needs trainer.overwrite);
    `entry_point`: "train" or "sft", the kind of run its checkpoints record."""
    from accelerate.utils import set_seed
    from omegaconf import OmegaConf

    strategy = make_strategy(cfg, can_shard)
    shared_prefix.resolve(cfg.trainer.shared_prefix, strategy.name)  # refused before anything loads
    out_dir = cfg.trainer.output_dir
    resume_from = checkpoint.find_resume(out_dir, cfg.trainer.resume)
    state = checkpoint.load_state(resume_from) if resume_from is not None else None
    if state is not None and cfg.trainer.resume == "auto":
        runs.check_resume(state, resume_from, cfg, entry_point)
    previous = runs.check_output_dir(cfg, resume_from)
    strategy.accelerator.wait_for_everyone()  # every process has looked before the main one changes the folder
    if strategy.accelerator.is_main_process:
        runs.remove_run(out_dir, previous)
    # What the launch asks of the weights (float32 masters under bf16 autocast, activation checkpointing), on the
    # run's config: the reference model and a separate critic load the same way, and config.yaml records it.
    cfg.model = model_config(cfg.model, strategy)
    accelerator = strategy.accelerator
    if cfg.trainer.threads:
        torch.set_num_threads(cfg.trainer.threads)
    set_seed(cfg.trainer.seed)
    model_cfg = cfg.model if resume_from is None else dataclasses.replace(cfg.model, path=str(resume_from))
    processor = load_processor(model_cfg)
    model = strategy.shard(load_model(model_cfg, accelerator.device))  # before the optimizer sees the parameters
    optimizer = make_optimizer(model, cfg.trainer)
    scheduler = make_scheduler(optimizer, cfg.trainer, total_updates)
    strategy.wrap(model, optimizer)
    start, seconds_before = 0, 0.0
    if state is not None:
        strategy.load_optimizer_state(model, optimizer, state)
        scheduler.load_state_dict(state["scheduler"])
        checkpoint.set_rng_state(state["rng"])
        start = state["step"]
        seconds_before = float(state.get("train_seconds", 0.0))  # checkpoints written before it was kept: 0
    main = accelerator.is_main_process
    logger = RunLogger(out_dir, cfg.trainer.loggers, main, OmegaConf.to_container(OmegaConf.structured(cfg)),
                       cfg.trainer.wandb_project)
    logger.truncate_after(start)
    return Run(accelerator, accelerator.process_index, accelerator.num_processes, main, processor, model,
               optimizer, scheduler, logger, start, resume_from, strategy, seconds_before)


def make_optimizer(model, cfg: TrainerConfig) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("no trainable parameters (model.freeze_vision / LoRA settings leave nothing to train)")
    return torch.optim.AdamW(params, lr=cfg.lr, betas=tuple(cfg.adam_betas), weight_decay=cfg.weight_decay)


def make_scheduler(optimizer, cfg: TrainerConfig, total_updates: int):
    def factor(i: int) -> float:
        if cfg.warmup_steps and i < cfg.warmup_steps:
            return (i + 1) / cfg.warmup_steps
        if cfg.lr_schedule == "constant":
            return 1.0
        progress = (i - cfg.warmup_steps) / max(1, total_updates - cfg.warmup_steps)
        progress = min(max(progress, 0.0), 1.0)
        if cfg.lr_schedule == "linear":
            return 1.0 - progress
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def episode_advantages(episodes: list[Episode], algo: AlgoConfig) -> torch.Tensor:
    """Group-relative advantage per episode, [len(episodes)]; unscorable episodes get 0."""
    rewards = torch.tensor([ep.total_reward(algo.reward_weights) for ep in episodes], dtype=torch.float32)
    return group_advantages(rewards, algo.group_size, scale=algo.scale)


def gae_advantages(episodes: list[Episode], algo: AlgoConfig, values: list[list[float]],
                   bootstrap: list[float | None]) -> tuple[list[list[float]], list[list[float]]]:
    """Per-turn GAE advantages and returns of each episode.

    values[i]: [T_i] critic values of episode i's observations; bootstrap[i]: value of the observation
    after its last turn when that turn was truncated (else ignored). An episode with an unscorable
    reward (None) gets zero advantages and its own values as returns (no signal either way).
    With `algo.scale == "batch"` the advantages of all turns are whitened together.
    """
    advs, rets = [], []
    for ep, v, boot in zip(episodes, values, bootstrap):
        rewards = torch.tensor([turn_reward(t.rewards, algo.reward_weights) for t in ep.turns], dtype=torch.float64)
        vals = torch.tensor(v, dtype=torch.float64)
        if bool(torch.isnan(rewards).any()):
            advs.append([0.0] * len(v))
            rets.append(list(v))
            continue
        dones = torch.tensor([t.done for t in ep.turns])
        truncated = torch.tensor([t.truncated for t in ep.turns])
        next_values = torch.zeros_like(vals)
        next_values[-1] = boot if boot is not None else 0.0
        a, r = gae(rewards, vals, dones, algo.gamma, algo.lam, truncated=truncated, next_values=next_values)
        advs.append(a.tolist())
        rets.append(r.tolist())
    if algo.scale == "batch":
        flat = torch.tensor([x for a in advs for x in a], dtype=torch.float64)
        if flat.numel() > 1:
            mean, std = flat.mean().item(), flat.std().item()
            advs = [[(x - mean) / (std + 1e-4) for x in a] for a in advs]
    return advs, rets


def build_turn_rows(episodes: list[Episode], advantages: list[list[float]], values: list[list[float]],
                    returns: list[list[float]]) -> list[TrainRow]:
    """Every turn becomes a row with its own advantage, rollout-time value and return (PPO)."""
    rows = []
    for ep, adv, val, ret in zip(episodes, advantages, values, returns):
        for turn, a, v, r in zip(ep.turns, adv, val, ret):
            if turn.response_ids:
                rows.append(TrainRow(Row(turn.observation, turn.response_ids), turn.logprobs, a, 1.0, v, r))
    return rows


def build_rows(episodes: list[Episode], advantages: torch.Tensor, weights: list[float] | None = None) -> list[TrainRow]:
    """Every turn of every episode becomes a row carrying its episode's advantage."""
    rows = []
    for i, ep in enumerate(episodes):
        w = 1.0 if weights is None else float(weights[i])
        for turn in ep.turns:
            if not turn.response_ids:
                continue
            rows.append(TrainRow(Row(turn.observation, turn.response_ids), turn.logprobs, float(advantages[i]), w))
    return rows


def global_sum(values: list[float], device) -> list[float]:
    t = torch.tensor(values, dtype=torch.float64, device=device)
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(t)
    return t.tolist()


def _policy_loss(model, processor, mb: list[TrainRow], algo: AlgoConfig, temperature: float, ref_model, note,
                 n_seq: int, n_tok: int, n_mb: int, max_completion_length: int, shared: bool = False) -> torch.Tensor:
    """This micro-batch's share of the step's clipped policy loss (normalised by global counts).
    `shared`: each distinct prompt through the language model once (vlrl/shared_prefix.py)."""
    device = next(model.parameters()).device
    logp, mask, entropy = response_logprobs(model, processor, [r.row for r in mb], temperature, with_entropy=True,
                                            shared_prefix=shared)
    old = right_aligned([r.old_logprobs for r in mb], logp.shape[1]).to(device)
    adv = torch.tensor([r.advantage for r in mb], dtype=torch.float32, device=device)
    ref = None
    if algo.beta > 0:
        with torch.no_grad():
            ref, _ = response_logprobs(ref_model, processor, [r.row for r in mb], temperature,
                                       shared_prefix=shared)
    terms = loss_terms(
        logp, old, adv, mask.bool(),
        eps_low=algo.eps_low, eps_high=algo.eps_high, ref_logp=ref, beta=algo.beta,
        kl=algo.kl, importance_level=algo.importance_level,
    )
    note("entropy", entropy)
    for k, v in terms.diagnostics.items():
        note(k, v.item())
    return aggregate(
        terms.per_token_loss, mask.bool(), algo.loss_type,
        num_sequences=n_seq, num_tokens=n_tok, num_microbatches=n_mb,
        max_completion_length=max_completion_length, length_norm=algo.length_norm,
        seq_weights=(torch.tensor([r.weight for r in mb], dtype=torch.float32, device=device)
                     if algo.loss_type == "gui_g1" else None),
    )


def micro_batches(rows: list[TrainRow], size: int) -> list[list[TrainRow]]:
    return [rows[i : i + size] for i in range(0, len(rows), size)]


def update(
    model,
    processor,
    optimizer,
    scheduler,
    rows: list[TrainRow],
    cfg: UpdateConfig,
    strategy: Strategy | None = None,
    *,
    ref_model=None,
    critic=None,
    critic_optimizer=None,
    train_policy: bool = True,
    pad_row: TrainRow | None = None,
) -> dict[str, float]:
    """`cfg.algo.num_iterations` optimizer steps over `rows` (PPO epochs); returns averaged diagnostics.

    `cfg`: the run's Config (algo; trainer: micro-batch size, clipping; rollout: temperature, and
    max_new_tokens as dr_grpo's max completion length). `strategy`: the run's distributed backend
    (vlrl/parallel/; default data parallel, which is also the single-process path).

    With a `critic` (PPO), each micro-batch also adds ``vf_coef * value_loss`` (rows carry old values
    and returns); `train_policy=False` (critic warm-up) skips the policy loss and keeps a shared
    backbone frozen, so only the critic learns.

    A sharded strategy needs the same number of forward/backward passes on every process: a process with
    fewer micro-batches (or no rows) runs zero-weight passes on `pad_row` (or its first micro-batch).
    """
    algo, trainer = cfg.algo, cfg.trainer
    strategy = strategy if strategy is not None else DataParallel()
    device = next(model.parameters()).device
    forward_model = strategy.forward_model(model)
    params = [p for p in model.parameters() if p.requires_grad]
    critic_params = [p for p in critic.parameters() if p.requires_grad] if critic is not None else []
    shared = shared_prefix.resolve(trainer.shared_prefix, strategy.name)
    batches = micro_batches(rows, trainer.micro_batch_size)
    n_seq, n_tok, n_mb = global_sum(
        [float(len(rows)), float(sum(len(r.row.response_ids) for r in rows)), float(len(batches))], device
    )
    real = len(batches)
    batches = strategy.lockstep(batches, pad_row, device)
    stats: dict[str, list[float]] = {}

    def note(key: str, value) -> None:
        stats.setdefault(key, []).append(float(value))

    def ignore(key: str, value) -> None:
        pass

    for _ in range(algo.num_iterations):
        for k, mb in enumerate(batches):
            pad = k >= real  # a zero-weight pass: keeps a sharded backend's collectives in step across processes
            loss = torch.zeros((), device=device)
            with strategy.autocast():  # forwards only: backward follows the forward's dtypes
                if train_policy:
                    loss = loss + _policy_loss(forward_model, processor, mb, algo, cfg.rollout.temperature, ref_model,
                                               ignore if pad else note, int(n_seq), int(n_tok), int(n_mb),
                                               cfg.rollout.max_new_tokens, shared)
                if critic is not None:
                    values = critic(processor, [r.row.observation for r in mb],
                                    train_backbone=train_policy or critic.separate).float()
                    old = torch.tensor([r.old_value for r in mb], dtype=torch.float32, device=values.device)
                    target = torch.tensor([r.value_target for r in mb], dtype=torch.float32, device=values.device)
                    v_loss = value_loss(values, old, target, clip=algo.value_clip or None) / n_mb
                    loss = loss + algo.vf_coef * v_loss
                    if not pad:
                        note("value_loss", v_loss.item() * n_mb)
            if pad:
                loss = loss * 0.0
            strategy.backward(loss)
            if not pad:
                note("loss", loss.item())
        strategy.reduce_gradients(params, critic_params)
        if critic_params:
            c_norm = torch.nn.utils.clip_grad_norm_(critic_params, trainer.max_grad_norm if trainer.max_grad_norm > 0 else float("inf"))
            if torch.isfinite(c_norm):
                critic_optimizer.step()
            critic_optimizer.zero_grad(set_to_none=True)
            note("critic_grad_norm", c_norm.item())
        # A NaN/inf loss or gradient would poison the weights: the step is skipped, training goes on.
        grad_norm = strategy.clip_and_step(optimizer, params, trainer.max_grad_norm, step=train_policy)
        note("skipped_nonfinite", 0.0 if torch.isfinite(grad_norm) else 1.0)
        note("grad_norm", grad_norm.item())
        if train_policy:
            scheduler.step()
        optimizer.zero_grad(set_to_none=True)

    out = {k: sum(v) / len(v) for k, v in stats.items() if k not in ("loss", "skipped_nonfinite")}
    # Per micro-batch values are shares of the step loss: their sum per iteration is the loss.
    out["loss"] = sum(stats.get("loss", [0.0])) / algo.num_iterations
    out["skipped_nonfinite"] = sum(stats.get("skipped_nonfinite", [0.0]))
    out["lr"] = scheduler.get_last_lr()[0]
    return out
