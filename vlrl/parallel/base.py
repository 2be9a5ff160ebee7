"""The interface every distributed backend implements, and the collectives they share.

A `Strategy` is chosen once per run (`vlrl.parallel.make_strategy`) and is the only thing the training
loop (vlrl/train.py, vlrl/trainer.update, vlrl/sft.py) asks about processes. Each phase of a run maps to
one call:

    start      model = strategy.shard(model)            before the optimizer is built (weights in float32 under
                                                        bf16 mixed precision: vlrl/parallel/precision.py)
               strategy.wrap(model, optimizer)          after the optimizer and its scheduler
               strategy.load_optimizer_state(model, optimizer, saved_trainer_state)
    rollout    with strategy.gathered(model): ...       full weights for a ragged number of forwards
               with strategy.autocast(): ...            around every forward (bf16 mixed precision)
    update     batches = strategy.lockstep(batches, pad_row, device)
               strategy.forward_model(model)(...)       what training forwards go through
               strategy.backward(loss)                  per micro-batch
               strategy.reduce_gradients(params, extra) after the last micro-batch
               grad_norm = strategy.clip_and_step(optimizer, params, max_grad_norm)
    save       checkpoint.save(..., **strategy.full_state(model, optimizer))
    end        strategy.close()

Every backend keeps the trainer's normalisation: losses carry GLOBAL counts (sequences, tokens,
micro-batches of the step over all processes), so gradients must be SUMMED over processes, never averaged.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager

import torch
import torch.distributed as dist
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors


def distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def all_reduce_grads(params: list[torch.nn.Parameter]) -> None:
    """SUM gradients over processes in one flat buffer (params without grad count as zeros)."""
    if not params or not distributed() or dist.get_world_size() == 1:
        return
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = _flatten_dense_tensors(grads)
    dist.all_reduce(flat)
    for p, g in zip(params, _unflatten_dense_tensors(flat, grads)):
        if p.grad is None:
            p.grad = g
        else:
            p.grad.copy_(g)


def global_max(value: int, device) -> int:
    """The largest `value` over all processes (itself without a process group)."""
    t = torch.tensor([value], dtype=torch.long, device=device)
    if distributed():
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


class Strategy(ABC):
    """How the policy is spread over processes. Defaults are the plain path (each process holds the whole
    model); a backend overrides what it changes.

    `sharded`: the policy's forwards and backwards are collectives, so every process must run as many of
    them (`lockstep` pads) and rollouts need `gathered` weights."""

    name: str = ""
    sharded: bool = False
    autocast_dtype: torch.dtype | None = None  # bf16 under accelerate's mixed_precision: bf16 (vlrl/parallel/precision.py)

    def __init__(self, accelerator=None):
        self.accelerator = accelerator  # accelerate's state of the run (None: built outside start_run)

    def autocast(self):
        """Context around every forward of the policy (rollouts, training, evaluation): bf16 autocast when the run
        asked for mixed precision, else nothing. Backward runs outside it."""
        from vlrl.parallel.precision import autocast

        device = self.accelerator.device if self.accelerator is not None else "cpu"
        return autocast(self.autocast_dtype, device)

    # ---- start -----------------------------------------------------------------------------------
    def shard(self, model: torch.nn.Module) -> torch.nn.Module:
        """Split `model` over the processes before its optimizer is built (parameters may change type)."""
        return model

    def wrap(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        """Hand `model` and `optimizer` to an engine, after the scheduler is built (it keeps driving the lr of
        the same torch optimizer)."""

    def load_optimizer_state(self, model: torch.nn.Module, optimizer, state: dict) -> None:
        """Restore the optimizer from a checkpoint's trainer state (`state["optimizer"]`, written in
        `state["optimizer_format"]`: "by_id", a plain torch state dict, or "full", keyed by parameter names
        as a sharded run writes it). Every process passes the same state; a sharded one keeps its shard."""
        if state.get("optimizer_format") == "full":
            from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

            set_optimizer_state_dict(model, optimizer, optim_state_dict=state["optimizer"],
                                     options=StateDictOptions(full_state_dict=True))
        else:
            optimizer.load_state_dict(state["optimizer"])

    # ---- rollout ---------------------------------------------------------------------------------
    @abstractmethod
    def gathered(self, model: torch.nn.Module) -> AbstractContextManager:
        """Context: full parameters on every process inside, so each may run a different number of forwards
        (rollouts, critic values, evaluation). All processes enter and leave together."""

    # ---- update ----------------------------------------------------------------------------------
    def lockstep(self, batches: list[list], pad_row, device) -> list[list]:
        """The micro-batches this process runs: `batches`, and under sharding as many repeats of its first
        one (or of `[pad_row]` when it has none) as it takes to match the process with the most. The caller
        runs the repeats with zero weight (their passes only keep the collectives in step)."""
        if not self.sharded:
            return batches
        most = global_max(len(batches), device)
        if most > len(batches):
            if not batches and pad_row is None:
                raise ValueError("a sharded update on a process without rows needs a pad_row")
            batches = batches + [batches[0] if batches else [pad_row]] * (most - len(batches))
        return batches

    def forward_model(self, model: torch.nn.Module):
        """What training forwards of the policy go through (an engine may need to see each micro-batch)."""
        return model

    def backward(self, loss: torch.Tensor) -> None:
        """Backward of this process's share of the step loss (already normalised by global counts)."""
        loss.backward()

    @abstractmethod
    def reduce_gradients(self, params: list, extra: list = ()) -> None:
        """After the last micro-batch: SUM over processes the gradients of the policy's `params` that the
        backend has not reduced itself, and of `extra` (e.g. the critic's, never sharded), in one buffer."""

    def clip_grad_norm(self, params: list, max_norm: float) -> torch.Tensor:
        """torch's clip_grad_norm_ over the policy's gradients -> the total norm before clipping."""
        return torch.nn.utils.clip_grad_norm_(params, max_norm)

    def clip_and_step(self, optimizer, params: list, max_grad_norm: float, step: bool = True) -> torch.Tensor:
        """Clip the policy's gradients to `max_grad_norm` (0: no clipping) and take the optimizer step unless
        their norm is not finite (a NaN/inf would poison the weights) or `step` is false -> the total norm
        before clipping. The caller zeroes the gradients."""
        norm = self.clip_grad_norm(params, max_grad_norm if max_grad_norm > 0 else float("inf"))
        if torch.isfinite(norm) and step:
            optimizer.step()
        return norm

    # ---- checkpoints and end ---------------------------------------------------------------------
    @abstractmethod
    def full_model_state(self, model: torch.nn.Module) -> dict:
        """Collective under sharding: the full (unsharded) state dict on rank 0 ({} elsewhere when sharded)."""

    def full_state(self, model: torch.nn.Module, optimizer) -> dict:
        """Collective under sharding: the keyword arguments of `checkpoint.save` for the full weights and the
        name-keyed optimizer state (rank 0 writes them); {} when the process's own model and optimizer are
        already whole."""
        return {}

    def close(self) -> None:
        """End of the run (every process calls it): outstanding collectives finish and the process groups are shut
        down while the interpreter is still alive. Left to interpreter shutdown, a finished CPU run sometimes aborted
        one process (`terminate called without an active exception`, SIGABRT after all work was written): a core
        dump showed a Gloo worker thread freeing a finished all-gather (ZeRO-3's) and taking the GIL during
        finalisation. A barrier on every group, in creation order (the same on every rank), drains their queues."""
        import gc

        import torch.distributed as dist

        if not dist.is_initialized():
            return
        gc.collect()  # work handles in reference cycles die now, not in the final collection
        groups = list(dist.distributed_c10d._world.pg_map) or [dist.group.WORLD]  # private: no public list
        for group in groups:
            dist.barrier(group=group)
        dist.destroy_process_group()
