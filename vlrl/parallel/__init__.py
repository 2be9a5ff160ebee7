"""Distributed backends behind one interface (`Strategy`, base.py), one file each: data_parallel.py (the
plain path, also a single process), fsdp2.py (torch's fully_shard), zero3.py (DeepSpeed ZeRO-3 through
accelerate). `make_strategy` picks one at start from the `accelerate launch` environment; the training
loop only talks to the object it returns.

Adding a backend: one file with a `Strategy` subclass, and its detection in `make_strategy`.
"""

from __future__ import annotations

import torch

from vlrl.parallel import fsdp2, precision, zero3
from vlrl.parallel.base import Strategy, all_reduce_grads, global_max
from vlrl.parallel.data_parallel import DataParallel
from vlrl.parallel.fsdp2 import FSDP2
from vlrl.parallel.zero3 import Zero3

__all__ = ["DataParallel", "FSDP2", "Strategy", "Zero3", "all_reduce_grads", "global_max", "make_strategy", "model_config"]


def make_strategy(cfg, can_shard: bool = False) -> Strategy:
    """Start accelerate's state and choose the backend of this run. `cfg`: the run's Config.

    Under `accelerate launch` with an FSDP v2 config (configs/accelerate/fsdp2.yaml) and `can_shard`, the
    policy is sharded with torch's fully_shard (FSDP2, when there are several processes); with a DeepSpeed
    ZeRO-3 config (configs/accelerate/deepspeed_zero3.yaml) accelerate partitions it (Zero3); otherwise
    data parallel. Other sharding engines and combinations not wired stop with an error instead of silently
    replicating the model. `can_shard`: whether the calling entry point supports a sharded policy.

    accelerate's `mixed_precision` is carried out by vlrl (vlrl/parallel/precision.py: bf16 autocast, float32 weights)
    outside DeepSpeed; apply `model_config` to the run's model config before loading the policy."""
    from accelerate import Accelerator

    deepspeed = zero3.requested()
    # Outside DeepSpeed accelerate never sees the model (vlrl drives the update), so it is told "no" and the
    # strategy's autocast carries the requested precision out.
    accelerator = zero3.make_accelerator() if deepspeed else Accelerator(cpu=not torch.cuda.is_available(),
                                                                         mixed_precision="no")
    if deepspeed:
        zero3.check_supported(accelerator, cfg, can_shard)
    fsdp = fsdp2.fsdp_version_requested()
    if accelerator.distributed_type.name == "MEGATRON_LM" or fsdp == 1 or (fsdp and not can_shard):
        what = f"FSDP v{fsdp}" if fsdp else accelerator.distributed_type.name
        raise SystemExit(f"vlrl: {what} sharded training is not supported by this entry point "
                         "(it would silently replicate the model); use FSDP2 or DeepSpeed ZeRO-3 with vlrl/train.py "
                         "(configs/accelerate/fsdp2.yaml, deepspeed_zero3.yaml) or data parallel "
                         "(configs/accelerate/multi_gpu.yaml)")
    if fsdp and cfg.model.lora.r > 0:
        raise SystemExit("vlrl: FSDP2 with LoRA (model.lora.r > 0) is not supported yet; use data parallel for LoRA")
    if fsdp:
        fsdp2.check_settings()
    if deepspeed:
        return Zero3(accelerator, cfg.trainer)
    autocast = precision.autocast_dtype(precision.requested(), cfg.model.dtype)
    strategy = FSDP2(accelerator) if fsdp and accelerator.num_processes > 1 else DataParallel(accelerator)  # one process: nothing to shard
    strategy.autocast_dtype = autocast
    return strategy


def model_config(model_cfg, strategy: Strategy):
    """The policy's ModelConfig as the run loads it: float32 master weights under bf16 autocast (`model.dtype=auto`),
    gradient checkpointing when the FSDP launch asked for activation checkpointing."""
    import dataclasses

    return dataclasses.replace(
        model_cfg, dtype=precision.weights_dtype(model_cfg.dtype, strategy.autocast_dtype),
        gradient_checkpointing=model_cfg.gradient_checkpointing or (fsdp2.fsdp_version_requested() == 2
                                                                    and fsdp2.activation_checkpointing_requested()))
