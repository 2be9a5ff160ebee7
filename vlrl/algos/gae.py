"""Generalised Advantage Estimation over (possibly several) trajectories of turns."""

from __future__ import annotations

import torch


def _as_tensor(x, like: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(x, dtype=like.dtype, device=like.device)


@torch.no_grad()
def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    gamma: float,
    lam: float,
    last_value: float | torch.Tensor = 0.0,
    truncated: torch.Tensor | None = None,
    next_values: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE(gamma, lambda) advantages and returns.

    Backwards over t:
    ``delta_t = r_t + gamma * V_next(t) - V(s_t)`` and ``A_t = delta_t + gamma * lam * carry_t``, where

    * ``dones[t]`` (the episode terminated after step t): ``V_next = 0``, ``carry = 0``;
    * else ``truncated[t]`` (cut off by a time limit after step t): ``V_next = next_values[t]``,
      ``carry = 0`` -- the episode would have gone on, so bootstrap, but the next row belongs to
      another episode and its advantage must not leak back;
    * else ``V_next = values[t+1]`` and ``carry = A_{t+1}``; after the final step,
      ``V_next = last_value`` and ``carry = 0``.

    A step that is both done and truncated counts as done. Targets are constants for the losses, so
    this runs without autograd.

    Args:
        rewards, values, dones: [T], or [N, T] for N independent rows.
        gamma: discount.
        lam: GAE lambda.
        last_value: value of the observation after the final step; scalar or [N].
        truncated: optional bool [T] / [N, T].
        next_values: [T] / [N, T] value of the observation after each step; only read where
            `truncated` is set, and required if it ever is.

    Returns:
        (advantages, returns), each shaped like `rewards`; returns = advantages + values.
    """
    rewards = torch.as_tensor(rewards)
    values = torch.as_tensor(values)
    dtype = torch.promote_types(rewards.dtype, values.dtype)
    if not dtype.is_floating_point:
        dtype = torch.get_default_dtype()
    rewards = rewards.to(dtype)
    values = values.to(dtype)
    if rewards.dim() not in (1, 2):
        raise ValueError(f"rewards must be [T] or [N, T], got shape {tuple(rewards.shape)}")
    if values.shape != rewards.shape:
        raise ValueError(f"values must have shape {tuple(rewards.shape)}, got {tuple(values.shape)}")
    dones = torch.as_tensor(dones, device=rewards.device)
    if dones.shape != rewards.shape:
        raise ValueError(f"dones must have shape {tuple(rewards.shape)}, got {tuple(dones.shape)}")
    dones = dones.bool()

    batched = rewards.dim() == 2
    if not batched:
        rewards, values, dones = rewards.unsqueeze(0), values.unsqueeze(0), dones.unsqueeze(0)
    n, t_len = rewards.shape

    if truncated is not None:
        truncated = torch.as_tensor(truncated, device=rewards.device)
        if truncated.shape != (rewards.shape if batched else rewards.shape[1:]):
            raise ValueError(f"truncated must have the shape of rewards, got {tuple(truncated.shape)}")
        truncated = truncated.bool().reshape(n, t_len) & ~dones
        if not bool(truncated.any()):
            truncated = None
    if truncated is not None:
        if next_values is None:
            raise ValueError("next_values is required when any step is truncated")
        next_values = _as_tensor(next_values, rewards)
        if next_values.shape != (rewards.shape if batched else rewards.shape[1:]):
            raise ValueError(f"next_values must have the shape of rewards, got {tuple(next_values.shape)}")
        next_values = next_values.reshape(n, t_len)

    last_value = _as_tensor(last_value, rewards)
    if last_value.dim() > 1 or (last_value.dim() == 1 and last_value.numel() not in (1, n)):
        raise ValueError(f"last_value must be a scalar or [N] with N={n}, got shape {tuple(last_value.shape)}")
    last_value = last_value.reshape(-1).expand(n) if last_value.dim() == 1 else last_value.expand(n)

    zeros = torch.zeros(n, dtype=dtype, device=rewards.device)
    adv = torch.empty_like(rewards)
    carry = zeros
    next_v = last_value
    for t in range(t_len - 1, -1, -1):
        v_next, c = next_v, carry
        if truncated is not None:
            v_next = torch.where(truncated[:, t], next_values[:, t], v_next)
            c = torch.where(truncated[:, t], zeros, c)
        v_next = torch.where(dones[:, t], zeros, v_next)
        c = torch.where(dones[:, t], zeros, c)
        a = rewards[:, t] + gamma * v_next - values[:, t] + gamma * lam * c
        adv[:, t] = a
        carry = a
        next_v = values[:, t]

    returns = adv + values
    if not batched:
        adv, returns = adv.squeeze(0), returns.squeeze(0)
    return adv, returns
