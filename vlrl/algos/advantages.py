"""Group-relative advantages (GRPO family).

A batch holds B groups of G completions each, flattened to ``[B*G]`` with the members of a group in
consecutive rows. A NaN reward means "could not score": that completion gets advantage exactly 0 and
does not shift its group's statistics.
"""

from __future__ import annotations

import operator

import torch

# algo.scale: divide by the group's std, the batch's std, or not at all (group_advantages; "batch" also
# whitens GAE advantages in vlrl/trainer.py).
ADVANTAGE_SCALES = ("group", "batch", "none")
# algo.advantage: group-relative (group_advantages, here), GAE from a critic's values (vlrl/algos/gae.py), or
# per-turn r - b_role with per-role EMA baselines (vlrl/algos/roles.py; the task declares its roles).
ADVANTAGE_ESTIMATORS = ("group", "gae", "role")


def _masked_unbiased_std(values: torch.Tensor, valid: torch.Tensor, mean: torch.Tensor, dim=None) -> torch.Tensor:
    """Bessel-corrected std of the valid entries; 0 where fewer than two are valid.

    values, valid: same shape; mean broadcastable to it. Reduces over `dim` (all dims if None).
    """
    sq = torch.where(valid, (values - mean) ** 2, torch.zeros_like(values))
    if dim is None:
        n, ss = valid.sum(), sq.sum()
    else:
        n, ss = valid.sum(dim=dim, keepdim=True), sq.sum(dim=dim, keepdim=True)
    # With n <= 1 the sample variance is undefined; 0 keeps the output finite and is harmless because
    # every numerator in such a set is 0 as well.
    var = ss / (n - 1).clamp(min=1)
    return torch.where(n > 1, var.sqrt(), torch.zeros_like(var))


def group_advantages(
    rewards: torch.Tensor,
    group_size: int,
    scale: str = "group",
    eps: float = 1e-4,
) -> torch.Tensor:
    """Group-relative advantages with TRL's semantics.

    ``A_i = (r_i - mean_group(r)) / (std + eps)`` where std is the unbiased std of the reward's own
    group (``scale="group"``), of the whole batch (``scale="batch"``; the group mean is still what is
    subtracted), or no division at all (``scale="none"``, Dr. GRPO / GUI-G1).

    NaN rewards are left out of every mean and std and get advantage 0. A group with one valid
    reward has mean equal to it, so its advantage is 0 too; a group with none is all zeros.

    Args:
        rewards: [B*G] float rewards, groups in consecutive rows.
        group_size: G, completions per prompt.
        scale: "group", "batch" or "none".
        eps: added to the std so identical rewards do not divide by zero.

    Returns:
        advantages: [B*G], same dtype as `rewards` (float32 for integer input).
    """
    if not isinstance(rewards, torch.Tensor):
        rewards = torch.as_tensor(rewards)
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D [B*G], got shape {tuple(rewards.shape)}")
    try:
        if isinstance(group_size, bool):
            raise TypeError
        group_size = operator.index(group_size)  # accepts numpy / 0-d tensor ints, rejects 4.0
    except TypeError:
        raise ValueError(f"group_size must be a positive int, got {group_size!r}") from None
    if group_size < 1:
        raise ValueError(f"group_size must be a positive int, got {group_size!r}")
    if rewards.numel() % group_size != 0:
        raise ValueError(f"group_size={group_size} does not divide the number of rewards ({rewards.numel()})")
    if scale not in ADVANTAGE_SCALES:
        raise ValueError(f"scale must be one of {ADVANTAGE_SCALES}, got {scale!r}")
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps!r}")
    if not rewards.is_floating_point():
        rewards = rewards.float()

    grouped = rewards.view(-1, group_size)  # [B, G]
    valid = ~torch.isnan(grouped)
    zeros = torch.zeros_like(grouped)
    clean = torch.where(valid, grouped, zeros)  # NaNs would poison sums even when multiplied by 0
    n = valid.sum(dim=1, keepdim=True)
    mean = clean.sum(dim=1, keepdim=True) / n.clamp(min=1)
    centred = torch.where(valid, grouped - mean, zeros)

    if scale == "none":
        adv = centred
    else:
        if scale == "group":
            std = _masked_unbiased_std(grouped, valid, mean, dim=1)
        else:
            flat_valid = valid.reshape(-1)
            flat_mean = clean.sum() / flat_valid.sum().clamp(min=1)
            std = _masked_unbiased_std(rewards, flat_valid, flat_mean)
        adv = centred / (std + eps)
        # eps == 0 with a zero std gives 0/0; those entries are all centred == 0 by construction.
        adv = torch.where(valid & (centred != 0), adv, zeros)
    return adv.reshape(-1)
