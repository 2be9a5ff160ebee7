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

from vlrl import checkpoint, sharding, zero3
from vlrl.algos import aggregate, gae, group_advantages, loss_terms, value_loss
from vlrl.config import AlgoConfig, Config, TrainerConfig
from vlrl.episode import Episode, turn_reward
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


def start_run(cfg: Config, total_updates: int, can_shard: bool = False) -> Run:
    """Processes, seeds, model (from the checkpoint when resuming), optimizer, scheduler and logger.

    Under `accelerate launch` with an FSDP v2 config (configs/accelerate/fsdp2.yaml) and `can_shard`, the
    policy is sharded with torch's fully_shard (vlrl/sharding.py); with a DeepSpeed ZeRO-3 config
    (configs/accelerate/deepspeed_zero3.yaml) accelerate partitions it (vlrl/zero3.py). Other sharding
    engines and combinations not wired stop with an error instead of silently replicating the model."""
    from accelerate import Accelerator
    from accelerate.utils import set_seed
    from omegaconf import OmegaConf

    deepspeed = zero3.requested()
    accelerator = zero3.make_accelerator() if deepspeed else Accelerator(cpu=not torch.cuda.is_available())
    if deepspeed:
        zero3.check_supported(accelerator, cfg, can_shard)
    fsdp = sharding.fsdp_version_requested()
    if accelerator.distributed_type.name == "MEGATRON_LM" or fsdp == 1 or (fsdp and not can_shard):
        what = f"FSDP v{fsdp}" if fsdp else accelerator.distributed_type.name
        raise SystemExit(f"vlrl: {what} sharded training is not supported by this entry point "
                         "(it would silently replicate the model); use FSDP2 or DeepSpeed ZeRO-3 with vlrl/train.py "
                         "(configs/accelerate/fsdp2.yaml, deepspeed_zero3.yaml) or data parallel "
                         "(configs/accelerate/multi_gpu.yaml)")
    if fsdp and cfg.model.lora.r > 0:
        raise SystemExit("vlrl: FSDP2 with LoRA (model.lora.r > 0) is not supported yet; use data parallel for LoRA")
    if cfg.trainer.threads:
        torch.set_num_threads(cfg.trainer.threads)
    set_seed(cfg.trainer.seed)
    out_dir = cfg.trainer.output_dir
    resume_from = checkpoint.find_resume(out_dir, cfg.trainer.resume)
    model_cfg = cfg.model if resume_from is None else dataclasses.replace(cfg.model, path=str(resume_from))
    processor = load_processor(model_cfg)
    model = load_model(model_cfg, accelerator.device)
    if fsdp and accelerator.num_processes > 1:
        sharding.shard(model, sharding.reshard_after_forward_requested())
    optimizer = make_optimizer(model, cfg.trainer)
    scheduler = make_scheduler(optimizer, cfg.trainer, total_updates)
    if deepspeed:
        zero3.wrap(accelerator, model, optimizer, cfg.trainer)
    start = 0
    if resume_from is not None:
        state = checkpoint.load_state(resume_from)
        if deepspeed:  # either format: ZeRO-3 writes the saved values into its partitions
            zero3.load_optimizer_state(model, optimizer, state["optimizer"], state.get("optimizer_format", "by_id"))
        elif state.get("optimizer_format") == "full":  # written by a sharded run (keyed by parameter names)
            sharding.load_optimizer_state(model, optimizer, state["optimizer"])
        else:
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


def _global_max(value: int, device) -> int:
    t = torch.tensor([value], dtype=torch.long, device=device)
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def all_reduce_grads(params: list[torch.nn.Parameter]) -> None:
    """SUM gradients over processes in one flat buffer (params without grad count as zeros)."""
    if not params or not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = _flatten_dense_tensors(grads)
    dist.all_reduce(flat)
    for p, g in zip(params, _unflatten_dense_tensors(flat, grads)):
        if p.grad is None:
            p.grad = g
        else:
            p.grad.copy_(g)


def _policy_loss(model, processor, mb: list[TrainRow], algo: AlgoConfig, temperature: float, ref_model, note,
                 n_seq: int, n_tok: int, n_mb: int, max_completion_length: int) -> torch.Tensor:
    """This micro-batch's share of the step's clipped policy loss (normalised by global counts)."""
    device = next(model.parameters()).device
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
    algo: AlgoConfig,
    trainer: TrainerConfig,
    max_completion_length: int,
    temperature: float,
    ref_model=None,
    critic=None,
    critic_optimizer=None,
    train_policy: bool = True,
    pad_row: TrainRow | None = None,
) -> dict[str, float]:
    """`algo.num_iterations` optimizer steps over `rows` (PPO epochs); returns averaged diagnostics.

    With a `critic` (PPO), each micro-batch also adds ``vf_coef * value_loss`` (rows carry old values
    and returns); `train_policy=False` (critic warm-up) skips the policy loss and keeps a shared
    backbone frozen, so only the critic learns.

    A sharded (FSDP2 or ZeRO-3) model needs the same number of forward/backward passes on every process: a
    process with fewer micro-batches (or no rows) runs zero-weight passes on `pad_row` (or its first micro-batch).
    Under ZeRO-3 the engine reduces the policy's gradients, clips them and steps (vlrl/zero3.py).
    """
    device = next(model.parameters()).device
    engine = zero3.engine(model)
    forward_model = engine if engine is not None else model  # ZeRO-3: micro-batch bookkeeping is in its forward
    params = [p for p in model.parameters() if p.requires_grad]
    critic_params = [p for p in critic.parameters() if p.requires_grad] if critic is not None else []
    batches = micro_batches(rows, trainer.micro_batch_size)
    n_seq, n_tok, n_mb = global_sum(
        [float(len(rows)), float(sum(len(r.row.response_ids) for r in rows)), float(len(batches))], device
    )
    real = len(batches)
    if sharding.is_sharded(model):
        most = _global_max(len(batches), device)
        if most > len(batches):
            if not batches and pad_row is None:
                raise ValueError("a sharded update on a process without rows needs a pad_row")
            batches = batches + [batches[0] if batches else [pad_row]] * (most - len(batches))
    stats: dict[str, list[float]] = {}

    def note(key: str, value) -> None:
        stats.setdefault(key, []).append(float(value))

    def ignore(key: str, value) -> None:
        pass

    for _ in range(algo.num_iterations):
        for k, mb in enumerate(batches):
            pad = k >= real  # a zero-weight pass: keeps FSDP's / ZeRO-3's collectives in step across processes
            loss = torch.zeros((), device=device)
            if train_policy:
                loss = loss + _policy_loss(forward_model, processor, mb, algo, temperature, ref_model, ignore if pad else note,
                                           int(n_seq), int(n_tok), int(n_mb), max_completion_length)
            if critic is not None:
                values = critic(processor, [r.row.observation for r in mb], train_backbone=train_policy or critic.separate)
                old = torch.tensor([r.old_value for r in mb], dtype=torch.float32, device=values.device)
                target = torch.tensor([r.value_target for r in mb], dtype=torch.float32, device=values.device)
                v_loss = value_loss(values, old, target, clip=algo.value_clip or None) / n_mb
                loss = loss + algo.vf_coef * v_loss
                if not pad:
                    note("value_loss", v_loss.item() * n_mb)
            if pad:
                loss = loss * 0.0
            if engine is not None:
                zero3.backward(engine, loss)
            else:
                loss.backward()
            if not pad:
                note("loss", loss.item())
        # ZeRO-3 has already reduce-scattered the policy's gradients in each backward.
        all_reduce_grads((sharding.replicated(params) if engine is None else []) + critic_params)
        if critic_params:
            c_norm = torch.nn.utils.clip_grad_norm_(critic_params, trainer.max_grad_norm if trainer.max_grad_norm > 0 else float("inf"))
            if torch.isfinite(c_norm):
                critic_optimizer.step()
            critic_optimizer.zero_grad(set_to_none=True)
            note("critic_grad_norm", c_norm.item())
        if engine is not None:
            # The engine clips to trainer.max_grad_norm and skips a non-finite step itself (critics are refused
            # under ZeRO-3, so train_policy is always true here).
            grad_norm = zero3.step(engine)
            note("skipped_nonfinite", 0.0 if torch.isfinite(grad_norm) else 1.0)
        else:
            grad_norm = sharding.clip_grad_norm(params, trainer.max_grad_norm if trainer.max_grad_norm > 0 else float("inf"))
            if torch.isfinite(grad_norm):
                if train_policy:
                    optimizer.step()
                note("skipped_nonfinite", 0.0)
            else:
                # A NaN/inf loss or gradient would poison the weights: skip this step, keep going.
                note("skipped_nonfinite", 1.0)
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
