"""FSDP2: the policy sharded with torch's `fully_shard` (`accelerate launch` with an FSDP v2 config).

What the trainer needs beyond `fully_shard` itself:

* gradients SUM over processes (the losses are normalised by global counts, see trainer.update), so the
  reduce-scatter's default averaging is switched off;
* rollouts, critic values and evaluation run a different number of forward passes on each process
  (ragged episodes), which sharded forwards cannot do (every forward is a collective): `gathered()`
  keeps the full parameters on every process for that phase, then frees them again;
* training micro-batches must be equally many on every process (`Strategy.lockstep` pads with
  zero-weight ones);
* a weight shared between modules (tied embeddings) stays replicated: its gradient is all-reduced as in
  data parallel, and gradient clipping combines the norms of sharded and replicated gradients;
* checkpoints hold the full (unsharded) weights and optimizer state, so a sharded run writes the same
  `save_pretrained` directory as any other and resumes with any number of processes (loading goes
  through `Strategy.load_optimizer_state`).

accelerate's other FSDP settings are honoured or refused at start (`check_settings`), never ignored:
`fsdp_activation_checkpointing: true` is `model.gradient_checkpointing=true` (each block recomputed in backward);
`fsdp_state_dict_type` must be FULL_STATE_DICT (what every checkpoint holds); `fsdp_cpu_ram_efficient_loading`
(accelerate's default is true) and `fsdp_offload_params` are not wired: each process loads the whole model, then
shards it, and parameters stay on the device.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

import torch

from vlrl.parallel.base import Strategy, all_reduce_grads


class FSDP2(Strategy):
    name = "fsdp2"
    sharded = True

    def __init__(self, accelerator=None, reshard_after_forward: bool | None = None):
        super().__init__(accelerator)
        if reshard_after_forward is None:
            reshard_after_forward = reshard_after_forward_requested()
        self.reshard_after_forward = reshard_after_forward

    def shard(self, model: torch.nn.Module) -> torch.nn.Module:
        return shard(model, self.reshard_after_forward)

    def gathered(self, model: torch.nn.Module):
        return gathered(model, self.reshard_after_forward)

    def reduce_gradients(self, params: list, extra: list = ()) -> None:
        all_reduce_grads(replicated(params) + list(extra))  # the sharded ones were reduce-scattered in backward

    def clip_grad_norm(self, params: list, max_norm: float) -> torch.Tensor:
        return clip_grad_norm(params, max_norm)

    def full_model_state(self, model: torch.nn.Module) -> dict:
        return full_model_state(model)

    def full_state(self, model: torch.nn.Module, optimizer) -> dict:
        return {"model_state": full_model_state(model), "optimizer_state": full_optimizer_state(model, optimizer)}


def fsdp_version_requested() -> int:
    """0, 1 or 2: the FSDP version `accelerate launch` was configured with (its env vars; on CPU accelerate
    itself reports MULTI_CPU and ignores FSDP, so the env is the one signal on every device)."""
    if os.environ.get("ACCELERATE_USE_FSDP", "false").lower() not in ("1", "true"):
        return 0
    return int(os.environ.get("FSDP_VERSION", "1"))


def _flag(name: str, default: str = "false") -> bool:
    return os.environ.get(name, default).strip().lower() in ("1", "true", "yes")


def activation_checkpointing_requested() -> bool:
    """accelerate's `fsdp_activation_checkpointing`: honoured as `model.gradient_checkpointing=true`."""
    return _flag("FSDP_ACTIVATION_CHECKPOINTING")


def check_settings() -> None:
    """Stop with a clear error for an FSDP setting of the launch that vlrl does not carry out (it would be ignored)."""
    kind = os.environ.get("FSDP_STATE_DICT_TYPE", "FULL_STATE_DICT").strip().upper()
    if kind not in ("FULL_STATE_DICT", "", "NONE"):
        raise SystemExit(f"vlrl: fsdp_state_dict_type={kind} is not supported: checkpoints always hold the full (unsharded) "
                         "weights and optimizer state, resumable with any number of processes; set "
                         "fsdp_state_dict_type: FULL_STATE_DICT in the accelerate config")
    if _flag("FSDP_CPU_RAM_EFFICIENT_LOADING"):
        raise SystemExit("vlrl: fsdp_cpu_ram_efficient_loading (accelerate's default: true) is not supported: every process "
                         "loads the whole model into memory, then shards it; set fsdp_cpu_ram_efficient_loading: false "
                         "in the accelerate config (configs/accelerate/fsdp2.yaml)")
    if _flag("FSDP_OFFLOAD_PARAMS"):
        raise SystemExit("vlrl: fsdp_offload_params is not supported (parameters stay on the device); set "
                         "fsdp_offload_params: false")


def reshard_after_forward_requested() -> bool:
    return os.environ.get("FSDP_RESHARD_AFTER_FORWARD", "true").lower() in ("1", "true")


def shard(model: torch.nn.Module, reshard_after_forward: bool = True) -> torch.nn.Module:
    """Shard `model` in place over the default process group. Call before building the optimizer
    (parameters become DTensors).

    Units: each transformer block (the classes in the model's `_no_split_modules`), then the vision tower
    and the language model as wholes, then the root. The vision tower and the language model are called
    directly (the rollout engine and forward.py encode images once per group; the critic runs the inner
    model), so they must gather their own parameters rather than rely on the root's forward. A weight
    shared between modules (tied input/output embeddings) stays replicated: FSDP cannot split one
    parameter across units; the trainer all-reduces its gradient like data parallel does."""
    from torch.distributed.fsdp import fully_shard

    from vlrl.models import base_model

    block_names = set()
    for m in model.modules():
        block_names.update(getattr(m, "_no_split_modules", None) or [])
    if not block_names:
        raise ValueError(f"{type(model).__name__} names no transformer blocks (_no_split_modules): cannot shard it")
    owners: dict[int, int] = {}
    for _, p in model.named_parameters(remove_duplicate=False):
        owners[id(p)] = owners.get(id(p), 0) + 1
    tied = {p for p in model.parameters() if owners[id(p)] > 1}
    for m in model.modules():
        if type(m).__name__ in block_names:
            fully_shard(m, reshard_after_forward=reshard_after_forward)
    inner = getattr(base_model(model), "model", None)
    for name in ("visual", "language_model"):
        sub = getattr(inner, name, None)
        if isinstance(sub, torch.nn.Module):
            fully_shard(sub, reshard_after_forward=reshard_after_forward, ignored_params=tied)
    fully_shard(model, reshard_after_forward=reshard_after_forward, ignored_params=tied)
    for m in fsdp_modules(model):
        m.set_gradient_divide_factor(1.0)  # SUM: the loss already carries the global normalisation
        m.set_force_sum_reduction_for_comms(True)  # plain SUM (gloo has no PREMUL_SUM)
    # FSDP initialises its root lazily on the first forward *through the root*; the vision tower is often
    # called directly, which would make it a root of its own. Initialise now.
    model._get_fsdp_state()._lazy_init()
    return model


def fsdp_modules(model: torch.nn.Module) -> list:
    from torch.distributed.fsdp import FSDPModule

    return [m for m in model.modules() if isinstance(m, FSDPModule)]


@contextmanager
def gathered(model: torch.nn.Module, reshard_after_forward: bool = True):
    """Full parameters on every process inside (no collectives per forward); sharded again after, each unit
    back to `reshard_after_forward`.

    All processes must enter and leave together. A no-op for a model that is not sharded."""
    mods = fsdp_modules(model)
    if not mods:
        yield model
        return
    inner = [m for m in mods if m is not model]  # the root keeps FSDP's own choice (it never reshards after forward)
    for m in inner:
        m.set_reshard_after_forward(False, recurse=False)
    for m in mods:
        m.unshard()
    try:
        yield model
    finally:
        for m in mods:
            m.reshard()
        for m in inner:
            m.set_reshard_after_forward(reshard_after_forward, recurse=False)


def clip_grad_norm(params: list, max_norm: float) -> torch.Tensor:
    """torch's clip_grad_norm_ (total 2-norm, coefficient max_norm / (norm + 1e-6) capped at 1) for a mix
    of sharded (DTensor) and replicated gradients -> the total norm, a plain scalar tensor."""
    from torch.distributed.tensor import DTensor

    grads = [p.grad for p in params if p.grad is not None]
    sharded = [g for g in grads if isinstance(g, DTensor)]
    if not sharded:
        return torch.nn.utils.clip_grad_norm_(params, max_norm)
    device = sharded[0].to_local().device
    sq = torch.zeros((), dtype=torch.float32, device=device)
    for g in sharded:
        sq += g.to_local().float().pow(2).sum()
    torch.distributed.all_reduce(sq)  # shards are disjoint: summed over processes = the full sum of squares
    for g in grads:
        if not isinstance(g, DTensor):
            sq += g.float().pow(2).sum()  # replicated: identical everywhere, counted once
    total = sq.sqrt()
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    if torch.isfinite(total):
        for g in grads:
            (g.to_local() if isinstance(g, DTensor) else g).mul_(coef.to(g.dtype))
    return total


def replicated(params: list) -> list:
    """The parameters that are not sharded (their gradients are reduced by the trainer, not by FSDP)."""
    from torch.distributed.tensor import DTensor

    return [p for p in params if not isinstance(p, DTensor)]


def full_model_state(model: torch.nn.Module) -> dict:
    """Collective: the full state dict on rank 0 (CPU tensors), {} elsewhere."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def full_optimizer_state(model: torch.nn.Module, optimizer) -> dict:
    """Collective: the optimizer's full state (keyed by parameter names) on rank 0, {} elsewhere."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    return get_optimizer_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
