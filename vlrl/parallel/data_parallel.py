"""Data parallel: every process holds the whole policy; no DDP wrapper.

Each process accumulates the gradients of losses already normalised by GLOBAL counts, then one flat
all-reduce SUMs them: the gradient of the full-batch loss, whatever the number of processes or
micro-batches, and processes may hold different numbers of rows (multi-turn episodes) without
mismatched collectives (a process without rows still joins the all-reduce). Also the single-process path.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch

from vlrl.parallel.base import Strategy, all_reduce_grads


class DataParallel(Strategy):
    name = "data_parallel"
    sharded = False

    def gathered(self, model: torch.nn.Module):
        return nullcontext(model)  # already whole

    def reduce_gradients(self, params: list, extra: list = ()) -> None:
        all_reduce_grads(list(params) + list(extra))

    def full_model_state(self, model: torch.nn.Module) -> dict:
        return model.state_dict()
