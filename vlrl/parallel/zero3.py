"""DeepSpeed ZeRO-3 of the policy, through accelerate (`accelerate launch` with a DeepSpeed config).

accelerate builds the DeepSpeed engine (`accelerator.prepare(model, optimizer)`); vlrl keeps driving the
update itself, as it does for data parallel and FSDP2 (vlrl/trainer.py), which needs:

* the model stays the plain HF module everywhere (rollouts, checkpoints, `base_model`); the engine is
  held by the `Zero3` strategy. Training forwards go through the engine (`forward_model`): its forward is
  what tells ZeRO-3 that a new micro-batch starts, without it every backward would overwrite the previous
  micro-batch's gradient partition instead of adding to it;
* one `engine.step()` per optimizer step after a variable number of micro-batches: the DeepSpeed config
  gets gradient_accumulation_steps 1 and every backward is unscaled (`scale_wrt_gas=False`). Each
  backward reduce-scatters, so every process runs the same number of them (`Strategy.lockstep` pads);
* gradients SUM over processes (losses carry the global normalisation) while ZeRO-3 averages them: the
  loss handed to `engine.backward` is multiplied by the number of processes;
* clipping (trainer.max_grad_norm, written into the DeepSpeed config) and skipping a step whose gradient
  norm is not finite happen inside `engine.step()`;
* rollouts, evaluation and checkpoints need full weights: `gathered()` all-gathers every parameter once
  and takes ZeRO-3's per-module hooks off meanwhile (each hook would re-partition its module after its
  forward, so the next forward would all-gather again: a collective per forward, which ragged rollouts
  cannot keep in step);
* checkpoints hold full weights and a parameter-name-keyed optimizer state (`optimizer_format: full`,
  the format FSDP2 runs write), so they load with any number of processes and any engine.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from vlrl.parallel.base import Strategy, all_reduce_grads


class Zero3(Strategy):
    name = "zero3"
    sharded = True

    def __init__(self, accelerator, trainer):
        super().__init__(accelerator)
        self.trainer = trainer  # TrainerConfig: micro-batch size and clipping go into the DeepSpeed config
        self.engine = None  # set by wrap()

    def autocast(self):
        from contextlib import nullcontext

        return nullcontext()  # DeepSpeed runs bf16 itself (accelerate writes mixed_precision into its config)

    def wrap(self, model: torch.nn.Module, optimizer) -> None:
        self.engine = wrap(self.accelerator, model, optimizer, self.trainer)

    def load_optimizer_state(self, model: torch.nn.Module, optimizer, state: dict) -> None:
        # either format: ZeRO-3 writes the saved values into its partitions
        load_optimizer_state(self.engine, model, optimizer, state["optimizer"], state.get("optimizer_format", "by_id"))

    def gathered(self, model: torch.nn.Module):
        return gathered(self.engine, model)

    def forward_model(self, model: torch.nn.Module):
        return self.engine if self.engine is not None else model  # micro-batch bookkeeping is in its forward

    def backward(self, loss: torch.Tensor) -> None:
        backward(self.engine, loss)

    def reduce_gradients(self, params: list, extra: list = ()) -> None:
        all_reduce_grads(list(extra))  # the policy's gradients were reduce-scattered in each backward

    def clip_and_step(self, optimizer, params: list, max_grad_norm: float, step: bool = True) -> torch.Tensor:
        # The engine clips to trainer.max_grad_norm (written into its config by wrap) and skips a non-finite
        # step itself.
        if not step:
            raise ValueError("ZeRO-3 cannot leave out the policy's step (a PPO critic warm-up is not supported)")
        return engine_step(self.engine)

    def full_model_state(self, model: torch.nn.Module) -> dict:
        return full_model_state(model)

    def full_state(self, model: torch.nn.Module, optimizer) -> dict:
        return {"model_state": full_model_state(model),
                "optimizer_state": full_optimizer_state(self.engine, model, optimizer)}

    def close(self) -> None:
        if self.engine is not None:  # its parameter coordinator and hooks go first: they own prefetched gathers
            self.engine.destroy()
            self.engine = None
        super().close()


def requested() -> bool:
    """Was this process started by `accelerate launch` with a DeepSpeed config? (accelerate's own reading of the
    variable, so this agrees with the accelerator's distributed type)"""
    from accelerate.utils import parse_flag_from_env

    return parse_flag_from_env("ACCELERATE_USE_DEEPSPEED")


def make_accelerator():
    """accelerate's DeepSpeed state. accelerate refuses DeepSpeed with `cpu=True`; on a machine without a
    GPU the state is started with cpu=False on the gloo backend instead (DeepSpeed then runs on its CPU
    accelerator)."""
    from accelerate import Accelerator
    from accelerate.utils import InitProcessGroupKwargs
    from transformers.integrations import unset_hf_deepspeed_config

    if torch.cuda.is_available():
        accelerator = Accelerator()
    else:
        _skip_shm_comm_build()
        accelerator = Accelerator(cpu=False, kwargs_handlers=[InitProcessGroupKwargs(backend="gloo")])
    # accelerate turns on transformers' global ZeRO-3 switch for any stage-3 config (whatever zero3_init_flag
    # says). With it, from_pretrained would load every model partitioned under zero.Init, the reference model
    # too, which no engine would ever gather, and generate() would sync every token across processes
    # (synced_gpus), which ragged rollouts cannot do. vlrl loads models whole and gathers for rollouts.
    unset_hf_deepspeed_config()
    return accelerator


def _skip_shm_comm_build() -> None:
    """DeepSpeed's CPU accelerator JIT-compiles a shared-memory all-reduce kernel (g++, ~1.5 min on 2 cores)
    when its communication backend starts. Training never uses it (it serves `inference_all_reduce`), so it
    is marked unavailable: DeepSpeed then uses the gloo process group for everything."""
    import deepspeed.ops

    compatible = deepspeed.ops.__compatible_ops__  # DeepSpeed's own (editable) table of buildable ops
    compatible["deepspeed_shm_comm"] = False


def check_supported(accelerator, cfg, can_shard: bool) -> None:
    """Stop with a clear error for what ZeRO-3 is not wired for (instead of silently doing it wrong)."""
    plugin = accelerator.state.deepspeed_plugin
    if not can_shard:
        raise SystemExit("vlrl: DeepSpeed is only wired into vlrl/train.py (this entry point would silently "
                         "replicate the model); use data parallel (configs/accelerate/multi_gpu.yaml)")
    stage = plugin.deepspeed_config.get("zero_optimization", {}).get("stage", plugin.zero_stage)  # yaml or json file
    if stage != 3:
        raise SystemExit(f"vlrl: DeepSpeed ZeRO stage {stage} (accelerate deepspeed_config.zero_stage) is not wired; "
                         "use zero_stage: 3 (configs/accelerate/deepspeed_zero3.yaml)")
    if plugin.zero3_init_flag and accelerator.is_main_process:
        # accelerate defaults it to true for stage 3. It only saves memory while loading, and transformers' switch
        # is off (make_accelerator), so it is ignored rather than refused.
        print("vlrl: deepspeed_config.zero3_init_flag is ignored: each process loads the model whole, then the "
              "engine partitions it (set it to false to silence this)", flush=True)
    if cfg.model.lora.r > 0:
        raise SystemExit("vlrl: DeepSpeed ZeRO-3 with LoRA (model.lora.r > 0) is not supported yet; use data parallel for LoRA")
    if cfg.algo.advantage == "gae":
        raise SystemExit("vlrl: DeepSpeed ZeRO-3 with a PPO critic (algo.advantage=gae) is not supported yet: the critic "
                         "shares or copies the backbone outside the engine; use algo.advantage=group, or FSDP2 / data "
                         "parallel for PPO")
    if cfg.rollout.engine != "hf":
        raise SystemExit(f"vlrl: DeepSpeed ZeRO-3 with rollout.engine={cfg.rollout.engine} is not supported: its weight "
                         "sync reads the (partitioned) parameters directly; use rollout.engine=hf")


def wrap(accelerator, model: torch.nn.Module, optimizer, trainer):
    """Partition `model` and `optimizer` with ZeRO-3 (accelerator.prepare) -> the engine. `trainer`: TrainerConfig.

    Call after building the optimizer and the scheduler (the scheduler keeps driving the learning rate of
    the same torch optimizer, which DeepSpeed steps on the partitions)."""
    from vlrl.models import base_model

    ds = accelerator.state.deepspeed_plugin.deepspeed_config
    ds["train_micro_batch_size_per_gpu"] = trainer.micro_batch_size  # only DeepSpeed's bookkeeping: no data loader
    ds["gradient_accumulation_steps"] = 1  # vlrl accumulates itself: one engine.step() per optimizer step
    ds["gradient_clipping"] = float(trainer.max_grad_norm) if trainer.max_grad_norm > 0 else 0.0
    zero = ds.setdefault("zero_optimization", {})
    # accelerate's rule for "auto" bucket sizes, from the language model's width (the VLM's top-level config
    # has no hidden_size). Without it DeepSpeed keeps every tensor under 1e5 elements whole on each process.
    hidden = base_model(model).config.get_text_config().hidden_size
    for key, value in (("reduce_bucket_size", hidden * hidden),
                       ("stage3_prefetch_bucket_size", int(0.9 * hidden * hidden)),
                       ("stage3_param_persistence_threshold", 10 * hidden)):
        if zero.get(key, "auto") == "auto":
            zero[key] = value
    engine, _ = accelerator.prepare(model, optimizer)
    return engine


def partitioned_count(model) -> int:
    """How many parameters are not held whole by this process right now (0 when not partitioned). Small ones
    stay whole under ZeRO-3 (stage3_param_persistence_threshold)."""
    return sum(1 for p in model.parameters() if hasattr(p, "ds_numel") and p.data.numel() < p.ds_numel)


def backward(eng, loss: torch.Tensor) -> None:
    """Backward of this process's share of the step loss (already normalised by global counts)."""
    import torch.distributed as dist

    world = dist.get_world_size() if dist.is_initialized() else 1
    # ZeRO-3 divides the reduce-scattered gradients by the number of processes; we want their SUM.
    eng.backward(loss * world, scale_wrt_gas=False)


def engine_step(eng) -> torch.Tensor:
    """The optimizer step over the accumulated micro-batches -> total gradient norm before clipping
    (inf when it was not finite and DeepSpeed skipped the step)."""
    eng.step()
    norm = eng.get_global_grad_norm()
    return torch.tensor(float("inf") if norm is None else float(norm))


def _offload(eng):
    return eng.optimizer.parameter_offload  # ZeRO-3's per-module hooks live here


@contextmanager
def gathered(eng, model: torch.nn.Module):
    """Full parameters on every process inside, with no collective per forward; partitioned again after.

    All processes must enter and leave together."""
    import deepspeed
    from deepspeed.runtime.zero import parameter_offload

    offload = _offload(eng)
    with deepspeed.zero.GatheredParameters(list(model.parameters()), modifier_rank=None):
        offload._remove_module_hooks()
        offload.forward_hooks, offload.backward_hooks = [], []
        try:
            yield model
        finally:
            depth = len(parameter_offload.FWD_MODULE_STACK)
            offload.setup_zero_stage3_hooks()
            # setup pushes the root module on DeepSpeed's forward stack again: keep one entry, as at start
            del parameter_offload.FWD_MODULE_STACK[depth:]


def full_model_state(model: torch.nn.Module) -> dict:
    """Collective: the full state dict on rank 0 (CPU copies), {} elsewhere."""
    import deepspeed
    import torch.distributed as dist

    out: dict = {}
    with deepspeed.zero.GatheredParameters(list(model.parameters()), modifier_rank=None):
        if dist.get_rank() == 0:
            copies: dict[int, torch.Tensor] = {}  # tied weights stay one tensor
            for k, v in model.state_dict(keep_vars=True).items():  # the parameters themselves: ties are visible
                if id(v) not in copies:
                    copies[id(v)] = v.detach().to("cpu", copy=True)
                out[k] = copies[id(v)]
    return out


def _trainable(model) -> list[tuple[str, torch.nn.Parameter]]:
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]


def _flat_states(eng) -> list[dict]:
    """The torch optimizer's state of each fp32 partition ZeRO-3 steps (empty before the first step)."""
    opt = eng.optimizer
    return [opt.optimizer.state.get(flat, {}) for flat in opt.fp32_partitioned_groups_flat]


def full_optimizer_state(eng, model: torch.nn.Module, optimizer) -> dict:
    """Collective: the optimizer's full state keyed by parameter names on rank 0 ({} elsewhere), in the
    layout of torch's full optimizer state dict (what an FSDP2 run writes)."""
    import torch.distributed as dist
    from deepspeed.utils import safe_get_full_optimizer_state

    if len(optimizer.param_groups) != 1:
        raise ValueError("ZeRO-3 checkpoints support one optimizer parameter group")
    flat = _flat_states(eng)[0]
    keys = sorted(k for k, v in flat.items() if torch.is_tensor(v) and v.dim() == 1)  # exp_avg, exp_avg_sq, ...
    main = dist.get_rank() == 0
    state = {}
    for name, p in _trainable(model):
        entry = {k: safe_get_full_optimizer_state(p, k) for k in keys}  # collective per tensor
        if main and entry:
            state[name] = {k: v.detach().cpu().clone() for k, v in entry.items()}
            if "step" in flat:
                state[name]["step"] = flat["step"].detach().cpu().clone()
    if not main:
        return {}
    group = {k: v for k, v in optimizer.param_groups[0].items() if k != "params"}
    return {"state": state, "param_groups": [{**group, "params": [n for n, _ in _trainable(model)]}]}


def load_optimizer_state(eng, model: torch.nn.Module, optimizer, state: dict, fmt: str) -> None:
    """Every process passes the same saved state: "full" (keyed by names) or "by_id" (a plain torch state dict
    of this trainer's optimizer: ids in trainable-parameter order); each keeps its partition."""
    from deepspeed.utils import safe_set_full_optimizer_state

    names = [n for n, _ in _trainable(model)]
    per_param = state["state"]
    if fmt != "full":
        per_param = {names[int(i)]: s for i, s in per_param.items()}
    groups = state["param_groups"]
    if len(groups) != 1 or len(optimizer.param_groups) != 1:
        raise ValueError("ZeRO-3 checkpoints support one optimizer parameter group")
    optimizer.param_groups[0].update({k: v for k, v in groups[0].items() if k != "params"})
    if not per_param:
        return  # an optimizer without state (e.g. plain SGD)
    sample = next(iter(per_param.values()))
    keys = [k for k, v in sample.items() if torch.is_tensor(v) and v.dim() > 0]
    # torch optimizers create their state at the first step: create it now on every fp32 partition, so the
    # saved values can be written into it.
    opt = eng.optimizer
    for flat in opt.fp32_partitioned_groups_flat:
        entry = opt.optimizer.state[flat]
        for k in keys:
            entry[k] = torch.zeros_like(flat)
        if "step" in sample:
            entry["step"] = sample["step"].clone().to(flat.device) if torch.is_tensor(sample["step"]) else sample["step"]
    for name, p in _trainable(model):
        saved = per_param.get(name)  # absent: the parameter never had a gradient, its state stays zero
        for k in keys:
            value = saved[k].to(p.device).float() if saved is not None else torch.zeros(p.ds_shape, device=p.device)
            safe_set_full_optimizer_state(p, value, k)  # collective-free: each process copies its slice
