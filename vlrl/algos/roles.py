"""Per-role baselines for multi-role episodes (self-play games: one policy, several roles).

Every sampled turn belongs to a role ("spy", "civilian", "observer", ...). A role's baseline is an
exponential moving average (EMA) of its rewards, and a turn's advantage is ``r - b_role``: roles with
different reward scales (a zero-sum game gives one role mostly negative rewards) are centred
separately, without the group structure GRPO needs.

Update rule, once per training step, for each role with at least one valid reward in the step:

    mean = (sum of the role's rewards) / (their count)        (over every process)
    b    = mean                                  on the role's first observation
    b    = decay * b + (1 - decay) * mean        afterwards

* First observation: the baseline starts at the batch mean rather than at 0, so a role's first
  advantages are centred instead of carrying the whole reward (an EMA from 0 would take ~1 / (1 -
  decay) steps to forget the arbitrary start).
* A role with no rewards in a step keeps its baseline (and stays unobserved if it never had one).
* NaN means "could not score" (as in vlrl/algos/advantages.py): left out of sums and counts, advantage 0.
* Across processes: the per-role sums and counts are all-reduced (SUM) before the update, so every
  process computes the same mean, from the same data, and holds the same baselines.
* `RoleBaselines.advantages` updates first, then subtracts: the current step's rewards count in the
  baseline they are compared with (weight 1 - decay, or all of it on a first observation).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence

import torch
import torch.distributed as dist

DEFAULT_DECAY = 0.9


def _check_decay(decay: float) -> float:
    if isinstance(decay, bool) or not isinstance(decay, (int, float)) or not 0.0 <= decay <= 1.0:
        raise ValueError(f"decay must be a number in [0, 1], got {decay!r}")
    return float(decay)


def _as_rewards(rewards, roles: Sequence[str]) -> torch.Tensor:
    r = rewards if isinstance(rewards, torch.Tensor) else torch.as_tensor(rewards, dtype=torch.float64)
    if r.dim() != 1:
        raise ValueError(f"rewards must be 1-D [B], got shape {tuple(r.shape)}")
    if len(roles) != r.numel():
        raise ValueError(f"{r.numel()} rewards but {len(roles)} roles")
    return r if r.is_floating_point() else r.double()


def role_sums(rewards, roles: Sequence[str]) -> tuple[dict[str, float], dict[str, float]]:
    """Per-role sum and count of the valid (non-NaN) rewards of one batch.

    Args: rewards: [B] floats; roles: [B] role names. Returns: ({role: sum}, {role: count}) over the
    roles that occur in `roles` (a role whose rewards are all NaN has sum 0 and count 0).
    """
    r = _as_rewards(rewards, roles)
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    for value, role in zip(r.tolist(), roles):
        sums.setdefault(role, 0.0)
        counts.setdefault(role, 0.0)
        if not math.isnan(value):
            sums[role] += value
            counts[role] += 1.0
    return sums, counts


def update_baselines(baselines: Mapping[str, float], rewards_by_role: Mapping[str, float],
                     counts_by_role: Mapping[str, float], decay: float = DEFAULT_DECAY) -> dict[str, float]:
    """One EMA step of the per-role baselines (see the module docstring); the input is not modified.

    Args:
        baselines: {role: baseline} of the roles observed so far.
        rewards_by_role: {role: SUM of the step's valid rewards} (already all-reduced when distributed).
        counts_by_role: {role: number of those rewards}; a role absent or with count 0 is unchanged.
        decay: weight of the old baseline, in [0, 1].

    Returns: a new {role: baseline} dict holding every old role and every newly observed one.
    """
    decay = _check_decay(decay)
    out = {k: float(v) for k, v in baselines.items()}
    for role, count in counts_by_role.items():
        if count < 0:
            raise ValueError(f"count of role {role!r} is negative: {count!r}")
        if count == 0:
            continue
        mean = float(rewards_by_role[role]) / float(count)
        out[role] = mean if role not in out else decay * out[role] + (1.0 - decay) * mean
    return out


def role_advantages(rewards, roles: Sequence[str], baselines: Mapping[str, float]) -> torch.Tensor:
    """Advantage of each turn: r - b_role.

    Args: rewards: [B] floats; roles: [B] role names, each with a baseline (ValueError naming the role
    otherwise); baselines: {role: baseline}. Returns: [B] advantages, rewards' dtype (float64 for ints
    and lists), 0 where the reward is NaN.
    """
    r = _as_rewards(rewards, roles)
    missing = sorted({role for role in roles if role not in baselines})
    if missing:
        raise ValueError(f"no baseline for role(s) {missing}: update the baselines with this batch first")
    b = torch.tensor([float(baselines[role]) for role in roles], dtype=r.dtype, device=r.device)
    adv = r - b
    return torch.where(torch.isnan(r), torch.zeros_like(adv), adv)


def _reduce_device() -> torch.device:
    """NCCL reduces CUDA tensors only; every other backend (gloo) takes CPU tensors."""
    if "nccl" in str(dist.get_backend()) and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_reduce_role_sums(sums: Mapping[str, float], counts: Mapping[str, float], roles: Sequence[str]
                         ) -> tuple[dict[str, float], dict[str, float]]:
    """SUM of the per-role sums and counts over every process (identity without torch.distributed).

    Every process must pass the same `roles` (the declared role names, in one order) so the reduced
    vectors line up, even when a process saw no turn of some role. Returns dicts over all of `roles`.
    """
    stacked = [[float(sums.get(r, 0.0)) for r in roles], [float(counts.get(r, 0.0)) for r in roles]]
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        t = torch.tensor(stacked, dtype=torch.float64, device=_reduce_device())  # [2, R]
        dist.all_reduce(t)
        stacked = t.cpu().tolist()
    return dict(zip(roles, stacked[0])), dict(zip(roles, stacked[1]))


class RoleBaselines:
    """Per-role EMA baselines over a fixed set of declared roles, kept equal on every process.

    Usage, once per training step on every process (the all-reduce is a collective):
        adv = baselines.advantages(rewards, roles)      # rewards [B], roles [B] -> [B]
    """

    def __init__(self, roles: Sequence[str], decay: float = DEFAULT_DECAY):
        if not roles or len(set(roles)) != len(roles) or not all(isinstance(r, str) and r for r in roles):
            raise ValueError(f"roles must be distinct non-empty strings, got {roles!r}")
        self.roles = tuple(roles)
        self.decay = _check_decay(decay)
        self.baselines: dict[str, float] = {}

    def _check_roles(self, roles: Sequence[str]) -> None:
        unknown = sorted(set(roles) - set(self.roles))
        if unknown:
            raise ValueError(f"unknown role(s) {unknown}; declared: {list(self.roles)}")

    def update(self, rewards, roles: Sequence[str]) -> dict[str, float]:
        """Fold one step's rewards [B] of roles [B] into the baselines (all processes); returns them."""
        self._check_roles(roles)
        sums, counts = all_reduce_role_sums(*role_sums(rewards, roles), self.roles)
        self.baselines = update_baselines(self.baselines, sums, counts, self.decay)
        return dict(self.baselines)

    def advantages(self, rewards, roles: Sequence[str]) -> torch.Tensor:
        """Update with this step's rewards, then r - b_role: [B] -> [B] (0 for NaN rewards)."""
        self.update(rewards, roles)
        return role_advantages(rewards, roles, self.baselines)

    def metrics(self, prefix: str = "baseline") -> dict[str, float]:
        """{f"{prefix}/{role}": baseline} of the observed roles, for the run's loggers."""
        return {f"{prefix}/{role}": b for role, b in self.baselines.items()}

    def state_dict(self) -> dict:
        """Plain Python values only (checkpoints load with weights_only=True)."""
        return {"roles": list(self.roles), "decay": self.decay, "baselines": dict(self.baselines)}

    def load_state_dict(self, state: Mapping) -> None:
        """Restore baselines saved by `state_dict`; a checkpoint with other roles or decay is refused."""
        if list(state["roles"]) != list(self.roles) or float(state["decay"]) != self.decay:
            raise ValueError(f"role baselines saved for roles {list(state['roles'])} with decay {state['decay']}, "
                             f"this run has roles {list(self.roles)} with decay {self.decay}")
        baselines = {str(k): float(v) for k, v in state["baselines"].items()}
        self._check_roles(list(baselines))
        self.baselines = baselines


def role_metrics(rewards, roles: Sequence[str], advantages, declared: Sequence[str],
                 baselines: Mapping[str, float], trained: Collection[str] | None = None) -> dict[str, float]:
    """Per-role numbers of one step for the run's loggers, `role/<name>/<key>` for every declared role.

    Args: rewards: [B] turn rewards (NaN = unscored, left out); roles: [B]; advantages: [B];
    declared: every role name; baselines: {role: baseline} after the step's update; trained: the roles
    that received gradients this step (None: all). Keys: `reward` (mean valid reward, NaN when the role
    had none), `turns` (turns played), `baseline` (NaN before the role's first observation),
    `advantage` (mean), `trained` (1.0 or 0.0).
    """
    r = _as_rewards(rewards, roles).tolist()
    a = torch.as_tensor(advantages, dtype=torch.float64).tolist()
    out: dict[str, float] = {}
    for role in declared:
        idx = [i for i, x in enumerate(roles) if x == role]
        valid = [r[i] for i in idx if not math.isnan(r[i])]
        out[f"role/{role}/reward"] = sum(valid) / len(valid) if valid else math.nan
        out[f"role/{role}/turns"] = float(len(idx))
        out[f"role/{role}/baseline"] = float(baselines.get(role, math.nan))
        out[f"role/{role}/advantage"] = sum(a[i] for i in idx) / len(idx) if idx else math.nan
        out[f"role/{role}/trained"] = float(trained is None or role in trained)
    return out
