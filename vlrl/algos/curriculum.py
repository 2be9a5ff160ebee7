"""Success-rate-driven task sampling: spend rollouts where the policy still fails."""

from __future__ import annotations

import torch

# Keeps fully solved tasks (SR == 1) at a tiny but non-zero probability, so they are still revisited
# and a forgotten skill can show up again in the success rates.
_FLOOR = 1e-9

# trainer.curriculum_weighting: curriculum_weights (hardest first) | learnability_weights (mixed outcomes first)
CURRICULUM_WEIGHTINGS = ("failure", "learnability")


def _checked_rates(success_rates, temperature: float) -> torch.Tensor:
    """success_rates as a floating [K] tensor, after checking it and the temperature."""
    sr = torch.as_tensor(success_rates)
    if not sr.is_floating_point():
        sr = sr.to(torch.get_default_dtype())
    if sr.dim() != 1 or sr.numel() == 0:
        raise ValueError(f"success_rates must be a non-empty 1-D [K] tensor, got shape {tuple(sr.shape)}")
    if bool(torch.isnan(sr).any()) or bool(((sr < 0) | (sr > 1)).any()):
        raise ValueError(f"success_rates must lie in [0, 1], got {sr.tolist()}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    return sr


def curriculum_weights(success_rates: torch.Tensor, temperature: float) -> torch.Tensor:
    """Sampling probabilities ``p_k ∝ (1 - SR_k + 1e-9) ** (1 / temperature)``.

    Low temperature concentrates sampling on the hardest tasks; high temperature tends to uniform.
    Computed as a softmax of log-weights, so a small temperature cannot underflow every weight to 0.

    Args:
        success_rates: [K] success rates in [0, 1].
        temperature: > 0.

    Returns:
        [K] probabilities summing to 1 (float32 unless the input is float64).
    """
    sr = _checked_rates(success_rates, temperature)
    # float64 for the log: 1 - SR + 1e-9 is not representable in float32 near SR == 1.
    log_w = torch.log(1.0 - sr.double() + _FLOOR) / temperature
    return torch.softmax(log_w, dim=0).to(sr.dtype)


# Seeds whose last groups all hit or all missed carry no group-relative signal; this floor keeps them in
# rotation (about a twelfth of the weight of a seed solved 1 time in 8), so a seed the policy now half-solves
# is found again.
_LEARNABILITY_FLOOR = 0.01


def learnability_weights(success_rates: torch.Tensor, tried: torch.Tensor, temperature: float) -> torch.Tensor:
    """Sampling probabilities ``p_k ∝ (SR_k (1 - SR_k) + 0.01) ** (1 / temperature)``; an untried seed
    counts as SR = 0.5 (the most learnable), so every seed is visited early.

    ``SR (1 - SR)`` is the variance of a seed's 0/1 outcome: largest where a group's answers disagree,
    which is where a group-relative advantage has signal; solved and hopeless seeds get the floor.

    Args:
        success_rates: [K] success rates in [0, 1] (ignored where not tried).
        tried: [K] bool, whether the seed has any recorded outcome.
        temperature: > 0.

    Returns:
        [K] probabilities summing to 1 (float32 unless the input is float64).
    """
    sr = _checked_rates(success_rates, temperature)
    tried = torch.as_tensor(tried, dtype=torch.bool)
    if tried.shape != sr.shape:
        raise ValueError(f"success_rates and tried must have one shape, got {tuple(sr.shape)} and {tuple(tried.shape)}")
    p = torch.where(tried, sr.double(), torch.full_like(sr, 0.5, dtype=torch.float64))
    log_w = torch.log(p * (1.0 - p) + _LEARNABILITY_FLOOR) / temperature
    return torch.softmax(log_w, dim=0).to(sr.dtype)
