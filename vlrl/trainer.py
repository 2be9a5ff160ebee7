"""The policy update: episodes + advantages -> clipped policy-gradient steps.

Distributed training does not wrap the model in DDP. Each process accumulates gradients of losses
that are already normalised by GLOBAL counts (sequences, tokens, micro-batches of the whole step
over all processes), then one all-reduce SUMs the gradients. The result is the gradient of the
full-batch loss, whatever the number of processes or micro-batches, and processes may hold different
numbers of rows (multi-turn episodes) without collective-count mismatches.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from vlrl import checkpoint
from vlrl.algos import aggregate, group_advantages, loss_terms
from vlrl.config import AlgoConfig, Config, TrainerConfig
from vlrl.episode import Episode
from vlrl.forward import Row, response_logprobs, right_aligned
from vlrl.metrics import RunLogger
from vlrl.models import load_model, load_processor


@dataclass
class TrainRow:
    """One training sequence with its advantage and loss weight."""

    row: Row
    old_logprobs: list[float]
    advantage: float
    weight: float = 1.0


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


def start_run(cfg: Config, total_updates: int) -> Run:
    """Processes, seeds, model (from the checkpoint when resuming), optimizer, scheduler and logger."""
    from accelerate import Accelerator
    from accelerate.utils import set_seed
    from omegaconf import OmegaConf

    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    if accelerator.distributed_type.name in ("FSDP", "DEEPSPEED", "MEGATRON_LM"):
        raise SystemExit(f"vlrl: {accelerator.distributed_type.name} sharded training is not supported by the trainer yet "
                         "(it would silently replicate the model); use data parallel (configs/accelerate/multi_gpu.yaml)")
    if cfg.trainer.threads:
        torch.set_num_threads(cfg.trainer.threads)
    set_seed(cfg.trainer.seed)
    out_dir = cfg.trainer.output_dir
    resume_from = checkpoint.find_resume(out_dir, cfg.trainer.resume)
    model_cfg = cfg.model if resume_from is None else dataclasses.replace(cfg.model, path=str(resume_from))
    processor = load_processor(model_cfg)
    model = load_model(model_cfg, accelerator.device)
    optimizer = make_optimizer(model, cfg.trainer)
    scheduler = make_scheduler(optimizer, cfg.trainer, total_updates)
    start = 0
    if resume_from is not None:
        state = checkpoint.load_state(resume_from)
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        checkpoint.set_rng_state(state["rng"])
        start = state["step"]
    main = accelerator.is_main_process
    logger = RunLogger(out_dir, cfg.trainer.loggers, main, OmegaConf.to_container(OmegaConf.structured(cfg)),
                       cfg.trainer.wandb_project)
    logger.truncate_after(start)
    return Run(accelerator, accelerator.process_index, accelerator.num_processes, main, processor, model,
               optimizer, scheduler, logger, start, resume_from)


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


def _global_sum(values: list[float], device) -> list[float]:
    t = torch.tensor(values, dtype=torch.float64, device=device)
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(t)
    return t.tolist()


def all_reduce_grads(params: list[torch.nn.Parameter]) -> None:
    """SUM gradients over processes in one flat buffer (params without grad count as zeros)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = _flatten_dense_tensors(grads)
    dist.all_reduce(flat)
    for p, g in zip(params, _unflatten_dense_tensors(flat, grads)):
        if p.grad is None:
            p.grad = g
        else:
            p.grad.copy_(g)


def micro_batches(rows: list[TrainRow], size: int) -> list[list[TrainRow]]:
    return [rows[i : i + size] for i in range(0, len(rows), size)]


def update(
    model,
    processor,
    optimizer,
    scheduler,
    rows: list[TrainRow],
    algo: AlgoConfig,
    trainer: TrainerConfig,
    max_completion_length: int,
    temperature: float,
    ref_model=None,
) -> dict[str, float]:
    """`algo.num_iterations` optimizer steps over `rows` (PPO epochs); returns averaged diagnostics."""
    device = next(model.parameters()).device
    params = [p for p in model.parameters() if p.requires_grad]
    batches = micro_batches(rows, trainer.micro_batch_size)
    n_seq, n_tok, n_mb = _global_sum(
        [float(len(rows)), float(sum(len(r.row.response_ids) for r in rows)), float(len(batches))], device
    )
    stats: dict[str, list[float]] = {}

    def note(key: str, value) -> None:
        stats.setdefault(key, []).append(float(value))

    for _ in range(algo.num_iterations):
        for mb in batches:
            logp, mask, entropy = response_logprobs(model, processor, [r.row for r in mb], temperature, with_entropy=True)
            old = right_aligned([r.old_logprobs for r in mb], logp.shape[1]).to(device)
            adv = torch.tensor([r.advantage for r in mb], dtype=torch.float32, device=device)
            ref = None
            if algo.beta > 0:
                with torch.no_grad():
                    ref, _ = response_logprobs(ref_model, processor, [r.row for r in mb], temperature)
            terms = loss_terms(
                logp, old, adv, mask.bool(),
                eps_low=algo.eps_low, eps_high=algo.eps_high, ref_logp=ref, beta=algo.beta,
                kl=algo.kl, importance_level=algo.importance_level,
            )
            loss = aggregate(
                terms.per_token_loss, mask.bool(), algo.loss_type,
                num_sequences=int(n_seq), num_tokens=int(n_tok), num_microbatches=int(n_mb),
                max_completion_length=max_completion_length, length_norm=algo.length_norm,
                seq_weights=(torch.tensor([r.weight for r in mb], dtype=torch.float32, device=device)
                             if algo.loss_type == "gui_g1" else None),
            )
            loss.backward()
            note("loss", loss.item())
            note("entropy", entropy)
            for k, v in terms.diagnostics.items():
                note(k, v.item())
        all_reduce_grads(params)
        grad_norm = torch.nn.utils.clip_grad_norm_(params, trainer.max_grad_norm if trainer.max_grad_norm > 0 else float("inf"))
        if torch.isfinite(grad_norm):
            optimizer.step()
            note("skipped_nonfinite", 0.0)
        else:
            # A NaN/inf loss or gradient would poison the weights: skip this step, keep going.
            note("skipped_nonfinite", 1.0)
        note("grad_norm", grad_norm.item())
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)

    out = {k: sum(v) / len(v) for k, v in stats.items() if k not in ("loss", "skipped_nonfinite")}
    # Per micro-batch values are shares of the step loss: their sum per iteration is the loss.
    out["loss"] = sum(stats.get("loss", [0.0])) / algo.num_iterations
    out["skipped_nonfinite"] = sum(stats.get("skipped_nonfinite", [0.0]))
    out["lr"] = scheduler.get_last_lr()[0]
    return out
